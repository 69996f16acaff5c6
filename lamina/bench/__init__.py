"""`lamina bench ...`: measurements that print JSON and compare against a baseline in the same run.

Benchmarks live in the package so they run from an installed copy. Tests never time anything;
numbers come from here.
"""

from __future__ import annotations

import click

from .agent import agent_bench
from .cache import cache_bench
from .compile import compile_bench
from .latency import latency_bench
from .locomo import locomo_bench
from .read import read_bench
from .tokens import tokens_bench
from .turns import turns_bench

__all__ = ["bench"]


@click.group()
def bench() -> None:
    """Benchmarks: JSON on stdout, a baseline measured in the same run."""


bench.add_command(turns_bench)
bench.add_command(read_bench)
bench.add_command(tokens_bench)
bench.add_command(locomo_bench)
bench.add_command(latency_bench)
bench.add_command(cache_bench)
bench.add_command(compile_bench)
bench.add_command(agent_bench)
