"""The forest: every summary written for a log, by span, each written once.

A level-1 summary stands for one chunk of the log, a level-k+1 summary for several consecutive
level-k summaries. Summaries are never edited or deleted: a later compile that needs the same
span reuses what was written, and one loaded from a store is never paid for again.

Each request is as-of (requests.py): the head, the summaries just before the span (recalled;
a stretch with none, pinned raw or refused, is recalled as its raw messages and the recall goes
on past it), and the span itself. A summariser may fail to write one (ladder.py): `level1` and
`merge` then return None and keep the failure in `failures`, so the frontier leaves the chunk
raw or covered by its neighbours. A permanent failure is not retried while the summariser's keys
(name, window, prompt version) stay the same; a deferred one (transient errors, a spend cap)
after `retry_deferred_after` seconds, or in a new process. `spend` counts calls, tokens and
failures.
"""

from __future__ import annotations

import hashlib
import threading
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson

from ..messages import message_to_json
from ..tokens import count_text
from .chunks import Chunk
from .log import ContextLog
from .summarise import Summariser, write_summary

if TYPE_CHECKING:
    from .requests import RecallItem, SummaryFailure, SummaryRequest, SummaryResult

# The request records (lamina.context.requests) are imported where a summary is asked for:
# a compile that writes none (every fold already stored) never loads them.

__all__ = ["STOP_COMPLETE", "Forest", "SummariserSpend", "Summary", "retry_keys"]


STOP_COMPLETE = "complete"
"""The stop reason recorded for a summariser that reports none (the offline one)."""


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
    request_hash: str = ""
    """What the summariser was asked, hashed: its name, the task, the target length and the
    input (the chunk's messages, or the merged summaries)."""
    stop_reason: str = STOP_COMPLETE


@dataclass
class SummariserSpend:
    """What a forest's summariser did, summed since the forest was made (for the compile
    report: take the difference around a compile)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    summaries: int = 0
    failed: int = 0
    """Permanent failures: the span stays raw until the summariser's keys change."""
    deferred: int = 0
    """Transient errors past their retries, or a spend cap reached: retried later."""

    def add(self, answer: SummaryResult | SummaryFailure) -> None:
        self.calls += answer.calls
        self.input_tokens += answer.input_tokens
        self.output_tokens += answer.output_tokens
        from .requests import SummaryResult

        if isinstance(answer, SummaryResult):
            self.summaries += 1
        elif answer.deferred:
            self.deferred += 1
        else:
            self.failed += 1

    def as_report(self) -> dict[str, int]:
        return {
            "summariser_calls": self.calls,
            "summariser_input_tokens": self.input_tokens,
            "summariser_output_tokens": self.output_tokens,
            "summaries_failed": self.failed,
            "summaries_deferred": self.deferred,
        }


def retry_keys(summariser: Summariser) -> tuple[str, int, int]:
    """What a failure is recorded under: a retry is worth it only when one of these changes."""
    window = getattr(summariser, "window", 0)
    version = getattr(summariser, "prompt_version", 0)
    return (summariser.name, int(window), int(version))


class Forest:
    """Summaries by span, written once.

    `known` are summaries written earlier (loaded from a store): a span they cover is never
    summarised again; `failures` likewise, for spans no summary could be written for.
    `on_write` is told of every new summary as soon as it is written (to store it), so a
    compile that fails later keeps what it paid for. `clock` is for tests."""

    retry_deferred_after: float = 300.0

    def __init__(
        self,
        summariser: Summariser,
        known: Iterable[Summary] = (),
        on_write: Callable[[Summary], None] | None = None,
        failures: Iterable[SummaryFailure] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.summariser = summariser
        self.nodes: dict[tuple[int, int, int], Summary] = {}
        self._ending: dict[int, Summary] = {}
        """The deepest summary ending at each position (the first written of a level
        stands), kept as summaries are added: `recall_before` walks it, not every node."""
        self._ends: list[int] = []
        """The positions of `_ending`, sorted."""
        for node in known:  # the first written for a span stands
            if (node.level, node.start, node.end) not in self.nodes:
                self._add(node)
        self.by_id = {node.id: node for node in self.nodes.values()}
        self.on_write = on_write
        self.written = 0
        self.lock = threading.RLock()
        """Held while a summary is written: the compile and a prefetch running in the
        background (`Compiler.prefetch`) never write the same span twice."""
        self.failures: dict[tuple[int, int, int], SummaryFailure] = {
            (f.level, f.start, f.end): f for f in failures
        }
        self.spend = SummariserSpend()
        self.clock = clock
        self.head_end: int | None = None
        """Where the log's head ends, when the caller knows (else inferred per request)."""
        self._log: ContextLog | None = None

    def _add(self, node: Summary) -> None:
        self.nodes[(node.level, node.start, node.end)] = node
        best = self._ending.get(node.end)
        if best is None:
            insort(self._ends, node.end)
        if best is None or node.level > best.level:
            self._ending[node.end] = node

    def _make(
        self,
        level: int,
        start: int,
        end: int,
        result: SummaryResult,
        children: Sequence[str],
        request_hash: str,
    ) -> Summary:
        text = result.text.replace("\x00", "\ufffd")  # stores cannot all hold NUL in text
        digest = hashlib.sha1(f"{level}:{start}:{end}:{text}".encode()).hexdigest()[:8]
        node = Summary(
            id=f"L{level}-{start}-{end}-{digest}",
            level=level,
            start=start,
            end=end,
            text=text,
            tokens=count_text(text),
            children=tuple(children),
            summariser=result.summariser or self.summariser.name,
            request_hash=result.request_hash or request_hash,
            stop_reason=result.stop_reason,
        )
        self._add(node)
        self.by_id[node.id] = node
        self.written += 1
        if self.on_write is not None:
            self.on_write(node)
        return node

    def _request_hash(self, task: str, target: int, parts: Iterable[bytes]) -> str:
        digest = hashlib.sha256(f"{self.summariser.name}\n{task}\n{target}\n".encode())
        for part in parts:
            digest.update(part)
            digest.update(b"\n")
        return digest.hexdigest()

    def has(self, level: int, start: int, end: int) -> bool:
        """Whether the summary of this level and span is written."""
        return (level, start, end) in self.nodes

    def blocked(self, level: int, start: int, end: int) -> SummaryFailure | None:
        """The failure that stops the span from being tried now, if any."""
        failure = self.failures.get((level, start, end))
        if failure is None:
            return None
        if failure.deferred:
            if self.clock() - failure.at < self.retry_deferred_after:
                return failure
            return None
        return failure if failure.keys == retry_keys(self.summariser) else None

    def permanent_failures(self) -> list[SummaryFailure]:
        """The failures worth keeping across processes (deferred ones are retried anyway)."""
        return [f for f in self.failures.values() if not f.deferred]

    def recall_before(self, start: int, head_end: int) -> list[Summary | tuple[int, int]]:
        """What comes just before `start`, oldest first: walking back from `start` to the
        head, the deepest summary ending where the walk stands, or, where none ends there (a
        stretch pinned raw, refused by the summariser, not folded yet), that stretch as a raw
        span `(start, end)` back to where the nearest summary ends. The walk goes on past
        such a stretch: a gap never hides what came before it."""
        ending, ends = self._ending, self._ends  # every position visited is <= start
        chain: list[Summary | tuple[int, int]] = []
        at = start
        while at > head_end:
            found = ending.get(at)
            if found is not None and found.start >= head_end:
                chain.append(found)
                at = found.start
                continue
            below = bisect_left(ends, at)
            gap_start = ends[below - 1] if below and ends[below - 1] > head_end else head_end
            chain.append((gap_start, at))
            at = gap_start
        chain.reverse()
        return chain

    def _recalled(
        self,
        log: ContextLog | None,
        items: Sequence[Summary | tuple[int, int]],
        before: int,
    ) -> list[RecallItem]:
        from .requests import RawStretch, Recalled

        out: list[RecallItem] = []
        for item in items:
            if isinstance(item, Summary):
                if item.end <= before:
                    out.append(Recalled(item.id, item.text))
            elif log is not None and item[1] <= before:
                start, end = item
                out.append(
                    RawStretch(
                        start, end, tuple(log.slice(start, end)), tuple(log.shown[start:end])
                    )
                )
        return out

    def _expansion(
        self,
        log: ContextLog | None,
        items: Sequence[Summary | tuple[int, int]],
        before: int,
    ) -> dict[str, Any]:
        """The request fields that let the ladder expand the summary recalled last (see
        `SummaryRequest.expansion`); none when the last recalled item is not a summary."""
        shown = [i for i in items if (i.end if isinstance(i, Summary) else i[1]) <= before]
        last = shown[-1] if shown else None
        if not isinstance(last, Summary):
            return {}
        if last.level == 1:
            expansion = self._recalled(log, [(last.start, last.end)], before)
        else:
            children = [self.by_id.get(c) for c in last.children]
            if not children or any(c is None for c in children):
                return {}
            expansion = self._recalled(log, [c for c in children if c is not None], before)
        return {"expansion": tuple(expansion), "expands": last.id} if expansion else {}

    def _head_end(self, start: int, given: int | None) -> int:
        if given is not None:
            return min(given, start)
        if self.head_end is not None:
            return min(self.head_end, start)
        firsts = [s for (level, s, _e) in self.nodes if level == 1]
        return min([start, *firsts])

    def _write(
        self, request: SummaryRequest, children: Sequence[str], asked: str
    ) -> Summary | None:
        if self.blocked(request.level, request.start, request.end) is not None:
            return None
        answer = write_summary(self.summariser, request)
        self.spend.add(answer)
        key = (request.level, request.start, request.end)
        from .requests import SummaryFailure

        if isinstance(answer, SummaryFailure):
            if not answer.at:
                answer = _stamped(answer, self.clock())
            self.failures[key] = answer
            return None
        self.failures.pop(key, None)
        return self._make(request.level, request.start, request.end, answer, children, asked)

    def level1(
        self,
        log: ContextLog,
        chunk: Chunk,
        *,
        head_end: int | None = None,
        recall: Sequence[Summary | tuple[int, int]] | None = None,
    ) -> Summary | None:
        """The chunk's summary (written now if it was not before), or None when none could
        be written (see `failures`). `head_end`: where the log's head ends; `recall`: the
        summaries (and raw spans) shown before the chunk (default: `recall_before`)."""
        found = self.nodes.get((1, chunk.start, chunk.end))
        if found is not None:
            return found
        with self.lock:  # one writer at a time: a span asked for twice is written once
            return self._level1(log, chunk, head_end, recall)

    def _level1(
        self,
        log: ContextLog,
        chunk: Chunk,
        head_end: int | None,
        recall: Sequence[Summary | tuple[int, int]] | None,
    ) -> Summary | None:
        found = self.nodes.get((1, chunk.start, chunk.end))
        if found is not None:
            return found
        self._log = log
        head = self._head_end(chunk.start, head_end)
        if recall is None:
            recall = self.recall_before(chunk.start, head)
        target = max(80, min(600, chunk.tokens // 8))
        from .requests import SummaryRequest

        messages = log.slice(chunk.start, chunk.end)
        asked = self._request_hash(
            "summarise", target, (orjson.dumps(message_to_json(m)) for m in messages)
        )
        request = SummaryRequest(
            task="summarise",
            level=1,
            start=chunk.start,
            end=chunk.end,
            target_tokens=target,
            head=log.slice(0, head),
            recalled=self._recalled(log, recall, chunk.start),
            messages=messages,
            **self._expansion(log, recall, chunk.start),
        )
        return self._write(request, (), asked)

    def merge(
        self,
        nodes: Sequence[Summary],
        log: ContextLog | None = None,
        *,
        head_end: int | None = None,
        recall: Sequence[Summary | tuple[int, int]] | None = None,
    ) -> Summary | None:
        """One summary a level deeper for consecutive `nodes`, or None when none could be
        written. `log` gives the head (default: the log of the last `level1`)."""
        found = self.nodes.get((nodes[0].level + 1, nodes[0].start, nodes[-1].end))
        if found is not None:
            return found
        with self.lock:
            return self._merge(nodes, log, head_end, recall)

    def _merge(
        self,
        nodes: Sequence[Summary],
        log: ContextLog | None,
        head_end: int | None,
        recall: Sequence[Summary | tuple[int, int]] | None,
    ) -> Summary | None:
        level = nodes[0].level + 1
        key = (level, nodes[0].start, nodes[-1].end)
        found = self.nodes.get(key)
        if found is not None:
            return found
        log = log if log is not None else self._log
        head = self._head_end(key[1], head_end)
        if recall is None:
            recall = self.recall_before(key[1], head)
        target = max(120, min(900, sum(n.tokens for n in nodes) // 2))
        from .requests import Recalled, SummaryRequest

        texts = [n.text for n in nodes]
        asked = self._request_hash("merge", target, (t.encode() for t in texts))
        request = SummaryRequest(
            task="merge",
            level=level,
            start=key[1],
            end=key[2],
            target_tokens=target,
            head=log.slice(0, head) if log is not None else (),
            recalled=self._recalled(log, recall, key[1]),
            summaries=[Recalled(n.id, n.text) for n in nodes],
            **self._expansion(log, recall, key[1]),
        )
        return self._write(request, [n.id for n in nodes], asked)


def _stamped(failure: SummaryFailure, at: float) -> SummaryFailure:
    return replace(failure, at=at)
