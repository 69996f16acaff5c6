"""`lamina bench ...`: measurements that print JSON and compare against a baseline in the same run.

Benchmarks live in the package so they run from an installed copy. Tests never time anything;
numbers come from here. Each benchmark's module (numpy and all) is imported only when that
benchmark, or `lamina bench --help`, runs: `lamina --help` stays light.
"""

from __future__ import annotations

import click

from ..cli.lazy import LazyGroup

__all__ = ["BENCHMARKS", "bench"]

BENCHMARKS: dict[str, str] = {
    "turns": "turns:turns_bench",
    "read": "read:read_bench",
    "tokens": "tokens:tokens_bench",
    "locomo": "locomo:locomo_bench",
    "fusion": "fusion:fusion_bench",
    "latency": "latency:latency_bench",
    "term-cache": "term_cache:term_cache_bench",
    "cache": "cache:cache_bench",
    "compile": "compile:compile_bench",
    "hook": "hook:hook_bench",
    "agent": "agent:agent_bench",
    "quiet": "quiet:quiet_bench",
    "mcp": "mcp:mcp_bench",
    "inspector": "inspector:inspector_bench",
    "retain": "retain:retain_bench",
}
"""Benchmark name -> `module:command` inside this package."""


class _LazyGroup(LazyGroup):
    lazy_commands = BENCHMARKS
    package = __name__


@click.group(cls=_LazyGroup)
def bench() -> None:
    """Benchmarks: JSON on stdout, a baseline measured in the same run."""
