"""Compile a context log into a request that fits a token budget.

    log = ContextLog.from_messages(read_transcript("session.jsonl").messages)
    result = Compiler(ExtractiveSummariser()).compile(log, CompileOptions(budget=32_000))
    result.request   # {"system": [...], "messages": [...]} for the Anthropic Messages API
    result.report    # what is raw, what is folded to which level, tokens per part

With `compile(log, options, request_format="openai")` the request is for OpenAI Chat
Completions instead: the same turns, spelled the OpenAI way, within the same budget.

The log's system prompt (`ContextLog.system`) is sent as the provider expects it (Anthropic's
`system` field with a cache breakpoint, OpenAI's leading `system` message), counted in the
budget. Every message of the log is in the request raw or through a summary that covers it; if the
budget cannot be met even with everything folded, `OverBudgetError` says by how much.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from ..errors import LaminaError
from .forest import Forest, SummariserSpend, Summary
from .frontier import CompileOptions, Frontier, OverBudgetError, choose_frontier
from .log import ContextLog
from .pins import Pin
from .render import RequestFormat, render, request_tokens
from .summarise import Summariser

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["CompileResult", "Compiler", "CoverageError", "request_tokens"]


PREFETCH_AT = 0.8
"""`Compiler.prefetch` starts writing the next fold's summaries once a request takes this
share of the space available."""
MAX_REPORTED_FAILURES = 20


class CoverageError(LaminaError):
    """A compile left a message of the log out (a bug; never silently)."""


@dataclass
class CompileResult:
    """What `Compiler.compile` returns: `request` (the `messages`, and for Anthropic the
    `system` field, to send as they are), the chosen `frontier`, its `tokens`, and a `report`
    of what is raw and what is folded to which level."""

    request: dict[str, Any]
    frontier: Frontier
    tokens: int
    report: dict[str, Any] = field(default_factory=dict)


class Compiler:
    """Compiles a context log into a provider request that fits a token budget.

        log = ContextLog.from_messages(read_message_list(messages).messages)
        compiler = Compiler(ExtractiveSummariser())        # or a model-backed Summariser
        result = compiler.compile(log, CompileOptions(budget=32_000, reserve=4_000))
        client.messages.create(model=..., max_tokens=4_000, **result.request)

    Old stretches of the log are folded into summaries (written once, kept in `forest`) and
    shown as recall pairs; the newest turns stay raw. Keep one compiler per conversation and
    call `compile` again as the log grows: the previous choice of folds is kept while it still
    fits, so the start of the request stays the same and the provider's prompt cache keeps
    hitting. `StoredLog` does the same with the log and its summaries kept in a store.
    """

    def __init__(
        self,
        summariser: Summariser,
        *,
        forest: Forest | None = None,
        previous: Frontier | None = None,
    ) -> None:
        """`forest` and `previous` carry over what earlier compiles of the same log wrote and
        chose (see `StoredLog`, which loads them from a store)."""
        self.forest = forest or Forest(summariser)
        self.previous: Frontier | None = previous
        """The last compile's frontier: its folds are kept while they still fit."""
        self._ahead: ThreadPoolExecutor | None = None
        self._pending: Future[int] | None = None
        self.ready_first = False
        """Fold with the summaries already written first (see `choose_frontier`); set once
        this compiler prefetches, since then the next fold's summaries are being written."""

    def prefetch(
        self,
        log: ContextLog,
        options: CompileOptions,
        pins: Sequence[Pin] = (),
        at_share: float = PREFETCH_AT,
    ) -> int:
        """Write now the summaries the next fold will show, so that the compile that needs
        them does not wait for a model call; returns how many were written. Nothing is done
        while the last compile's request is below `at_share` of the space available (the next
        fold is still far). The fold is worked out as it would happen now; the summaries it
        needs are written once and reused when it happens, the frontier is left as it is."""
        self.ready_first = True
        previous = self.previous
        if previous is None or previous.tokens < at_share * options.available:
            return 0
        written = self.forest.written
        try:
            choose_frontier(log, self.forest, options, previous, previous.tokens - 1, pins)
        except LaminaError as exc:  # the compile that needs the fold will say it
            import logging  # only here: a compile that prefetches nothing never loads it

            logging.getLogger(__name__).debug("prefetch of %d messages stopped: %s", len(log), exc)
        return self.forest.written - written

    def prefetch_in_background(
        self, log: ContextLog, options: CompileOptions, pins: Sequence[Pin] = ()
    ) -> Future[int]:
        """`prefetch` on a copy of the log in a background thread (one at a time; a call while
        one runs waits its turn). `wait_for_prefetch` waits for it."""
        if self._ahead is None:
            from concurrent.futures import ThreadPoolExecutor

            self._ahead = ThreadPoolExecutor(1, thread_name_prefix="lamina-prefetch")
        snapshot = log.snapshot()
        self._pending = self._ahead.submit(self.prefetch, snapshot, options, tuple(pins))
        return self._pending

    def wait_for_prefetch(self) -> int:
        """Wait for the background prefetch, if any; how many summaries it wrote."""
        pending, self._pending = self._pending, None
        return pending.result() if pending is not None else 0

    def compile(
        self,
        log: ContextLog,
        options: CompileOptions,
        request_format: RequestFormat = "anthropic",
        pins: Sequence[Pin] = (),
    ) -> CompileResult:
        """The log as a request in `request_format` within the budget, holding `pins`; the
        report has the same fields whichever the format."""
        started = time.perf_counter()
        written_before = self.forest.written
        spent_before = replace(self.forest.spend)
        before = self.previous
        limit = options.available
        for _attempt in range(6):
            frontier = choose_frontier(
                log, self.forest, options, self.previous, limit, pins, self.ready_first
            )
            request = render(
                request_format, log, frontier, options.largest_message, log.system or None
            )
            tokens = request_tokens(request)
            if frontier.folded and limit == options.available and self.previous is not None:
                # The estimate (each message counted alone, within 2% of the rendered request)
                # asked for a fold, which breaks the cached prefix: not when the request
                # rendered without a new fold fits after all.
                kept = choose_frontier(
                    log, self.forest, options, self.previous, sys.maxsize, pins, self.ready_first
                )
                if not kept.folded:
                    unfolded = render(
                        request_format, log, kept, options.largest_message, log.system or None
                    )
                    unfolded_tokens = request_tokens(unfolded)
                    if unfolded_tokens <= options.available:
                        frontier, request, tokens = kept, unfolded, unfolded_tokens
            if tokens <= options.available:
                break
            # The rendered request came out above the estimate (separator turns, markers):
            # fold a little further, keeping what was folded.
            self.previous = frontier
            limit = min(limit, frontier.tokens) - (tokens - options.available) - 32
        else:
            raise OverBudgetError(
                f"the request needs {tokens} tokens, {tokens - options.available} over the "
                f"{options.available} available"
            )
        self.previous = frontier
        _check_coverage(log, frontier)
        levels = Counter(i.level for i in frontier.items if isinstance(i, Summary))
        pinned = _pins_report(frontier, pins)
        raw_chunks = [i for i in frontier.items if not isinstance(i, Summary)]
        report = {
            "budget": options.budget,
            "reserve": options.reserve,
            "tokens": tokens,
            "log_messages": len(log),
            "log_tokens": sum(log.tokens),
            "system": {"tokens": log.system_tokens},
            "head": {"messages": frontier.head_end,
                     "tokens": log.span_tokens(0, frontier.head_end)},
            "raw_chunks": len(raw_chunks),
            "summaries_by_level": {str(k): v for k, v in sorted(levels.items())},
            "summary_tokens": sum(i.tokens for i in frontier.items if isinstance(i, Summary)),
            "tail": {"from_message": frontier.tail_start,
                     "messages": len(log) - frontier.tail_start,
                     "tokens": log.span_tokens(frontier.tail_start, len(log))},
            "folds": frontier.folded,
            "summaries_written": self.forest.written - written_before,
            "summariser": _summariser_report(self.forest, spent_before),
            "changed": _changes(before, frontier),
            "pins": pinned,
            "warnings": _warnings(pinned),
            "compile_ms": round((time.perf_counter() - started) * 1000, 2),
        }  # fmt: skip
        return CompileResult(request, frontier, tokens, report)


def _summariser_report(forest: Forest, before: SummariserSpend) -> dict[str, Any]:
    """What the summariser did during this compile (calls, tokens, failures), and the spans it
    could not summarise, left raw or covered by their neighbours."""
    now = forest.spend
    spent = SummariserSpend(
        *(getattr(now, f.name) - getattr(before, f.name) for f in fields(SummariserSpend))
    )
    failures = sorted(forest.failures.values(), key=lambda f: (f.start, f.level))
    return {
        "name": forest.summariser.name,
        **spent.as_report(),
        "unsummarised": [
            {
                "level": f.level,
                "messages": [f.start, f.end - 1],
                "deferred": f.deferred,
                "reason": f.reason,
            }
            for f in failures[:MAX_REPORTED_FAILURES]
        ],
    }


def _changes(before: Frontier | None, after: Frontier) -> dict[str, Any]:
    """What changed since the previous compile: how many of its leading items (raw chunks and
    summaries after the head) this one shows alike, and the summaries shown and hidden."""
    if before is None:
        return {"first_compile": True}
    kept = 0
    for old, new in zip(before.items, after.items, strict=False):
        if old != new:
            break
        kept += 1
    old_ids = {i.id for i in before.items if isinstance(i, Summary)}
    new_ids = {i.id for i in after.items if isinstance(i, Summary)}
    return {
        "first_compile": False,
        "head_kept": before.head_end == after.head_end,
        "items_kept": kept,
        "summaries_shown": sorted(new_ids - old_ids),
        "summaries_hidden": sorted(old_ids - new_ids),
    }


def _pins_report(frontier: Frontier, pins: Sequence[Pin]) -> list[Any]:
    """Each pin with the messages it holds and how they are shown (raw or a summary level)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for pin, start, end in frontier.pinned:
        spans.setdefault(pin.name, []).append((start, end))
    out: list[Any] = []
    for pin in pins:
        held = spans.get(pin.name, [])
        levels: set[int] = set()
        for start, end in held:
            for item in frontier.items:
                lo, hi = (item.start, item.end) if isinstance(item, Summary) else item
                if lo < end and start < hi:
                    levels.add(item.level if isinstance(item, Summary) else 0)
            if start < frontier.head_end or end > frontier.tail_start:
                levels.add(0)
        entry: dict[str, Any] = {
            "name": pin.name,
            "pin": pin.describe(),
            "messages": [[s, e - 1] for s, e in held],
            "shown_at_levels": sorted(levels),
        }
        unheld = _unheld(frontier, pin, held)
        if unheld:
            entry["not_held"] = unheld
        out.append(entry)
    return out


def _unheld(frontier: Frontier, pin: Pin, held: Sequence[tuple[int, int]]) -> list[str]:
    """Why an exact pin's messages are shown raw instead of at its level, if they are."""
    if pin.mode != "exact":
        return []
    return [
        f"shown raw: {why}"
        for start, end, _level, why in frontier.unheld
        if any(s < end and start < e for s, e in held)
    ]


def _warnings(pins_report: Sequence[dict[str, Any]]) -> list[str]:
    """What a reader of the request should know that it does not show: pins not held."""
    return [f"{entry['pin']} is not held: {why}" for entry in pins_report
            for why in entry.get("not_held", [])]  # fmt: skip


def _check_coverage(log: ContextLog, frontier: Frontier) -> None:
    covered = [False] * len(log)
    spans: list[tuple[int, int]] = [(0, frontier.head_end), (frontier.tail_start, len(log))]
    for item in frontier.items:
        spans.append((item.start, item.end) if isinstance(item, Summary) else item)
    for start, end in spans:
        for i in range(start, end):
            covered[i] = True
    missing = [i for i, ok in enumerate(covered) if not ok]
    if missing:
        raise CoverageError(f"messages {missing[:5]} of the log are not in the compiled context")
