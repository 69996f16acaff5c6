"""`lamina bench cache`: replay a transcript as a live session and measure the prompt cache.

One compile before every model call (before each assistant API response of the transcript, not
each JSONL line). A request's cached prefix is its tokens up to the first content block that
differs from the previous request; the cached share is the sum of those over the sum of all
request tokens. Its ceiling for the same run is 1 minus the tokens new since the previous
request (as sent: thinking left out, huge messages cut) over all request tokens: the share if
no fold ever broke the prefix. Baselines in the same run: a sliding window (drop the oldest
messages that do not fit) and compact-at-threshold (when over budget, replace everything but
the newest 25% of the budget with one summary, as coding agents do). History visible: the
summary tokens and oldest raw message of the last request, and per request on average its
tokens, raw messages and summary tokens. The share is a ratio, and a strategy that shows more
history pays for it: `input_cost` is what the requests cost, in base-price input tokens, at the
provider's cache prices (`CACHE_WRITE`, `CACHE_READ`). A strategy can also keep its share up
by folding new messages before any request showed them raw (compacting does, when the newest
quarter of the budget cannot hold the newest message): `never_raw` counts them and their tokens.
Every request is checked against the provider's rules (`invalid_requests`) and the budget
(`over_budget_requests`). When the transcript records the provider's usage, its own cached
share is shown for context (it includes the agent's fixed system prompt and tools).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import click
import orjson

from ..context.compile import Compiler, request_tokens
from ..context.forest import Forest, Summary
from ..context.frontier import CompileOptions, Frontier
from ..context.log import ContextLog
from ..context.render import render_anthropic
from ..context.summarise import ExtractiveSummariser
from ..context.validate import validate_anthropic
from ..errors import InputError
from ..messages import Message, Role, ToolResultBlock
from ..readers import read_transcript
from .common import (
    compile_budget_options,
    emit,
    json_option,
    percentiles,
    transcript_files,
    transcripts_option,
)

__all__ = ["cache_bench"]


CACHE_WRITE = 1.25
"""Price of an input token written to the cache, in base input tokens (Anthropic's 5-minute
cache): every request is sent with a breakpoint at its end, so what it does not read from the
cache it writes."""
CACHE_READ = 0.1
"""Price of an input token read from the cache, in base input tokens."""


class Strategy(Protocol):
    """One way of fitting the log into the budget, replayed call by call."""

    name: str
    options: CompileOptions

    def __call__(self, log: ContextLog) -> dict[str, Any]: ...

    def summary_tokens(self) -> int: ...

    def oldest_raw(self) -> int: ...

    def raw_messages(self, log: ContextLog) -> int: ...

    def summariser_calls(self) -> int: ...

    def raw_spans(self, log: ContextLog) -> list[tuple[int, int]]:
        """The stretches of the log the last request showed raw."""
        ...


def _blocks(request: Mapping[str, Any]) -> list[tuple[str, bytes, int]]:
    """The request as (role, block, tokens) in order, cache markers ignored."""
    out = []
    for message in request["messages"]:
        for block in message["content"]:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            tokens = request_tokens({"messages": [{"role": message["role"], "content": [plain]}]})
            out.append((message["role"], orjson.dumps(plain, option=orjson.OPT_SORT_KEYS), tokens))
    return out


def _prefix(previous: list[tuple[str, bytes, int]], current: list[tuple[str, bytes, int]]) -> int:
    total = 0
    for old, new in zip(previous, current, strict=False):
        if old[:2] != new[:2]:
            break
        total += new[2]
    return total


class Lamina:
    name = "lamina"

    def __init__(self, options: CompileOptions) -> None:
        self.options = options
        self.compiler = Compiler(ExtractiveSummariser())

    def __call__(self, log: ContextLog) -> dict[str, Any]:
        return self.compiler.compile(log, self.options).request

    def summary_tokens(self) -> int:
        previous = self.compiler.previous
        return sum(s.tokens for s in previous.summaries.values()) if previous else 0

    def oldest_raw(self) -> int:
        previous = self.compiler.previous
        if previous is None:
            return 0
        raw = [i[0] for i in previous.items if not isinstance(i, Summary)]
        return 0 if previous.head_end else min([*raw, previous.tail_start])

    def summariser_calls(self) -> int:
        return self.compiler.forest.written

    def raw_messages(self, log: ContextLog) -> int:
        previous = self.compiler.previous
        if previous is None:
            return len(log)
        raw = sum(i[1] - i[0] for i in previous.items if not isinstance(i, Summary))
        return previous.head_end + raw + len(log) - previous.tail_start

    def raw_spans(self, log: ContextLog) -> list[tuple[int, int]]:
        previous = self.compiler.previous
        if previous is None:
            return [(0, len(log))]
        raw = [i for i in previous.items if not isinstance(i, Summary)]
        return [(0, previous.head_end), *raw, (previous.tail_start, len(log))]


def _fits_from(log: ContextLog, avail: int, largest: int) -> int:
    total = 0
    for i in range(len(log) - 1, -1, -1):
        total += min(log.shown[i], largest) + 4
        if total > avail:
            return i + 1
    return 0


class SlidingWindow:
    name = "sliding_window"

    def __init__(self, options: CompileOptions) -> None:
        self.options = options
        self.start = 0

    def __call__(self, log: ContextLog) -> dict[str, Any]:
        avail, largest = self.options.available, self.options.largest_message
        self.start = _fits_from(log, avail, largest)
        for _ in range(50):
            request = render_anthropic(log, Frontier(0, [], self.start, 0), largest)
            if request_tokens(request) <= avail:
                break
            self.start += 1
        # A window that starts at results whose calls it dropped can render to nothing: take
        # older messages in until it shows something.
        while not request["messages"] and self.start > 0:
            self.start -= 1
            request = render_anthropic(log, Frontier(0, [], self.start, 0), largest)
        return request

    def summary_tokens(self) -> int:
        return 0

    def oldest_raw(self) -> int:
        return self.start

    def summariser_calls(self) -> int:
        return 0

    def raw_messages(self, log: ContextLog) -> int:
        return len(log) - self.start

    def raw_spans(self, log: ContextLog) -> list[tuple[int, int]]:
        return [(self.start, len(log))]


class CompactAtThreshold:
    name = "compact_at_threshold"
    keep = 0.25
    """The recent window a compaction leaves raw, as a share of the available tokens: the
    baseline's own, whatever Lamina's `recent_share`."""

    def __init__(self, options: CompileOptions) -> None:
        self.options = options
        self.forest = Forest(ExtractiveSummariser())
        self.summary: Summary | None = None
        self.calls = 0

    def _request(self, log: ContextLog) -> dict[str, Any]:
        items: list[tuple[int, int] | Summary] = [self.summary] if self.summary else []
        tail = self.summary.end if self.summary else 0
        return render_anthropic(log, Frontier(0, items, tail, 0), self.options.largest_message)

    def __call__(self, log: ContextLog) -> dict[str, Any]:
        request = self._request(log)
        if request_tokens(request) <= self.options.available:
            return request
        keep = int(self.options.available * self.keep)
        start = _fits_from(log, keep, self.options.largest_message)
        while start < len(log) and log.messages[start].role is not Role.USER:
            start += 1
        text = self.forest.summariser.summarise(log.slice(0, start), 2_000)
        self.summary = Summary(f"C{self.calls}", 1, 0, start, text, request_tokens(
            {"messages": [{"role": "assistant", "content": [{"type": "text", "text": text}]}]}
        ), (), self.forest.summariser.name)  # fmt: skip
        self.calls += 1
        return self._request(log)

    def summary_tokens(self) -> int:
        return self.summary.tokens if self.summary else 0

    def oldest_raw(self) -> int:
        return self.summary.end if self.summary else 0

    def summariser_calls(self) -> int:
        return self.calls

    def raw_messages(self, log: ContextLog) -> int:
        return len(log) - self.oldest_raw()

    def raw_spans(self, log: ContextLog) -> list[tuple[int, int]]:
        return [(self.oldest_raw(), len(log))]


def _mark_shown(
    shown: list[bool],
    log: ContextLog,
    spans: Sequence[tuple[int, int]],
    request: Mapping[str, Any],
) -> None:
    """Mark the messages `request` shows raw: those in `spans`, less tool results it left out
    (a result whose call was folded is not sent)."""
    results = {
        block.get("tool_use_id")
        for message in request["messages"]
        for block in message["content"]
        if block.get("type") == "tool_result"
    }
    for start, end in spans:
        for i in range(start, end):
            ids = [b.tool_use_id for b in log.messages[i].blocks if isinstance(b, ToolResultBlock)]
            if not ids or any(r in results for r in ids):
                shown[i] = True


def replay(log_messages: Sequence[Message], strategy: Strategy) -> dict[str, Any]:
    log = ContextLog()
    previous: list[tuple[str, bytes, int]] = []
    total = cached = new = peak = breaks = 0
    raw_messages = summary_tokens = 0
    times: list[float] = []
    pending_new = 0
    requests = invalid = over = 0
    shown_raw: list[bool] = []
    sent_before = 0
    for message in log_messages:
        if message.role is Role.ASSISTANT and len(log):
            started = time.perf_counter()
            request = strategy(log)
            times.append((time.perf_counter() - started) * 1000)
            problems = validate_anthropic(request)
            invalid += bool(problems)
            over += request_tokens(request) > strategy.options.available
            blocks = _blocks(request)
            tokens = sum(b[2] for b in blocks)
            prefix = _prefix(previous, blocks)
            if previous and prefix < sum(b[2] for b in previous):
                breaks += 1
            total += tokens
            cached += prefix
            new += min(tokens, pending_new) if previous else tokens
            peak = max(peak, tokens)
            raw_messages += strategy.raw_messages(log)
            summary_tokens += strategy.summary_tokens()
            previous = blocks
            pending_new = 0
            requests += 1
            shown_raw += [False] * (len(log) - len(shown_raw))
            _mark_shown(shown_raw, log, strategy.raw_spans(log), request)
            sent_before = len(log)
        if log.append(message):
            # New tokens as sent: thinking is never sent, a huge message is cut.
            pending_new += min(log.shown[-1], strategy.options.largest_message)
    largest = strategy.options.largest_message
    return {
        "requests": requests,
        "cached_share": round(cached / total, 4) if total else None,
        "ceiling": round(1 - new / total, 4) if total else None,
        "input_cost": round(CACHE_WRITE * (total - cached) + CACHE_READ * cached),
        "compile_ms": percentiles(times),
        "prefix_breaks": breaks,
        "invalid_requests": invalid,
        "over_budget_requests": over,
        "peak_tokens": peak,
        "summariser_calls": strategy.summariser_calls(),
        "summary_tokens": strategy.summary_tokens(),
        "oldest_raw_message": strategy.oldest_raw(),
        "log_messages": len(log),
        # Messages a request held that no request ever showed raw (folded before the model saw
        # them), and their tokens as sent: a share kept high by hiding new messages.
        "never_raw": {
            "messages": shown_raw[:sent_before].count(False),
            "tokens": sum(
                min(log.shown[i], largest) for i in range(sent_before) if not shown_raw[i]
            ),
        },
        # What the model saw, averaged over the requests: tokens, messages shown raw, and
        # summary tokens standing for the rest.
        "visible": {
            "tokens_mean": round(total / requests) if requests else 0,
            "raw_messages_mean": round(raw_messages / requests, 1) if requests else 0,
            "summary_tokens_mean": round(summary_tokens / requests) if requests else 0,
        },
    }


def recorded_share(messages: Sequence[Message]) -> float | None:
    read = total = 0
    for message in messages:
        if message.role is not Role.ASSISTANT or message.is_sidechain:
            continue
        body = message.records[0].get("message") if message.records else None
        usage = body.get("usage") if isinstance(body, Mapping) else None
        if isinstance(usage, Mapping):
            cache_read = int(usage.get("cache_read_input_tokens") or 0)
            read += cache_read
            total += cache_read + int(usage.get("cache_creation_input_tokens") or 0)
            total += int(usage.get("input_tokens") or 0)
    return round(read / total, 4) if total else None


@click.command("cache")
@transcripts_option("Transcript(s) to replay (default: the shared spotter sessions).")
@compile_budget_options
@json_option
def cache_bench(transcripts: tuple[str, ...], budget: int, reserve: int, as_json: bool) -> None:
    """Prompt-cache share of compiles replayed before every model call, with baselines.

    Example: lamina bench cache --transcript examples/session.jsonl --budget 8000 --json"""
    if transcripts:
        files = [Path(t) for t in transcripts]
    else:
        files = [
            p
            for p in transcript_files(None)
            if p.name.startswith("spotter-") and ".subagent-" not in p.name
        ]
    if reserve >= budget:
        raise InputError("--reserve must be smaller than --budget")
    options = CompileOptions(budget=budget, reserve=reserve)
    results: dict[str, Any] = {}
    for path in files:
        messages = read_transcript(str(path)).messages
        results[path.name] = {
            strategy.name: replay(messages, strategy)
            for strategy in (Lamina(options), SlidingWindow(options), CompactAtThreshold(options))
        }
        results[path.name]["recorded_cached_share"] = recorded_share(messages)
    out: dict[str, Any] = {"benchmark": "cache", "budget": budget, "reserve": reserve}
    if len(results) == 1:
        out.update(next(iter(results.values())))
    else:
        out["transcripts"] = results
    emit(out, as_json)
