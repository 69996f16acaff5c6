"""A context log kept in a store: its messages, its forest and its last frontier.

    log = StoredLog.open(store, "my-project", "session-42", ExtractiveSummariser())
    log.append(new_messages)          # stored once each, whatever is appended twice
    result = log.compile(CompileOptions(budget=32_000))

Everything stored is redacted first (`lamina.text.redact`): appended messages and summaries
keep no secret, whichever summariser wrote them. A message is stored as the log holds it,
without its source records and the host's structured tool result (no request shows them, and
they repeat its content): privacy and redaction pass once over the text that is kept. What
was marked `<private>` is gone before that (`lamina.private`): a message that was all private
is not appended at all.

Opening a log loads its messages, every summary written for it and the frontier of its last
compile, so a compile in a new process neither summarises again what was summarised before
nor changes the request's prefix when nothing requires it. New summaries are stored as soon as
they are written; the frontier after each compile, with the summariser's permanent failures
(under `failures`), so a new process does not ask again for what failed with the same keys.
The system prompt (not a log position) is kept with that state too, under `system`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._fields import field_dict
from ..errors import LaminaError
from ..messages import JSONValue, Message
from ..private import hide_private, strip_private
from ..store.base import Store, StoredPin, StoredSummary
from ..store.lookup import check_bank_name
from ..tokens import CountMemo, TokenCounter, counting_with, default_counter
from .chunks import Chunk
from .compile import Compiler, CompileResult
from .forest import Forest, Summary
from .frontier import CompileOptions, Frontier, prefix_break
from .log import ContextLog, counts_key, enters_log, system_text
from .paged import PagedMessages, light
from .pins import Pin, check_pins
from .render import RequestFormat
from .source import FileCursor, SourceRead, read_since
from .summarise import Summariser

if TYPE_CHECKING:
    from ..text.redact import Redactor
    from .requests import SummaryFailure

__all__ = ["StoredLog", "frontier_from_json", "frontier_to_json"]

FRONTIER_VERSION = 1
COMPILES_KEPT = 50
"""Compiles remembered with a log's state (`StoredLog.compiles`), newest last."""


# A forest's Summary and the store's StoredSummary hold the same fields under the same names.
def _stored(summary: Summary) -> StoredSummary:
    return StoredSummary(**field_dict(summary))


def _summary(stored: StoredSummary) -> Summary:
    return Summary(**field_dict(stored))


def frontier_to_json(frontier: Frontier) -> dict[str, JSONValue]:
    """The frontier as stored: raw spans as [start, end], summaries by id."""
    return {
        "version": FRONTIER_VERSION,
        "head_end": frontier.head_end,
        "tail_start": frontier.tail_start,
        "tokens": frontier.tokens,
        "chunk_target": frontier.chunk_target,
        "chunks": [[c.start, c.end, c.tokens] for c in frontier.chunks],
        "items": [i.id if isinstance(i, Summary) else [i[0], i[1]] for i in frontier.items],
    }


def frontier_from_json(data: Mapping[str, Any], forest: Forest, length: int) -> Frontier | None:
    """The stored frontier, or None when it cannot serve as the previous one: another
    version, a summary the forest does not hold, or a span past the log's `length`."""
    if data.get("version") != FRONTIER_VERSION:
        return None
    items: list[tuple[int, int] | Summary] = []
    for item in data["items"]:
        if isinstance(item, str):
            summary = forest.by_id.get(item)
            if summary is None:
                return None
            items.append(summary)
        else:
            items.append((int(item[0]), int(item[1])))
    chunks = tuple(Chunk(int(s), int(e), int(t), complete=True) for s, e, t in data["chunks"])
    if data["tail_start"] > length or (chunks and chunks[-1].end > length):
        return None
    return Frontier(
        head_end=data["head_end"],
        items=items,
        tail_start=data["tail_start"],
        tokens=data["tokens"],
        summaries={i.id: i for i in items if isinstance(i, Summary)},
        chunks=chunks,
        chunk_target=data["chunk_target"],
    )


class StoredLog:
    """One context log of a bank, kept in a store (see the module's doc)."""

    def __init__(
        self,
        store: Store,
        bank: str,
        log_id: str,
        summariser: Summariser,
        counter: TokenCounter | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        self.bank = bank
        self.id = log_id
        self._redactor = redactor
        held = _held(store, bank, log_id)
        if held is None:
            if store.get_bank(bank) is None:
                check_bank_name(bank)  # opening a log creates its bank
            store.append_log_messages(bank, log_id, [])  # the log exists from here on
        counter = counter or default_counter()
        counted = store.load_log_counts(bank, log_id, counts_key(counter))
        # The messages whose counts are kept are read when a compile asks for them; the
        # others (counted with another tokenizer, or never) are read and counted now.
        kept = min(len(counted), held or 0)
        self.log = ContextLog(
            counter,
            PagedMessages(lambda start, end: store.read_log(bank, log_id, start, end), kept),
            [c[0] for c in counted[:kept]],
            [c[1] for c in counted[:kept]],
            [c[2] for c in counted[:kept]],
        )
        self.log.extend(store.read_log(bank, log_id, start=kept))
        self._keep_counts(kept)
        known = [_summary(s) for s in store.load_summaries(bank, log_id)]
        state = store.load_frontier(bank, log_id)
        self._state_seen: dict[str, JSONValue] | None = state
        system = (state or {}).get("system")
        self.log.system = system if isinstance(system, str) else ""
        failures = _failures(state)
        forest = Forest(summariser, known, on_write=self._save_summary, failures=failures)
        previous = None if state is None else frontier_from_json(state, forest, len(self.log))
        self.compiler = Compiler(summariser, forest=forest, previous=previous)
        counts = (state or {}).get("counts")
        self.counts = CountMemo(
            {k: v for k, v in counts.items() if isinstance(v, int)}
            if isinstance(counts, dict)
            else None
        )
        """Token counts of the texts the last compile counted (`lamina.tokens.CountMemo`):
        a compile that shows nothing new counts without loading the tokenizer."""
        self.source = FileCursor.of((state or {}).get("source"))
        """How far the log's transcript file was read (`append_file`), kept with its state."""
        self.compiles: list[dict[str, JSONValue]] = _compiles(state)
        """The last compiles (`COMPILES_KEPT`): when, messages, tokens, and `prefix_break`,
        where each broke the previous request's cached prefix (None: kept it whole)."""

    @classmethod
    def open(
        cls,
        store: Store,
        bank: str,
        log_id: str,
        summariser: Summariser,
        counter: TokenCounter | None = None,
    ) -> StoredLog:
        return cls(store, bank, log_id, summariser, counter)

    @property
    def redactor(self) -> Redactor:
        """What redacts the text stored (made on first use: a compile that stores nothing
        new never compiles its rules)."""
        if self._redactor is None:
            from ..text.redact import Redactor

            self._redactor = Redactor()
        return self._redactor

    def _save_summary(self, summary: Summary) -> None:
        stored = _stored(summary)
        text, count = self.redactor.redact(stored.text)
        if count:
            stored = replace(stored, text=text)
        self.store.save_summary(self.bank, self.id, stored)

    def append(self, messages: Iterable[Message]) -> int:
        """Store and add the messages that enter the log (`enters_log`) and are not in it yet
        (by id); returns how many were added. System messages among them replace the stored
        system prompt (`_keep_system`)."""
        messages = list(messages)
        self._keep_system(messages)
        entering = [m for m in messages if enters_log(m)]
        seen = self.store.held_log_ids(self.bank, self.id, [m.id for m in entering])
        new: list[Message] = []
        for message in entering:
            if message.id not in seen:
                seen.add(message.id)
                public = hide_private(light(message))
                if public is not None:
                    from ..text.redact import redact_message

                    new.append(redact_message(public, self.redactor)[0])
        added = self.store.append_log_messages(self.bank, self.id, new) if new else 0
        self.refresh()
        return added

    def append_file(self, path: str, format: str) -> SourceRead:
        """Append what `path` (in `format`) holds past the cursor of the last call (all of it
        the first time, or when the file changed before that cursor; see
        `lamina.context.source`). The cursor is kept with the log's state by the next
        compile, after the messages are stored: a process killed in between re-reads them,
        and the log holds each once."""
        read = read_since(path, format, self.source)
        if read.messages:
            self.append(read.messages)
        self.source = read.cursor
        return read

    def _keep_system(self, messages: list[Message]) -> None:
        """The system prompt the messages give (`system_text`), redacted, becomes the log's and
        is stored with its state (not a log position: message numbers stay as they are);
        messages without one leave the stored one as it is."""
        text = strip_private(system_text(messages))[0]
        if text:
            text = self.redactor.redact(text)[0]  # stored text is redacted (invariant 9)
        if not text or text == self.log.system:
            return
        self.log.system = text
        state = dict(self.store.load_frontier(self.bank, self.id) or {})
        state["system"] = text
        self.store.save_frontier(self.bank, self.id, state)
        self._state_seen = state

    def refresh(self) -> int:
        """Read what other processes appended since; returns how many messages that was."""
        held = len(self.log)
        more = self.store.read_log(self.bank, self.id, start=held)
        self.log.extend(more)
        self._keep_counts(held)
        return len(more)

    def _keep_counts(self, start: int) -> None:
        """Store the token counts of messages from `start` on, so a later open reads them
        instead of counting again."""
        if start < len(self.log):
            counts = self.log.counts(start)
            self.store.save_log_counts(self.bank, self.id, self.log.counts_key, start, counts)

    def pins(self) -> list[Pin]:
        """The log's pins, in the order they were added."""
        return [Pin.of(p) for p in self.store.load_pins(self.bank, self.id)]

    def pin(self, pin: Pin) -> None:
        """Add a pin (or replace the one of that name); `PinConflictError` when it asks for
        something another pin rules out for the same messages."""
        others = [p for p in self.pins() if p.name != pin.name]
        check_pins([*others, pin], self.log.messages)
        self.store.save_pin(
            self.bank,
            self.id,
            StoredPin(pin.name, pin.mode, pin.level, pin.start, pin.end, pin.document),
        )

    def unpin(self, name: str) -> bool:
        return self.store.delete_pin(self.bank, self.id, name)

    def compile(
        self,
        options: CompileOptions,
        request_format: RequestFormat = "anthropic",
        *,
        ahead: bool = False,
    ) -> CompileResult:
        """Compile the log (see `Compiler.compile`) with its pins and store the frontier
        chosen. With `ahead`, the summaries the next fold will need are then written in a
        background thread (`Compiler.prefetch`), so the compile that folds does not wait for
        the summariser; `wait` waits for them (a process should before it exits)."""
        self.refresh()
        pins = self.pins()
        if ahead:
            self.compiler.ready_first = True
        before = self.compiler.previous
        try:
            self.counts.used = {}
            with counting_with(self.counts):
                result = self.compiler.compile(self.log, options, request_format, pins)
        except LaminaError:
            # Keep what was learnt about failing spans, so the next process does not pay again.
            previous = self.compiler.previous
            if previous is not None and self.compiler.forest.failures:
                self._save_state(previous)
            raise
        self.compiles = [*self.compiles, {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "messages": len(self.log),
            "tokens": result.frontier.tokens,
            "first": before is None,
            "prefix_break": prefix_break(before, result.frontier),
        }][-COMPILES_KEPT:]  # fmt: skip
        self._save_state(result.frontier)
        if ahead:
            self.compiler.prefetch_in_background(self.log, options, pins)
        return result

    def wait(self) -> int:
        """Wait for the background work `compile(..., ahead=True)` started; returns how many
        summaries it wrote."""
        return self.compiler.wait_for_prefetch()

    def stale(self) -> bool:
        """Whether another process compiled (or deleted and recreated) this log since this
        object last read or wrote its state: reopen it then (a server keeping logs open
        between calls asks before each use)."""
        return self.store.load_frontier(self.bank, self.id) != self._state_seen

    def _save_state(self, frontier: Frontier) -> None:
        state = self._state(frontier)
        self.store.save_frontier(self.bank, self.id, state)
        self._state_seen = state

    def _state(self, frontier: Frontier) -> dict[str, JSONValue]:
        state = frontier_to_json(frontier)
        if self.log.system:
            state["system"] = self.log.system
        state["failures"] = [f.to_json() for f in self.compiler.forest.permanent_failures()]
        state["compiles"] = list(self.compiles)
        if self.source is not None:
            state["source"] = self.source.to_json()
        state["counts"] = dict(self.counts.used)
        return state


def _held(store: Store, bank: str, log: str) -> int | None:
    """How many messages the log holds (None: there is no such log)."""
    return next((info.messages for info in store.list_logs(bank) if info.id == log), None)


def _compiles(state: Mapping[str, Any] | None) -> list[dict[str, JSONValue]]:
    """The compile history stored with the frontier (entries of another shape are skipped)."""
    entries = (state or {}).get("compiles")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _failures(state: Mapping[str, Any] | None) -> list[SummaryFailure]:
    """The permanent failures stored with the frontier (unreadable entries are skipped: they
    only cost a retry)."""
    out: list[SummaryFailure] = []
    entries = (state or {}).get("failures")
    if not entries:
        return out
    from .requests import SummaryFailure

    for entry in entries if isinstance(entries, list) else []:
        try:
            out.append(SummaryFailure.from_json(entry))
        except (KeyError, TypeError, ValueError):
            continue
    return out
