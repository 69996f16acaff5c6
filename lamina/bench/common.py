"""Helpers shared by the benchmarks: finding the shared data, printing results."""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import click
import numpy as np
import numpy.typing as npt
import orjson

from ..bank.plan import recall_from_store
from ..bank.recall import RecallOptions
from ..cli.common import count_option, json_option
from ..embed import Embedder
from ..embed.base import QueryVectors
from ..errors import InputError
from ..store.search import SearchStore

__all__ = [
    "SERVING",
    "Precomputed",
    "compile_budget_options",
    "count_option",
    "database_url_option",
    "embedder_option",
    "emit",
    "json_option",
    "percentiles",
    "recall_ms",
    "serving_recall_ms",
    "shared_data_dir",
    "shipped_or_file",
    "sizes_option",
    "transcript_files",
    "transcripts_option",
]


def shared_data_dir(sub: str) -> Path | None:
    """`../shared/data/<sub>` seen from the working directory or from a source checkout."""
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        candidate = base.parent / "shared" / "data" / sub
        if candidate.is_dir():
            return candidate
    return None


def shipped_or_file(name: str, shipped: Mapping[str, str], what: str, listing: str) -> str:
    """The text of a data set shipped with the benchmarks (`shipped`: name -> file in
    lamina/bench/data) or else of the file `name`; an InputError naming `what` could not be
    read and, after `listing`, the shipped names."""
    try:
        if name in shipped:
            return resources.files("lamina.bench").joinpath(f"data/{shipped[name]}").read_text()
        return Path(name).read_text(encoding="utf-8")
    except OSError as e:
        known = ", ".join(shipped)
        raise InputError(f"{name}: cannot read {what} ({e.strerror}); {listing}: {known}") from None


def locomo_file(data: str | None) -> str:
    """The LoCoMo file a benchmark reads: `data`, else the shared dev set."""
    if data is not None:
        return data
    folder = shared_data_dir("locomo")
    if folder is None:
        raise InputError("no --data given and ../shared/data/locomo not found")
    return str(folder / "locomo-dev.json")


def transcript_files(data: str | None) -> list[Path]:
    """The Claude Code transcripts of a folder (or one file), sorted."""
    if data is None:
        found = shared_data_dir("claude-code")
        if found is None:
            raise InputError("no --data given and ../shared/data/claude-code not found")
        root = found
    else:
        root = Path(data)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise InputError(f"{root}: no such file or folder")
    files = sorted(p for p in root.glob("*.jsonl") if p.is_file())
    if not files:
        raise InputError(f"{root}: no .jsonl transcripts in this folder")
    return files


def emit(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


class Precomputed(QueryVectors):
    """An embedder that answers queries from vectors computed before the timing (a query that
    was not is a KeyError: the benchmark would otherwise time its embedding)."""

    def __init__(self, inner: Embedder, queries: Sequence[str]) -> None:
        vectors = inner.embed_documents(list(queries))
        super().__init__(inner, dict(zip(queries, vectors, strict=True)))

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.vectors[text]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of timings in milliseconds, rounded to hundredths (0 when there are none)."""
    ordered = sorted(values) or [0.0]
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
    }


def recall_ms(
    store: SearchStore,
    bank: str,
    queries: Iterable[str],
    embedder: Embedder,
    options: RecallOptions,
) -> list[float]:
    """Milliseconds each recall of `queries` takes, one after the other (`embedder` is best a
    `Precomputed`, so that embedding the query is not timed)."""
    timings: list[float] = []
    for query in queries:
        t0 = time.perf_counter()
        recall_from_store(store, bank, query, embedder, options)
        timings.append((time.perf_counter() - t0) * 1000)
    return timings


SERVING = RecallOptions(budget=1_000_000, limit=10, collapse=False)
"""Recall as a server runs it: every channel, the time channel searching for the questions
that name a time."""


def serving_recall_ms(
    store: SearchStore, bank: str, embedder: Embedder, dated: Sequence[str], undated: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Serving recall (`SERVING`) timed on the questions that name a time and on those that do
    not, apart: the two reports' entries."""
    dated_ms = recall_ms(store, bank, dated, embedder, SERVING)
    undated_ms = recall_ms(store, bank, undated, embedder, SERVING)
    return {
        "serving_undated_recall_ms": percentiles(undated_ms),
        "serving_dated_recall_ms": percentiles(dated_ms),
    }


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a server a benchmark starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_ms(pid: int) -> float:
    """CPU time (user + sys) a running process has used so far, from /proc (NaN if unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def embedder_option(
    help: str = "The dense channel's model, by name ('default', 'minilm-l6', 'hash').",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--embedder NAME (into `embedder_name`), as every recall benchmark takes it."""
    return click.option(
        "--embedder", "embedder_name", default="default", show_default=True, help=help
    )


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def transcripts_option(help: str) -> Decorator:
    """--transcript FILE, repeatable (into `transcripts`), as the compile benchmarks take it."""
    return click.option("--transcript", "transcripts", multiple=True, help=help)


def compile_budget_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--budget and --reserve of the compiled context, as the compile benchmarks take them."""
    f = click.option("--reserve", type=click.IntRange(min=0), default=4_000, show_default=True)(f)
    return click.option(
        "--budget", type=click.IntRange(min=2000), default=32_000, show_default=True
    )(f)


def database_url_option(help: str) -> Decorator:
    """--database-url URL: a PostgreSQL database a benchmark also measures."""
    return click.option("--database-url", default=None, metavar="URL", help=help)


def sizes_option(*decls: str, help: str) -> Decorator:
    """Bank sizes to build and measure, repeatable; 10k and 100k memories by default."""
    return click.option(
        *decls, multiple=True, type=int, default=(10_000, 100_000), show_default=True, help=help
    )
