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

__all__ = [
    "Chunk",
    "boundary_at_or_before",
    "cut_chunks",
    "first_boundary_after",
    "head_end",
]


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int
    end: int
    """`log[start:end]`."""
    tokens: int
    complete: bool
    """False for the last chunk while it has not reached its target size."""


def _track_calls(waiting: set[str], message: Message) -> None:
    """Update `waiting`, the ids of tool calls whose result has not come yet, with `message`
    (a boundary is valid only where nothing is waiting)."""
    for block in message.blocks:
        if isinstance(block, ToolUseBlock):
            waiting.add(block.id)
        elif isinstance(block, ToolResultBlock):
            waiting.discard(block.tool_use_id)


def first_boundary_after(
    messages: Sequence[Message], tokens: Sequence[int], start: int, target: int
) -> int | None:
    """The first valid boundary at or after `target` tokens from `start` (None: not yet)."""
    total = 0
    waiting: set[str] = set()
    for i in range(start, len(messages)):
        _track_calls(waiting, messages[i])
        total += tokens[i]
        if total >= target and not waiting:
            return i + 1
    return None


def head_end(messages: Sequence[Message], tokens: Sequence[int], target: int) -> int:
    """Where the head ends: the valid boundary nearest to `target` tokens (the last one within
    it or the first one past it), so one large opening message does not double the head. Until
    the log has a boundary past `target` it is all head. Decided by the messages up to that
    boundary, so appending never moves it."""
    total = 0
    waiting: set[str] = set()
    within = (0, 0)  # (boundary, tokens before it)
    for i in range(len(messages)):
        _track_calls(waiting, messages[i])
        total += tokens[i]
        if waiting:
            continue
        if total < target:
            within = (i + 1, total)
            continue
        if within[0] and target - within[1] < total - target:
            return within[0]
        return i + 1
    return len(messages)


def boundary_at_or_before(messages: Sequence[Message], position: int) -> int:
    """The last valid boundary at or before `position` (0 at worst)."""
    waiting: set[str] = set()
    best = 0
    for i in range(min(position, len(messages))):
        _track_calls(waiting, messages[i])
        if not waiting:
            best = i + 1
    return best


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
