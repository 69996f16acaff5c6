"""`lamina bench turns`: what "the last N turns" holds when every user-role record is a turn
boundary (the baseline, as a well-known memory plugin counts) against Lamina's turns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ..bank.query import QueryOptions, compose_recall_query
from ..messages import SYNTHETIC_KINDS, Message, Role
from ..readers import read_transcript
from ..turns import conversational_text, is_turn_start, last_turns
from .common import emit, json_option, transcript_files

__all__ = ["turns_bench"]


def naive_last_turns(messages: Sequence[Message], n: int) -> list[Message]:
    """The baseline: every user-role record starts a turn (tool results included)."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.USER:
            seen += 1
            if seen == n:
                return list(messages[i:])
    return list(messages)


def _window_figures(window: Sequence[Message]) -> dict[str, int]:
    chars = sum(
        len(conversational_text(m))
        for m in window
        if m.role in (Role.USER, Role.ASSISTANT) and m.kind not in SYNTHETIC_KINDS
    )
    return {
        "records": sum(max(1, len(m.records)) for m in window),
        "turns": sum(1 for m in window if is_turn_start(m)),
        "context_chars": chars,
    }


def measure(messages: Sequence[Message], n: int) -> dict[str, Any]:
    query = compose_recall_query(messages, options=QueryOptions(context_turns=n))
    return {
        "naive": _window_figures(naive_last_turns(messages, n)),
        "lamina": {
            **_window_figures(last_turns(messages, n)),
            "query_chars": query.chars,
            "query_turns": query.turns,
        },
    }


@click.command("turns")
@click.option(
    "--data", default=None, help="A transcript or a folder of them (default: shared data)."
)
@click.option("--n", "ns", multiple=True, type=int, default=(3, 5), show_default=True)
@json_option
def turns_bench(data: str | None, ns: tuple[int, ...], as_json: bool) -> None:
    """Last-N-turns windows: naive user-record boundaries against conversational turns.

    Example: lamina bench turns --data examples/session.jsonl --n 3 --json"""
    results: dict[str, Any] = {}
    for path in transcript_files(data):
        transcript = read_transcript(str(path))
        messages = transcript.messages
        user_records = [m for m in messages if m.role is Role.USER]
        tool_only = [
            m for m in user_records if m.blocks and all(b.type == "tool_result" for b in m.blocks)
        ]
        results[path.name] = {
            "user_records": len(user_records),
            "tool_result_only_share": round(len(tool_only) / max(1, len(user_records)), 3),
            "turns": sum(1 for m in messages if is_turn_start(m)),
            **{f"n={n}": measure(messages, n) for n in ns},
        }
    emit({"benchmark": "turns", "files": results}, as_json)
