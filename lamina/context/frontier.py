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

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import overload

from ..errors import LaminaError
from ..turns import is_turn_start
from .chunks import Chunk, boundary_at_or_before, cut_chunks, head_end
from .forest import Forest, Summary
from .log import ContextLog
from .pins import Pin, PinConflictError, pin_spans

__all__ = [
    "CompileOptions",
    "Frontier",
    "OverBudgetError",
    "choose_frontier",
    "prefix_break",
]

PAIR_OVERHEAD = 16
"""Tokens of a recall pair beyond its summary: the `[CM] Recall memory <id>.` turn and framing."""

CUT_MARGIN = 40
"""Tokens a message cut to fit its place may take beyond its allowance (the marker)."""


READY_FOLD_LEFT = 0.6
"""With `ready_first`, a fold that uses only the summaries already written must leave the
request at most this share of the space available; else it writes the missing ones too."""


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
    """The newest messages a fold leaves raw, widened or narrowed to the nearer end of the
    chunk the window starts in (see `_recent_start`); between folds the raw tail grows back.
    A small window here leaves more room before the next fold (replaying the shared spotter
    sessions at 32k: 6-8 folds and a cached share 0.5 point above compacting, where 0.25 gave
    8-10 folds and a share below it; `lamina bench cache`)."""
    head_tokens: int | None = None
    """The head in tokens, instead of `head_share` of the budget."""
    recent_tokens: int | None = None
    """The recent window in tokens, instead of `recent_share` of the budget."""
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
    def head(self) -> int:
        """The head's size in tokens."""
        if self.head_tokens is not None:
            return self.head_tokens
        return int(self.available * self.head_share)

    @property
    def recent(self) -> int:
        """The recent window's size in tokens."""
        if self.recent_tokens is not None:
            return self.recent_tokens
        return int(self.available * self.recent_share)

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
    pinned: tuple[tuple[Pin, int, int], ...] = ()
    """The stretches the pins held, as `(pin, start, end)` (`pin_spans`)."""
    unheld: tuple[tuple[int, int, int, str], ...] = ()
    """Runs of chunks an exact pin holds at a level whose summary could not be written, shown
    raw instead, as `(start, end, level, why)`."""


def _segments(frontier: Frontier) -> list[tuple[int, int] | Summary]:
    """The layout in log order, adjacent raw stretches joined (they render as one run), the
    recent window open-ended (a later log only adds to it)."""
    parts: list[tuple[int, int] | Summary] = [
        (0, frontier.head_end),
        *frontier.items,
        (frontier.tail_start, sys.maxsize),
    ]
    joined: list[tuple[int, int] | Summary] = []
    for part in parts:
        if isinstance(part, tuple):
            if part[0] >= part[1]:
                continue
            last = joined[-1] if joined else None
            if isinstance(last, tuple) and last[1] == part[0]:
                joined[-1] = (last[0], part[1])
                continue
        joined.append(part)
    return joined


def prefix_break(before: Frontier | None, after: Frontier) -> int | None:
    """The first log position whose rendering in `after` differs from `before`'s: where the
    provider's cached prefix of the previous request ends. None when `after` keeps all of
    `before` (it may only add at the end) or there was no previous layout."""
    if before is None:
        return None
    old_parts, new_parts = _segments(before), _segments(after)
    for old, new in zip(old_parts, new_parts, strict=False):
        if old == new:
            continue
        if isinstance(old, tuple) and isinstance(new, tuple) and old[0] == new[0]:
            return min(old[1], new[1])  # the same messages up to the shorter run's end
        return new[0] if isinstance(new, tuple) else new.start
    if len(old_parts) > len(new_parts):
        return after.tail_start
    return None


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


class _Sizes(Sequence[int]):
    """Each message's tokens as sent, read from a plan's running totals when asked (the head
    looks at the first few only)."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix

    def __len__(self) -> int:
        return len(self.prefix) - 1

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self.prefix[index + 1] - self.prefix[index]


def _recent_start(log: ContextLog, plan: _Plan, complete: Sequence[Chunk], tokens: int) -> int:
    """Where the recent window a fold leaves raw starts: complete chunks ending at or before it
    are folded. The window is the newest `tokens` of the log, widened or narrowed to the
    nearer end of the chunk it starts in, so that a chunk much larger than the window is not
    kept whole for a few of its messages. That chunk is kept when it holds the start of the
    newest turn (the user's latest request is not folded for headroom), or when it ends the
    log (the newest message stays raw)."""
    end = len(plan.prefix) - 1
    window = 0
    for i in range(end - 1, -1, -1):
        if plan.span(i, end) >= tokens:
            window = i
            break
    index = bisect_right([c.start for c in complete], window) - 1
    if index < 0 or complete[index].end <= window or complete[index].end >= end:
        return window
    edge = complete[index]
    if plan.span(edge.start, end) - tokens <= tokens - plan.span(edge.end, end):
        return window
    messages = log.messages
    if any(is_turn_start(m) for m in messages[edge.start : edge.end]) and not any(
        is_turn_start(m) for m in messages[edge.end : end]
    ):
        return window
    return edge.end


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


class _Holds:
    """The levels the pins allow each complete chunk (0 is raw), and the pins behind them."""

    def __init__(
        self,
        complete: Sequence[Chunk],
        spans: Sequence[tuple[Pin, int, int]],
    ) -> None:
        self.starts = [c.start for c in complete]
        self.low = [0] * len(complete)
        self.high = [_UNBOUNDED] * len(complete)
        self.by: list[list[Pin]] = [[] for _ in complete]
        self.active = bool(spans)
        for pin, start, end in spans:
            low, high = pin.allowed
            first = max(0, bisect_right(self.starts, start) - 1)
            for index in range(first, len(complete)):
                chunk = complete[index]
                if chunk.start >= end:
                    break
                if chunk.end <= start:
                    continue
                self.by[index].append(pin)
                self.low[index] = max(self.low[index], low)
                self.high[index] = min(self.high[index], high)
                if self.low[index] > self.high[index]:
                    other = next(p for p in self.by[index] if not _compatible(p, pin))
                    raise PinConflictError(
                        f"{other.describe()} and {pin.describe()} fall in the same chunk "
                        f"(messages {chunk.start}-{chunk.end - 1}) at this budget, and ask "
                        "for different levels of it; unpin one, or pin whole chunks alike"
                    )

    def chunks(self, start: int, end: int) -> range:
        """Indexes of the complete chunks within `log[start:end]`."""
        return range(bisect_left(self.starts, start), bisect_left(self.starts, end))

    def allows(self, item: tuple[int, int] | Summary, level: int) -> bool:
        """Whether every chunk `item` covers may be shown at `level`."""
        if not self.active:
            return True
        start, end = (item.start, item.end) if isinstance(item, Summary) else item
        return all(self.low[i] <= level <= self.high[i] for i in self.chunks(start, end))


_UNBOUNDED = 1 << 30


def _compatible(a: Pin, b: Pin) -> bool:
    return max(a.allowed[0], b.allowed[0]) <= min(a.allowed[1], b.allowed[1])


def _level(item: tuple[int, int] | Summary) -> int:
    return item.level if isinstance(item, Summary) else 0


def _unfold(
    items: list[tuple[int, int] | Summary], holds: _Holds, complete: Sequence[Chunk]
) -> list[tuple[int, int] | Summary]:
    """`items` with every summary the pins no longer allow shown as its raw chunks again."""
    out: list[tuple[int, int] | Summary] = []
    for item in items:
        if isinstance(item, Summary) and not holds.allows(item, item.level):
            out.extend(
                (complete[i].start, complete[i].end) for i in holds.chunks(item.start, item.end)
            )
        else:
            out.append(item)
    return out


def _hold_exact(
    log: ContextLog,
    forest: Forest,
    items: list[tuple[int, int] | Summary],
    holds: _Holds,
    complete: Sequence[Chunk],
    fan_in: int,
    head: int,
    unheld: list[tuple[int, int, int, str]],
) -> tuple[list[tuple[int, int] | Summary], int]:
    """Fold the chunks pinned at an exact level to that level now (within each pinned run of
    chunks, `fan_in` at a time); returns the items and how many summaries were shown anew.
    A run whose summary could not be written stays raw and is added to `unheld`."""
    if not holds.active or not any(holds.low):
        return items, 0
    out: list[tuple[int, int] | Summary] = []
    index = 0
    shown = 0
    while index < len(items):
        item = items[index]
        start = item.start if isinstance(item, Summary) else item[0]
        first = bisect_left(holds.starts, start)
        level = holds.low[first] if first < len(holds.low) else 0
        if level == 0 or _level(item) == level:
            out.append(item)
            index += 1
            continue
        # A run of items over chunks held at this same exact level: rebuild it at the level.
        run_end = index
        chunk_ids: list[int] = []
        while run_end < len(items):
            other = items[run_end]
            span = (other.start, other.end) if isinstance(other, Summary) else other
            covered = list(holds.chunks(*span))
            if not covered or any(holds.low[c] != level for c in covered):
                break
            chunk_ids.extend(covered)
            run_end += 1
        if run_end == index:  # a summary over chunks held differently: leave it be
            out.append(item)
            index += 1
            continue
        chunks = [complete[c] for c in chunk_ids]
        nodes = _build_level(log, forest, chunks, level, fan_in, head)
        if isinstance(nodes, str):  # the summariser could not write it: shown raw, never dropped
            out.extend(items[index:run_end])
            unheld.append((chunks[0].start, chunks[-1].end, level, nodes))
        else:
            out.extend(nodes)
            shown += len(nodes)
        index = run_end
    return out, shown


def _build_level(
    log: ContextLog,
    forest: Forest,
    chunks: Sequence[Chunk],
    level: int,
    fan_in: int,
    head: int,
) -> list[Summary] | str:
    """Summaries of `level` over `chunks`, merging `fan_in` at a time; when the summariser
    could not write one of them, why (which summary, and the failure's reason)."""
    nodes: list[Summary] = []
    for chunk in chunks:
        node = forest.level1(log, chunk, head_end=head)
        if node is None:
            return _why(forest, 1, chunk.start, chunk.end)
        nodes.append(node)
    for _ in range(1, level):
        merged: list[Summary] = []
        for i in range(0, len(nodes), fan_in):
            group = nodes[i : i + fan_in]
            node = forest.merge(group, log, head_end=head)
            if node is None:
                return _why(forest, group[0].level + 1, group[0].start, group[-1].end)
            merged.append(node)
        nodes = merged
    return nodes


def _why(forest: Forest, level: int, start: int, end: int) -> str:
    failure = forest.failures.get((level, start, end))
    reason = f": {failure.reason}" if failure is not None and failure.reason else ""
    deferred = " (deferred to a later compile)" if failure is not None and failure.deferred else ""
    return f"no level-{level} summary of messages {start}-{end - 1}{deferred}{reason}"


def choose_frontier(
    log: ContextLog,
    forest: Forest,
    options: CompileOptions,
    previous: Frontier | None = None,
    limit: int | None = None,
    pins: Sequence[Pin] = (),
    ready_first: bool = False,
) -> Frontier:
    """`limit`: the estimate to stay under (default: the budget less the reserve); the compiler
    lowers it when the rendered request came out above its estimate.

    The previous compile's folds are kept. When the request no longer fits, one fold makes room
    for many calls to come: every complete chunk older than the recent window becomes a level-1
    summary, and when the summaries then take more than `summary_share` of the budget, their
    oldest runs merge into deeper levels until they take half of that. Only if the request still
    does not fit are summaries merged further, and then chunks of the recent window folded.

    `pins` hold chunks at the levels they allow (see `lamina.context.pins`): chunks pinned at an
    exact level are folded to it at once, and no fold goes below a pin's maximum. A chunk or run
    the summariser cannot write a summary for (`Forest.level1`/`merge` return None) stays as it
    is, and the fold moves on to the next.

    `ready_first`: the deep fold uses only summaries already written (by a prefetch, see
    `Compiler.prefetch`), leaving the few newest chunks whose summaries are not ready raw until
    the next fold, as long as that fold still leaves the request under `READY_FOLD_LEFT` of
    the space; else the missing summaries are written now. So a compile with a slow
    summariser does not wait for it in a live session (a turn at a time), and a log that grew
    a lot at once still gets a deep fold."""
    avail = options.available if limit is None else limit
    plan = _Plan(log, options.largest_message)
    head = head_end(log.messages, _Sizes(plan.prefix), options.head)
    spans = pin_spans(pins, log.messages) if pins else []
    folded_pins = [start for pin, start, _end in spans if pin.mode == "exact"]
    if folded_pins and min(folded_pins) < head:  # the head ends where an exact pin starts
        head = boundary_at_or_before(log.messages, min(folded_pins))
    chunk_target = max(400, min(options.chunk_max, int(options.available * options.chunk_share)))
    complete = _complete_chunks(log, head, chunk_target, previous)
    open_start = complete[-1].end if complete else head
    holds = _Holds(complete, spans)
    items = _reuse(complete, previous)
    folded = 0
    unheld: list[tuple[int, int, int, str]] = []
    if holds.active:
        items = _unfold(items, holds, complete)
        items, folded = _hold_exact(
            log, forest, items, holds, complete, options.fan_in, head, unheld
        )
    by_start = {c.start: c for c in complete}
    head_tokens = plan.span(0, head)
    fixed = log.system_tokens + head_tokens + plan.span(open_start, len(log))
    cost = fixed + sum(plan.item(i) for i in items)
    stuck: set[int] = set()
    """Starts of chunks and runs the summariser could not write a summary for."""

    def summaries() -> int:
        return sum(plan.item(i) for i in items if isinstance(i, Summary))

    def foldable(item: tuple[int, int] | Summary) -> bool:
        return not isinstance(item, Summary) and item[0] not in stuck and holds.allows(item, 1)

    def fold_chunk(index: int) -> bool:
        nonlocal cost
        item = items[index]
        assert not isinstance(item, Summary)
        summary = forest.level1(log, by_start[item[0]], head_end=head)
        if summary is None:
            stuck.add(item[0])
            return False
        cost += plan.item(summary) - plan.item(item)
        items[index] = summary
        return True

    def mergeable(window: Sequence[tuple[int, int] | Summary]) -> bool:
        first = window[0]
        if not isinstance(first, Summary) or first.start in stuck:
            return False
        level = first.level + 1
        return all(holds.allows(i, level) for i in window)

    def ready(window: Sequence[tuple[int, int] | Summary]) -> bool:
        first, last = window[0], window[-1]
        assert isinstance(first, Summary) and isinstance(last, Summary)
        return mergeable(window) and forest.has(first.level + 1, first.start, last.end)

    def merge_oldest(only_ready: bool = False) -> bool:
        nonlocal cost
        while True:
            run = _oldest_run(items, options.fan_in, ready if only_ready else mergeable)
            if run is None:
                return False
            first, size = run
            group = [i for i in items[first : first + size] if isinstance(i, Summary)]
            merged = forest.merge(group, log, head_end=head)
            if merged is None:
                stuck.add(group[0].start)
                continue
            cost += plan.item(merged) - sum(plan.item(i) for i in group)
            items[first : first + size] = [merged]
            return True

    if cost > avail:  # fold only when the budget requires it, then far below it
        recent = _recent_start(log, plan, complete, options.recent)
        for ready_only in (True, False) if ready_first else (False,):
            if not ready_only and cost <= avail * READY_FOLD_LEFT:
                break  # deep enough with what was ready: the rest waits for the next fold
            for index, item in enumerate(items):
                if isinstance(item, Summary):
                    continue
                if item[1] > recent:
                    break
                if ready_only and not forest.has(1, item[0], item[1]):
                    continue
                if foldable(item) and fold_chunk(index):
                    folded += 1
        cap = int(options.available * options.summary_share)
        if summaries() > cap:
            while summaries() > cap // 2 and merge_oldest(only_ready=ready_first):
                folded += 1
        # Still over: deeper, then into the recent window, as far as the budget needs.
        while cost > avail:
            if not merge_oldest():
                raw = next((n for n, i in enumerate(items) if foldable(i)), None)
                if raw is None:
                    break
                if not fold_chunk(raw):
                    continue
            folded += 1
    if cost > avail:
        # Below the budget, `limit` leaves room for what rendering adds beyond the estimate.
        needs = cost + options.available - avail
        raise OverBudgetError(
            f"the request needs {needs} tokens with everything folded, {cost - avail} over the "
            f"{options.available} available (budget {options.budget} minus reserve "
            f"{options.reserve}); the {'system prompt, the ' if log.system else ''}head and the "
            f"newest messages, kept raw, alone take {fixed}"
            + _pinned_note(plan, items, holds, stuck)
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
        head,
        items,
        tail_start,
        cost,
        folded,
        summaries_shown,
        tuple(complete),
        chunk_target,
        tuple(spans),
        tuple(unheld),
    )


def _pinned_note(
    plan: _Plan, items: Sequence[tuple[int, int] | Summary], holds: _Holds, stuck: set[int]
) -> str:
    """What keeps tokens in the request that folding could not take out: pins, and chunks the
    summariser could not summarise."""
    notes: list[str] = []
    if holds.active:
        held: dict[str, int] = {}
        for item in items:
            start, end = (item.start, item.end) if isinstance(item, Summary) else item
            for index in holds.chunks(start, end):
                for pin in holds.by[index]:
                    held[pin.describe()] = held.get(pin.describe(), 0) + plan.item(item)
                    break
        notes += [f"{name} keeps {tokens} tokens" for name, tokens in held.items()]
    failed = sum(plan.item(i) for i in items if not isinstance(i, Summary) and i[0] in stuck)
    if failed:
        notes.append(f"{failed} tokens stay raw because the summariser could not summarise them")
    return "; pinned: " + "; ".join(notes) if notes else ""


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


def _oldest_run(
    items: Sequence[tuple[int, int] | Summary],
    fan_in: int,
    mergeable: Callable[[Sequence[tuple[int, int] | Summary]], bool] = lambda _: True,
) -> tuple[int, int] | None:
    """The oldest run of `fan_in` consecutive summaries of the lowest level present (or of at
    least two, when no full run is left) that `mergeable` allows."""
    levels = sorted({i.level for i in items if isinstance(i, Summary)})
    for level in levels:
        for size in (fan_in, 2):
            for start in range(len(items) - size + 1):
                window = items[start : start + size]
                if all(isinstance(i, Summary) and i.level == level for i in window) and (
                    mergeable(window)
                ):
                    return start, size
    return None
