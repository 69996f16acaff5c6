"""`lamina bench read`: read time and peak memory of a transcript, streamed by Lamina, against
a baseline that loads every line with the standard json module into a list first.

Each variant runs in a fresh child process so its peak resident memory is its own.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from ..readers import read_messages
from .common import count_option, emit, json_option, transcript_files

__all__ = ["read_bench"]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _run(variant: str, path: str) -> dict[str, Any]:
    start_mb = _peak_mb()
    started = time.perf_counter()
    if variant == "lamina_stream":
        count = sum(1 for _ in read_messages(path))
    elif variant == "lamina_list":
        count = len(list(read_messages(path)))
    else:  # baseline: every line parsed into memory first
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        count = len(records)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "messages_or_records": count,
        "peak_rss_mb": round(_peak_mb(), 1),
        "peak_rss_growth_mb": round(_peak_mb() - start_mb, 1),
    }


def _child(variant: str, path: str, queue: Any) -> None:
    queue.put(_run(variant, path))


def _in_child(variant: str, path: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(variant, path, queue))
    proc.start()
    result: dict[str, Any] = queue.get()
    proc.join()
    return result


@click.command("read")
@click.option(
    "--file", "file", default=None, help="Transcript to read (default: the largest shared one)."
)
@count_option(
    "--repeat",
    at_least=1,
    default=1,
    help="Concatenate the file this many times first, to measure a much larger input.",
)
@json_option
def read_bench(file: str | None, repeat: int, as_json: bool) -> None:
    """Read time and peak memory: Lamina's streaming reader against load-everything.

    Example: lamina bench read --file examples/session.jsonl --repeat 1000 --json"""
    source = Path(file) if file else max(transcript_files(None), key=lambda p: p.stat().st_size)
    with tempfile.TemporaryDirectory(prefix="lamina-bench-") as tmp:
        path = source
        if repeat > 1:
            path = Path(tmp) / f"{source.stem}.x{repeat}.jsonl"
            with path.open("wb") as out:
                for _ in range(repeat):
                    with source.open("rb") as src:
                        shutil.copyfileobj(src, out)
        size_mb = path.stat().st_size / 1e6
        variants = {
            name: _in_child(name, str(path))
            for name in ("lamina_stream", "lamina_list", "baseline_json_list")
        }
    for result in variants.values():
        result["mb_per_s"] = round(size_mb / max(result["seconds"], 1e-9), 1)
    emit(
        {
            "benchmark": "read",
            "file": str(source),
            "repeat": repeat,
            "size_mb": round(size_mb, 1),
            **variants,
        },
        as_json,
    )
