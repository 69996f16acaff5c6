"""The forest of summaries and the frontier: what a compile shows for every stretch of the log.

The log is laid out as a head (the opening messages, kept raw), the compressible middle cut
into chunks, and a tail (the newest messages and the last, still open chunk, kept raw). Each
chunk is shown raw or through a summary: a level-1 summary stands for one chunk, a level-k+1
summary for `fan_in` consecutive level-k summaries. Summaries are written once and cached by
the span they cover, so a later compile that needs the same one reuses it.

Folding happens only when the request would not fit, oldest first, and then goes well below the
budget (to `slack` of it) so the next fold, which changes the request's prefix, is far away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import LaminaError
from ..tokens import count_text
from .chunks import Chunk, cut_chunks, first_boundary_after
from .log import ContextLog
from .summarise import Summariser

__all__ = ["CompileOptions", "Frontier", "OverBudgetError", "Summary", "choose_frontier"]

PAIR_OVERHEAD = 16
"""Tokens of a recall pair beyond its summary: the `[CM] Recall memory <id>.` turn and framing."""


class OverBudgetError(LaminaError):
    """Even with everything folded as deep as it goes, the request does not fit."""

    exit_code = 6


@dataclass(frozen=True, slots=True)
class CompileOptions:
    budget: int = 32_000
    reserve: int = 4_000
    """Tokens kept free for the reply."""
    head_share: float = 0.10
    recent_share: float = 0.25
    chunk_share: float = 0.10
    chunk_max: int = 6_000
    fan_in: int = 4
    slack: float = 0.60
    """After a fold, the request takes at most this share of the budget. Replaying the shared
    spotter sessions at 32k, 0.6 gives 8-10 prefix breaks and a cached share at 98.5% of its
    ceiling, against 12-13 breaks and 96% at 0.8 (`lamina bench cache`)."""

    @property
    def available(self) -> int:
        return self.budget - self.reserve

    @property
    def largest_message(self) -> int:
        """A raw message above this many tokens is shown cut, with a marker."""
        return max(200, self.available // 4)


@dataclass(frozen=True, slots=True)
class Summary:
    id: str
    level: int
    start: int
    end: int
    text: str
    tokens: int
    children: tuple[str, ...]
    summariser: str


@dataclass
class Frontier:
    """The chosen layout: raw spans and summaries in log order."""

    head_end: int
    items: list[tuple[int, int] | Summary]
    tail_start: int
    tokens: int
    folded: int = 0
    summaries: dict[str, Summary] = field(default_factory=dict)


class Forest:
    """Summaries by span, written once."""

    def __init__(self, summariser: Summariser) -> None:
        self.summariser = summariser
        self.nodes: dict[tuple[int, int, int], Summary] = {}
        self.written = 0

    def _make(
        self, level: int, start: int, end: int, text: str, children: Sequence[str]
    ) -> Summary:
        digest = hashlib.sha1(f"{level}:{start}:{end}:{text}".encode()).hexdigest()[:8]
        node = Summary(
            id=f"L{level}-{start}-{end}-{digest}",
            level=level,
            start=start,
            end=end,
            text=text,
            tokens=count_text(text),
            children=tuple(children),
            summariser=self.summariser.name,
        )
        self.nodes[(level, start, end)] = node
        self.written += 1
        return node

    def level1(self, log: ContextLog, chunk: Chunk) -> Summary:
        found = self.nodes.get((1, chunk.start, chunk.end))
        if found is not None:
            return found
        target = max(80, min(600, chunk.tokens // 8))
        text = self.summariser.summarise(log.slice(chunk.start, chunk.end), target)
        return self._make(1, chunk.start, chunk.end, text, ())

    def merge(self, nodes: Sequence[Summary]) -> Summary:
        level = nodes[0].level + 1
        key = (level, nodes[0].start, nodes[-1].end)
        found = self.nodes.get(key)
        if found is not None:
            return found
        target = max(120, min(900, sum(n.tokens for n in nodes) // 2))
        text = self.summariser.merge([n.text for n in nodes], target)
        return self._make(level, key[1], key[2], text, [n.id for n in nodes])


def _display_tokens(log: ContextLog, start: int, end: int, largest: int) -> int:
    return sum(min(t, largest) for t in log.tokens[start:end])


def _recent_start(log: ContextLog, tokens: int) -> int:
    total = 0
    for i in range(len(log) - 1, -1, -1):
        total += log.tokens[i]
        if total >= tokens:
            return i
    return 0


def _reuse(
    items: list[tuple[int, int] | Summary], previous: Frontier | None
) -> list[tuple[int, int] | Summary]:
    """Keep the previous compile's folds where they still line up with the chunks: the same
    prefix as last time, so the provider's cache keeps serving it."""
    if previous is None:
        return items
    out = list(items)
    for summary in previous.summaries.values():
        starts = [
            i
            for i, item in enumerate(out)
            if not isinstance(item, Summary) and item[0] == summary.start
        ]
        ends = [
            i
            for i, item in enumerate(out)
            if not isinstance(item, Summary) and item[1] == summary.end
        ]
        if starts and ends and starts[0] <= ends[0]:
            first, last = starts[0], ends[0]
            if all(not isinstance(x, Summary) for x in out[first : last + 1]):
                out[first : last + 1] = [summary]
    return out


def choose_frontier(
    log: ContextLog,
    forest: Forest,
    options: CompileOptions,
    previous: Frontier | None = None,
    limit: int | None = None,
) -> Frontier:
    """`limit`: the estimate to stay under (default: the budget less the reserve); the compiler
    lowers it when the rendered request came out above its estimate."""
    avail = options.available if limit is None else limit
    largest = options.largest_message
    head_end = first_boundary_after(
        log.messages, log.tokens, 0, int(options.available * options.head_share)
    ) or len(log)
    chunk_target = max(400, min(options.chunk_max, int(options.available * options.chunk_share)))
    chunks = (
        cut_chunks(log.messages, log.tokens, head_end, chunk_target) if head_end < len(log) else []
    )
    recent = _recent_start(log, int(options.available * options.recent_share))
    complete = [c for c in chunks if c.complete]
    middle = [c for c in complete if c.end <= recent]
    # Complete chunks inside the recent window: raw by preference, folded only when nothing
    # older is left to fold and the request still does not fit.
    spare = [c for c in complete if c.end > recent]
    tail_start = middle[-1].end if middle else head_end
    items = _reuse([(c.start, c.end) for c in middle], previous)
    head_tokens = _display_tokens(log, 0, head_end, largest)

    def cost() -> int:
        total = head_tokens + _display_tokens(log, tail_start, len(log), largest)
        for item in items:
            if isinstance(item, Summary):
                total += item.tokens + PAIR_OVERHEAD
            else:
                total += _display_tokens(log, item[0], item[1], largest)
        return total

    def fold(target: int) -> int:
        count = 0
        # Oldest raw chunks first, into level-1 summaries.
        for index, item in enumerate(items):
            if cost() <= target:
                return count
            if not isinstance(item, Summary):
                chunk = next(c for c in complete if c.start == item[0])
                items[index] = forest.level1(log, chunk)
                count += 1
        # Then the oldest runs of same-level summaries into deeper ones.
        while cost() > target:
            run = _oldest_run(items, options.fan_in)
            if run is None:
                break
            first, size = run
            group = [i for i in items[first : first + size] if isinstance(i, Summary)]
            items[first : first + size] = [forest.merge(group)]
            count += 1
        return count

    folded = 0
    if cost() > avail:  # fold only when the budget requires it, then well below it
        target = int(avail * options.slack)
        folded += fold(target)
        while cost() > avail and spare:
            chunk = spare.pop(0)
            items.append(forest.level1(log, chunk))
            tail_start = chunk.end
            folded += 1 + fold(target)
    total = cost()
    if total > avail:
        raw_end = _display_tokens(log, tail_start, len(log), largest)
        raise OverBudgetError(
            f"the request needs {total} tokens with everything folded, {total - avail} over the "
            f"{avail} available (budget {options.budget} minus reserve {options.reserve}); the "
            f"head and the newest messages, kept raw, alone take {head_tokens + raw_end}"
        )
    summaries = {i.id: i for i in items if isinstance(i, Summary)}
    return Frontier(head_end, items, tail_start, total, folded, summaries)


def _oldest_run(items: Sequence[tuple[int, int] | Summary], fan_in: int) -> tuple[int, int] | None:
    """The oldest run of `fan_in` consecutive summaries of the lowest level present (or of at
    least two, when no full run is left)."""
    levels = sorted({i.level for i in items if isinstance(i, Summary)})
    for level in levels:
        for size in (fan_in, 2):
            for start in range(len(items) - size + 1):
                window = items[start : start + size]
                if all(isinstance(i, Summary) and i.level == level for i in window):
                    return start, size
    return None
