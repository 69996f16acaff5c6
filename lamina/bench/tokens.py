"""`lamina bench tokens`: how Lamina's token counts compare with Claude's own, and how fast.

Claude Code records each API response's usage: the request's input tokens (uncached, cache
writes and cache reads). Between two consecutive requests of the main conversation the request
grows by what was added in between (the previous reply and the tool results or prompt that
followed), so the growth in Claude's count can be set against Lamina's count of those messages.
Pairs where the request shrank (a compaction) or jumped implausibly are skipped. The baseline
is the common shortcut of four characters a token.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from ..messages import Kind, Message, Role
from ..readers import read_transcript
from ..tokens import TiktokenCounter, count_message, count_text, default_counter
from .common import emit, json_option, transcript_files

__all__ = ["tokens_bench"]

MAX_GROWTH = 50_000
"""Request growth above this between two calls is treated as something else (a reset)."""


def _request_tokens(message: Message) -> int | None:
    for record in message.records:
        body = record.get("message")
        usage = body.get("usage") if isinstance(body, Mapping) else None
        if isinstance(usage, Mapping):
            keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            return sum(int(usage.get(k) or 0) for k in keys)
    return None


def _chars_estimate(message: Message) -> int:
    return len(orjson.dumps(list(message.blocks), default=str)) // 4


def calibrate(messages: Sequence[Message]) -> dict[str, Any]:
    claude = ours = chars = pairs = 0
    previous: int | None = None
    pending_ours = pending_chars = 0
    for message in messages:
        if message.role not in (Role.USER, Role.ASSISTANT) or message.kind is Kind.SIDECHAIN:
            continue
        if message.role is Role.ASSISTANT:
            total = _request_tokens(message)
            if total is not None:
                if previous is not None and 0 < total - previous < MAX_GROWTH and pending_ours:
                    claude += total - previous
                    ours += pending_ours
                    chars += pending_chars
                    pairs += 1
                previous = total
                pending_ours = pending_chars = 0
        pending_ours += count_message(message)
        pending_chars += _chars_estimate(message)
    return {
        "pairs": pairs,
        "claude_tokens": claude,
        "lamina_tokens": ours,
        "chars_div_4_tokens": chars,
        "claude_over_lamina": round(claude / ours, 3) if ours else None,
        "claude_over_chars_div_4": round(claude / chars, 3) if chars else None,
    }


@click.command("tokens")
@click.option(
    "--data", default=None, help="A transcript or a folder of them (default: shared data)."
)
@json_option
def tokens_bench(data: str | None, as_json: bool) -> None:
    """Token counts against Claude's recorded usage, and counting speed.

    Example: lamina bench tokens --data examples/session.jsonl --json"""
    files = transcript_files(data)
    per_file: dict[str, Any] = {}
    totals = {"claude": 0, "lamina": 0, "chars": 0}
    for path in files:
        figures = calibrate(read_transcript(str(path)).messages)
        per_file[path.name] = figures
        totals["claude"] += figures["claude_tokens"]
        totals["lamina"] += figures["lamina_tokens"]
        totals["chars"] += figures["chars_div_4_tokens"]
    largest = max(files, key=lambda p: p.stat().st_size)
    text = Path(largest).read_text(encoding="utf-8", errors="replace")
    started = time.perf_counter()
    TiktokenCounter().count("a fresh counter loads its vocabulary")
    load_s = time.perf_counter() - started
    counter = default_counter()
    started = time.perf_counter()
    n_tokens = count_text(text)
    count_s = time.perf_counter() - started
    emit(
        {
            "benchmark": "tokens",
            "tokenizer": counter.name,
            "files": per_file,
            "overall": {
                "claude_over_lamina": round(totals["claude"] / totals["lamina"], 3)
                if totals["lamina"]
                else None,
                "claude_over_chars_div_4": round(totals["claude"] / totals["chars"], 3)
                if totals["chars"]
                else None,
            },
            "speed": {
                "file": largest.name,
                "mb": round(len(text.encode()) / 1e6, 2),
                "tokens": n_tokens,
                "vocabulary_load_s": round(load_s, 3),
                "count_s": round(count_s, 3),
                "tokens_per_s": round(n_tokens / count_s) if count_s else None,
            },
        },
        as_json,
    )
