"""The frontier: what a compile shows for every stretch of the log.

The log is laid out as a head (the opening messages, kept raw), the compressible middle cut
into chunks, and a tail (the newest messages and the last, still open chunk, kept raw). Each
chunk is shown raw or through a summary: a level-1 summary stands for one chunk, a level-k+1
summary for `fan_in` consecutive level-k summaries. Summaries are written once and cached by
the span they cover, so a later compile that needs the same one reuses it.

A fold changes the request's prefix, and everything after the first changed block is sent
again uncached. So a compile keeps the previous compile's folds and folds only when the request
would not fit; then it folds deep at once, oldest first: every complete chunk older than the
recent window, so that the next fold is far away. Between folds the raw tail grows back. The
head and the summaries before the first newly folded chunk stay as they were (cached).
Token estimates use what each message costs as sent (`ContextLog.shown`: thinking left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import LaminaError
from .chunks import Chunk, cut_chunks, head_end
from .forest import Forest, Summary
from .log import ContextLog

__all__ = [
    "CompileOptions",
    "Frontier",
    "OverBudgetError",
    "choose_frontier",
]

PAIR_OVERHEAD = 16
"""Tokens of a recall pair beyond its summary: the `[CM] Recall memory <id>.` turn and framing."""

CUT_MARGIN = 40
"""Tokens a message cut to fit its place may take beyond its allowance (the marker)."""


class OverBudgetError(LaminaError):
    """Even with everything folded as deep as it goes, the request does not fit."""

    exit_code = 6


@dataclass(frozen=True, slots=True)
class CompileOptions:
    budget: int = 32_000
    reserve: int = 4_000
    """Tokens kept free for the reply."""
    head_share: float = 0.20
    """The opening messages kept raw (cut at the message boundary nearest this share of the
    budget): the task as first stated, and a prefix that never changes."""
    recent_share: float = 0.05
    """The newest messages a fold leaves raw, with the chunks they are in; between folds the raw
    tail grows back. A small window here leaves more room before the next fold (replaying the
    shared spotter sessions at 32k: 6-8 folds and a cached share 0.5 point above compacting, where
    0.25 gave 8-10 folds and a share below it; `lamina bench cache`)."""
    chunk_share: float = 0.10
    chunk_max: int = 6_000
    fan_in: int = 4
    summary_share: float = 0.15
    """When a fold leaves the summaries above this share of the budget, their oldest runs merge
    into deeper levels, in the same fold, until they take half of it."""

    @property
    def available(self) -> int:
        return self.budget - self.reserve

    @property
    def largest_message(self) -> int:
        """A raw message above this many tokens is shown cut, with a marker."""
        return max(200, self.available // 4)


@dataclass
class Frontier:
    """The chosen layout: raw spans and summaries in log order."""

    head_end: int
    items: list[tuple[int, int] | Summary]
    tail_start: int
    tokens: int
    folded: int = 0
    summaries: dict[str, Summary] = field(default_factory=dict)
    chunks: tuple[Chunk, ...] = ()
    """The complete chunks this layout was cut into, of `chunk_target` tokens: the next compile
    of the same, longer log resumes cutting after them (boundaries never move)."""
    chunk_target: int = 0


class _Plan:
    """The layout being chosen, with its estimated cost kept up to date as items change."""

    def __init__(self, log: ContextLog, largest: int) -> None:
        self.prefix = [0]
        total = 0
        for shown, uncut in zip(log.shown, log.uncut, strict=True):
            if shown > largest:  # cut to fit: its text and tool results, with a marker each
                shown = min(shown, uncut + largest + CUT_MARGIN)
            total += shown
            self.prefix.append(total)

    def span(self, start: int, end: int) -> int:
        return self.prefix[end] - self.prefix[start]

    def item(self, item: tuple[int, int] | Summary) -> int:
        if isinstance(item, Summary):
            return item.tokens + PAIR_OVERHEAD
        return self.span(item[0], item[1])


def _recent_start(plan: _Plan, tokens: int) -> int:
    """The first message of the newest `tokens` of the log."""
    end = len(plan.prefix) - 1
    for i in range(end - 1, -1, -1):
        if plan.span(i, end) >= tokens:
            return i
    return 0


def _reuse(complete: Sequence[Chunk], previous: Frontier | None) -> list[tuple[int, int] | Summary]:
    """The complete chunks, each raw unless the previous compile showed it through a summary
    that still lines up with the chunks: the same prefix as last time, so the provider's cache
    keeps serving it."""
    folds = {}
    if previous is not None:
        folds = {i.start: i for i in previous.items if isinstance(i, Summary)}
    ends = {c.end for c in complete}
    items: list[tuple[int, int] | Summary] = []
    index = 0
    while index < len(complete):
        chunk = complete[index]
        summary = folds.get(chunk.start)
        if summary is not None and summary.end in ends:
            items.append(summary)
            while index < len(complete) and complete[index].end <= summary.end:
                index += 1
        else:
            items.append((chunk.start, chunk.end))
            index += 1
    return items


def choose_frontier(
    log: ContextLog,
    forest: Forest,
    options: CompileOptions,
    previous: Frontier | None = None,
    limit: int | None = None,
) -> Frontier:
    """`limit`: the estimate to stay under (default: the budget less the reserve); the compiler
    lowers it when the rendered request came out above its estimate.

    The previous compile's folds are kept. When the request no longer fits, one fold makes room
    for many calls to come: every complete chunk older than the recent window becomes a level-1
    summary, and when the summaries then take more than `summary_share` of the budget, their
    oldest runs merge into deeper levels until they take half of that. Only if the request still
    does not fit are summaries merged further, and then chunks of the recent window folded."""
    avail = options.available if limit is None else limit
    plan = _Plan(log, options.largest_message)
    head = head_end(log.messages, log.shown, int(options.available * options.head_share))
    chunk_target = max(400, min(options.chunk_max, int(options.available * options.chunk_share)))
    complete = _complete_chunks(log, head, chunk_target, previous)
    open_start = complete[-1].end if complete else head
    items = _reuse(complete, previous)
    by_start = {c.start: c for c in complete}
    head_tokens = plan.span(0, head)
    fixed = head_tokens + plan.span(open_start, len(log))
    cost = fixed + sum(plan.item(i) for i in items)

    def summaries() -> int:
        return sum(plan.item(i) for i in items if isinstance(i, Summary))

    def fold_chunk(index: int) -> None:
        nonlocal cost
        item = items[index]
        assert not isinstance(item, Summary)
        summary = forest.level1(log, by_start[item[0]])
        cost += plan.item(summary) - plan.item(item)
        items[index] = summary

    def merge_oldest() -> bool:
        nonlocal cost
        run = _oldest_run(items, options.fan_in)
        if run is None:
            return False
        first, size = run
        group = [i for i in items[first : first + size] if isinstance(i, Summary)]
        merged = forest.merge(group)
        cost += plan.item(merged) - sum(plan.item(i) for i in group)
        items[first : first + size] = [merged]
        return True

    folded = 0
    if cost > avail:  # fold only when the budget requires it, then far below it
        recent = _recent_start(plan, int(options.available * options.recent_share))
        for index, item in enumerate(items):
            if isinstance(item, Summary):
                continue
            if item[1] > recent:
                break
            fold_chunk(index)
            folded += 1
        cap = int(options.available * options.summary_share)
        if summaries() > cap:
            while summaries() > cap // 2 and merge_oldest():
                folded += 1
        # Still over: deeper, then into the recent window, as far as the budget needs.
        while cost > avail:
            if not merge_oldest():
                raw = next((n for n, i in enumerate(items) if not isinstance(i, Summary)), None)
                if raw is None:
                    break
                fold_chunk(raw)
            folded += 1
    if cost > avail:
        # Below the budget, `limit` leaves room for what rendering adds beyond the estimate.
        needs = cost + options.available - avail
        raise OverBudgetError(
            f"the request needs {needs} tokens with everything folded, {cost - avail} over the "
            f"{options.available} available (budget {options.budget} minus reserve "
            f"{options.reserve}); the head and the newest messages, kept raw, alone take {fixed}"
        )
    # Raw chunks after the last summary belong to the tail.
    tail_start = open_start
    while items:
        last = items[-1]
        if isinstance(last, Summary):
            break
        tail_start = last[0]
        items.pop()
    summaries_shown = {i.id: i for i in items if isinstance(i, Summary)}
    return Frontier(
        head, items, tail_start, cost, folded, summaries_shown, tuple(complete), chunk_target
    )


def _complete_chunks(
    log: ContextLog, head: int, target: int, previous: Frontier | None
) -> list[Chunk]:
    known: list[Chunk] = []
    if (
        previous is not None
        and previous.chunks
        and previous.chunk_target == target
        and previous.chunks[0].start == head
        and previous.chunks[-1].end <= len(log)
    ):
        known = list(previous.chunks)
    at = known[-1].end if known else head
    if at >= len(log):
        return known
    return known + [c for c in cut_chunks(log.messages, log.shown, at, target) if c.complete]


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
