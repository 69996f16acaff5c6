"""Chunks: the compressible middle of a log cut at message boundaries.

A boundary never falls between a tool call and its result, and a chunk never ends on a tool
call still waiting for its result. Boundaries are found by one greedy scan from the start of the
middle that looks only at what came before each boundary, so appending to the log never moves a
boundary already found; only the last chunk may still be open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, ToolResultBlock, ToolUseBlock

__all__ = ["Chunk", "cut_chunks", "first_boundary_after"]


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int
    end: int
    """`log[start:end]`."""
    tokens: int
    complete: bool
    """False for the last chunk while it has not reached its target size."""


def first_boundary_after(
    messages: Sequence[Message], tokens: Sequence[int], start: int, target: int
) -> int | None:
    """The first valid boundary at or after `target` tokens from `start` (None: not yet)."""
    total = 0
    waiting: set[str] = set()
    for i in range(start, len(messages)):
        for block in messages[i].blocks:
            if isinstance(block, ToolUseBlock):
                waiting.add(block.id)
            elif isinstance(block, ToolResultBlock):
                waiting.discard(block.tool_use_id)
        total += tokens[i]
        if total >= target and not waiting:
            return i + 1
    return None


def cut_chunks(
    messages: Sequence[Message], tokens: Sequence[int], start: int, target: int
) -> list[Chunk]:
    """Chunks of about `target` tokens from `start` to the end of the log."""
    chunks: list[Chunk] = []
    at = start
    while at < len(messages):
        end = first_boundary_after(messages, tokens, at, target)
        if end is None:
            chunks.append(Chunk(at, len(messages), sum(tokens[at:]), complete=False))
            break
        chunks.append(Chunk(at, end, sum(tokens[at:end]), complete=True))
        at = end
    return chunks
