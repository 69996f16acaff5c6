"""Context logs kept in a store, as the CLI, the HTTP API and the MCP server offer them.

    logs = ContextLogs(store, log_summariser(store))
    messages = read_message_list(body["messages"], None, ids_from="session-42")
    result = logs.compile("my-project", "session-42", messages, CompileOptions(budget=32_000))
    logs.pin("my-project", "session-42", Pin.given("spec", "raw", first=120, last=180))

`ContextLogs` is the one place the surfaces list, describe, append to, compile, pin, unpin and
delete logs, raising Lamina's errors (`NotFoundError` for a missing bank, log or pin), which
each surface maps to an exit code, a status code or a tool error. Beside it: the summariser
stored logs are compiled with, and how messages sent over the wire become Lamina messages.

Messages sent without an `id` (the Anthropic and OpenAI shapes have none) get one from their
content: the log's id, the message as sent, and how often the same message came earlier in the
same list. A client may therefore send the whole conversation every time or only what is new;
either way each message is stored once. The one thing content alone cannot tell apart is the
same message sent again in a *later* request (a second plain "ok"): give such messages ids.
Claude Code records carry their own ids; send the lines of one streamed response in one request.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .._closing import Closing
from ..errors import InputError, NotFoundError
from ..messages import Kind, Message, Role, TextBlock
from ..store.base import ContextLogInfo, Store
from ..store.lookup import require_bank
from ..tokens import default_counter
from .compile import Compiler, CompileResult
from .configured import log_summariser
from .frontier import CompileOptions
from .log import ContextLog, counts_key
from .pins import Pin, pin_json
from .render import RequestFormat
from .stored import StoredLog
from .summarise import Summariser

__all__ = ["ContextLogs", "check_budget", "log_summariser", "read_message_list", "with_system"]

MIN_AVAILABLE = 500
"""Tokens a compile must have left once the reply reserve is taken from the budget."""


class ContextLogs(Closing):
    """The context logs of a store (see the module's doc). A server keeps one for its life:
    the logs it used stay open between calls, so a call reads only the messages appended
    since the last one (not the whole log), and the summaries a compile's background
    prefetch writes are the ones the next compile folds with.

    Calls on one log take turns; a log another process compiled since (another server
    instance sharing the database), or that was deleted and created again, is reopened.

    With `settle`, each compile is followed, in the background, by `lamina.heap.settle`: the
    logs held are frozen out of the garbage collector's full walks, which would otherwise
    stall a compile now and then (a process-wide choice, for the servers)."""

    def __init__(
        self, store: Store, summariser: Summariser, size: int = 64, *, settle: bool = False
    ) -> None:
        self.store = store
        self.summariser = summariser
        self.size = size
        self.settle = settle
        self._open: OrderedDict[tuple[str, str], tuple[StoredLog, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def use(self, bank: str, log: str) -> Iterator[StoredLog]:
        """The log, open and up to date, for the duration of the block (created if new)."""
        key = (bank, log)
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                entry = (StoredLog.open(self.store, bank, log, self.summariser), threading.Lock())
                self._open[key] = entry
            self._open.move_to_end(key)
            while len(self._open) > self.size:
                self._open.popitem(last=False)
        stored, lock = entry
        with lock:
            if stored.stale():
                stored = StoredLog.open(self.store, bank, log, self.summariser)
                with self._lock:
                    self._open[key] = (stored, lock)
            else:
                stored.refresh()
            yield stored

    def close(self) -> None:
        """Wait for the open logs' background prefetches, then let the logs go: the store they
        write their summaries to may be closed after this, not before (SQLite closed under a
        prefetch's write crashed the process)."""
        with self._lock:
            entries = list(self._open.values())
            self._open.clear()
        for stored, lock in entries:
            with lock:
                stored.wait()

    def forget(self, bank: str, log: str | None = None) -> None:
        """Drop a log (or every log of a bank) from the open ones, e.g. once deleted."""
        with self._lock:
            for key in [k for k in self._open if k[0] == bank and log in (None, k[1])]:
                del self._open[key]

    # -- what the surfaces offer ---------------------------------------------------------------
    def compile_once(
        self, messages: Sequence[Message], options: CompileOptions, request_format: RequestFormat
    ) -> CompileResult:
        """Compile a conversation kept in no log: nothing is stored."""
        if options.available < MIN_AVAILABLE:
            raise InputError(f"budget minus reserve must leave at least {MIN_AVAILABLE} tokens")
        log = ContextLog.from_messages(messages)
        return Compiler(self.summariser).compile(log, options, request_format)

    def find(self, bank: str, log: str) -> ContextLogInfo:
        """The log's entry; `NotFoundError` when the bank or the log does not exist."""
        for info in self.store.list_logs(require_bank(self.store, bank)):
            if info.id == log:
                return info
        raise _no_log(bank, log)

    def listing(
        self, bank: str, offset: int = 0, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of the bank's logs as `summary` describes them, and how many there are."""
        found = self.store.list_logs(require_bank(self.store, bank))
        page = found[offset:] if limit is None else found[offset : offset + limit]
        return [self.summary(info) for info in page], len(found)

    def summary(self, info: ContextLogInfo) -> dict[str, Any]:
        """What a listing shows of a log: id, messages, tokens (as recorded), summaries, times.

        The tokens are the per-message counts the log keeps (`StoredLog` stores them as
        messages arrive); only messages without a kept count are read and counted."""
        counter = default_counter()
        counted = self.store.load_log_counts(info.bank, info.id, counts_key(counter))
        if len(counted) >= info.messages:
            tokens = sum(c[0] for c in counted[: info.messages])
        else:
            messages = self.store.read_log(info.bank, info.id)
            tokens = sum(ContextLog.from_messages(messages, counter, counted).tokens)
        return {
            "id": info.id,
            "messages": info.messages,
            "tokens": tokens,
            "summaries": info.summaries,
            "created": info.created_at.isoformat(),
            "updated": info.updated_at.isoformat(),
        }

    def describe(self, bank: str, log: str) -> dict[str, Any]:
        """A log in detail: its listing entry, summaries by level (count and tokens), what its
        last compile showed raw and folded (None before the first compile) and its pins."""
        info = self.find(bank, log)
        summaries = self.store.load_summaries(bank, log)
        levels: dict[str, dict[str, int]] = {}
        for summary in sorted(summaries, key=lambda s: s.level):
            entry = levels.setdefault(str(summary.level), {"count": 0, "tokens": 0})
            entry["count"] += 1
            entry["tokens"] += summary.tokens
        return {
            "bank": bank,
            **self.summary(info),
            "summaries_by_level": levels,
            "last_frontier": _frontier_shape(
                self.store.load_frontier(bank, log),
                {s.id: s.level for s in summaries},
                info.messages,
            ),
            "pins": [pin_json(p) for p in self.store.load_pins(bank, log)],
        }

    def append(self, bank: str, log: str, messages: Sequence[Message]) -> dict[str, Any]:
        """Append to a log (the bank and log are created on first use); messages it holds
        already are skipped. Says how many were received and added, and how many it holds."""
        with self.use(bank, log) as stored:
            added = stored.append(messages)
            held = len(stored.log)
        return {"bank": bank, "log": log, "received": len(messages), "added": added,
                "messages": held}  # fmt: skip

    def compile(
        self,
        bank: str,
        log: str,
        messages: Sequence[Message],
        options: CompileOptions,
        request_format: RequestFormat = "anthropic",
        *,
        ahead: bool = True,
    ) -> CompileResult:
        """Compile a log, appending `messages` first (with none, the log must exist). Its
        summaries and layout are kept for the next compile, which then summarises only what is
        new; with `ahead`, the next fold's summaries are written in the background."""
        if not messages:
            self.find(bank, log)
        with self.use(bank, log) as stored:
            stored.append(messages)
            if not len(stored.log):
                raise InputError(f"log {log!r} of bank {bank!r} holds no messages to compile")
            result = stored.compile(options, request_format, ahead=ahead)
        if self.settle:
            from ..heap import settle_soon

            settle_soon()
        return result

    def pins(self, bank: str, log: str) -> list[Pin]:
        """The log's pins, in the order they were added."""
        self.find(bank, log)
        return [Pin.of(p) for p in self.store.load_pins(bank, log)]

    def pin(self, bank: str, log: str, pin: Pin) -> list[Pin]:
        """Add a pin (or replace the one of that name) and return the log's pins;
        `PinConflictError` when another pin rules out what it asks for."""
        self.find(bank, log)
        with self.use(bank, log) as stored:
            stored.pin(pin)
            return stored.pins()

    def unpin(self, bank: str, log: str, name: str) -> None:
        """Remove a pin by name; `NotFoundError` when the log has none of that name."""
        self.find(bank, log)
        if not self.store.delete_pin(bank, log, name):
            message = f"no pin {name!r} on log {log!r} in bank {bank!r}"
            raise NotFoundError(message, what="pin", name=name, log=log)

    def delete(self, bank: str, log: str) -> None:
        """Delete a log with its summaries, last layout and pins; `NotFoundError` when the
        bank or the log does not exist."""
        require_bank(self.store, bank)
        self.forget(bank, log)
        if not self.store.delete_log(bank, log):
            raise _no_log(bank, log)


def _no_log(bank: str, log: str) -> NotFoundError:
    return NotFoundError(f"no log {log!r} in bank {bank!r}", what="log", name=log)


def with_system(messages: list[Message], system: Any, scope: str = "") -> list[Message]:
    """`messages` led by a system prompt sent apart from them (Anthropic's `system` field: a
    string or a list of text blocks), as the system message the readers would make of it; its
    id comes from its text, scoped by `scope`. The context log keeps it as its system prompt."""
    if isinstance(system, list):
        system = "\n\n".join(
            str(b.get("text", ""))
            for b in system
            if isinstance(b, dict) and b.get("type") == "text"
        )
    if not isinstance(system, str) or not system.strip():
        return messages
    digest = hashlib.sha1(f"{scope}\x00system\x00{system}".encode()).hexdigest()[:24]
    prompt = Message(id=f"s_{digest}", role=Role.SYSTEM, blocks=(TextBlock(system),),
                     kind=Kind.INSTRUCTIONS)  # fmt: skip
    return [prompt, *messages]


def read_message_list(
    messages: Sequence[Any],
    format: str | None = None,
    *,
    ids_from: str | None = None,
    system: Any = None,
) -> list[Message]:
    """Messages sent as JSON (Anthropic or OpenAI shape, or Claude Code records) read with the
    transcript readers, `format` detected when None. With `ids_from`, messages without an id get
    one from their content, scoped by that string (see the module's doc). `system`: a system
    prompt sent beside the messages (see `with_system`)."""
    if system is not None:
        return with_system(read_message_list(messages, format, ids_from=ids_from), system,
                           ids_from or "")  # fmt: skip
    if not messages:
        return []
    from ..readers.values import plain_values, read_message_values, with_content_ids

    values = plain_values(list(messages))
    if ids_from is not None and format != "claude-code":
        values = with_content_ids(ids_from, values)
    return read_message_values(values, format=format)[1]


def check_budget(budget: int, reserve: int) -> str | None:
    """Why a budget and reserve cannot compile (None when they can)."""
    if reserve < 0:
        return "must be 0 or more"
    if budget - reserve < MIN_AVAILABLE:
        return f"must leave at least {MIN_AVAILABLE} tokens of the budget ({budget})"
    return None


def _frontier_shape(
    frontier: Mapping[str, Any] | None, levels: Mapping[str, int], length: int
) -> dict[str, Any] | None:
    """How many of the log's `length` messages the stored frontier kept raw (head, raw spans,
    recent tail) and how many it folded into which summaries."""
    if frontier is None or "items" not in frontier:  # not compiled yet (a system prompt only)
        return None
    head, tail = int(frontier.get("head_end", 0)), int(frontier.get("tail_start", 0))
    middle_raw = 0
    shown: Counter[str] = Counter()
    for item in frontier.get("items", []):
        if isinstance(item, str):
            shown[str(levels.get(item, "?"))] += 1
        else:
            middle_raw += int(item[1]) - int(item[0])
    return {
        "tokens": frontier.get("tokens"),
        "raw_messages": head + middle_raw + max(0, length - tail),
        "folded_messages": max(0, tail - head - middle_raw),
        "head_messages": head,
        "tail_from_message": tail,
        "summaries_shown_by_level": dict(sorted(shown.items())),
    }
