"""The Store protocol: everything the memory bank asks of a database, and nothing more.

Retain and recall logic never write SQL; they call these methods. The protocol is split by
concern (`BankStore`: banks, documents, memories, corrections; `LogStore`: context logs;
`KeyStore`: access keys; `OperationStore`: operations and spending), and `Store` is all of
them. The embedded default is `SQLiteStore`; `PostgresStore` implements the same protocol,
both from one implementation of each part (lamina.store.dialect), and both run the same
contract tests (tests/test_store_contract.py).

Writes that belong together arrive as one `RetainBatch` and are applied in one transaction,
guarded by the document cursor's version (compare and swap): two processes retaining the same
growing transcript cannot both commit what they read from the same cursor, so each record is
stored once.

Context logs (the context compiler's persistence) live in a bank too: a log's messages in
append order, the summaries written for it (each once, never changed), and the frontier of its
last compile. Deleting the bank deletes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..memories import Bank, BankStats, Correction, Cursor, Document, Memory
from ..messages import JSONValue, Message

__all__ = [
    "SPEND_KEPT",
    "BankStore",
    "ContextLogInfo",
    "KeyStore",
    "LogStore",
    "MemoryFilter",
    "MemoryPage",
    "MemoryRow",
    "OperationStore",
    "RetainBatch",
    "RetainOutcome",
    "Store",
    "StoredPin",
    "StoredSummary",
    "contiguous_counts",
]


@dataclass(frozen=True, slots=True)
class RetainBatch:
    """All the writes of one retain of one document."""

    bank: str
    document: str
    expected_version: int
    """The cursor version the batch was computed from; the batch fails if it moved."""
    cursor: Cursor
    records: Sequence[str]
    """Ids of the source records this retain covers (stored once; repeats are ignored)."""
    memories: Sequence[Memory]
    """Memories to insert or replace (by id)."""
    delete_memories: Sequence[str] = ()
    metadata: Mapping[str, Any] | None = None
    tags: Sequence[str] | None = None
    source: str | None = None
    format: str | None = None


@dataclass(frozen=True, slots=True)
class RetainOutcome:
    committed: bool
    """False when the cursor had moved (another retain won); nothing was written."""
    new_records: int = 0
    inserted: int = 0
    replaced: int = 0
    deleted: int = 0


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """What recall's in-memory index needs of a memory, in storage order."""

    seq: int
    memory: Memory
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories `Store.page_memories` lists. Unset fields do not filter."""

    words: tuple[str, ...] = ()
    """Every word must occur in the memory's text, case ignored, taken literally (`%` and `_`
    are plain characters)."""
    document: str | None = None
    documents: tuple[str, ...] | None = None
    """Only memories of these documents (an empty tuple: none), e.g. an agent's sessions."""
    kind: str | None = None
    tag: str | None = None
    """A tag the memory carries (the tags its document had when it was retained)."""
    since: datetime | None = None
    until: datetime | None = None
    """Bounds (inclusive) on the memory's time (when it happened, else when it was said); a
    memory without a time is left out when either is set."""


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a bank's memories, newest first (ties, and memories without a time, after,
    in storage order), without their vectors."""

    memories: list[Memory]
    total: int
    """Memories matching the filter, on every page."""
    kinds: dict[str, int]
    """Memories of each kind in the whole bank (not filtered), by kind name."""


@dataclass(frozen=True, slots=True)
class ContextLogInfo:
    bank: str
    id: str
    messages: int
    summaries: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StoredSummary:
    """A summary of a stretch of a context log, as stored: written once, never changed."""

    id: str
    level: int
    """1 for a summary of a chunk, k+1 for one merging level-k summaries."""
    start: int
    end: int
    """The log positions it covers: `log[start:end]`."""
    children: tuple[str, ...]
    """Ids of the merged summaries (empty at level 1)."""
    text: str
    tokens: int
    summariser: str
    request_hash: str
    """A hash of what the summariser was asked (who, what, how long)."""
    stop_reason: str


SPEND_KEPT = timedelta(days=2)
"""How long `record_spend` entries are kept (spending caps look back a day at most)."""


def contiguous_counts(rows: Iterable[Sequence[Any]]) -> list[tuple[int, int, int]]:
    """`(position, tokens, shown, uncut)` rows in position order as `(tokens, shown, uncut)`,
    up to the first missing position (what `load_log_counts` returns)."""
    out: list[tuple[int, int, int]] = []
    for position, tokens, shown, uncut in rows:
        if position != len(out):
            break
        out.append((int(tokens), int(shown), int(uncut)))
    return out


@dataclass(frozen=True, slots=True)
class StoredPin:
    """A pin of a context log (see lamina.context.pins): a message range or a document held
    raw (`raw`), at an exact summary level (`exact`) or at most a level (`max`)."""

    name: str
    mode: str
    level: int
    start: int | None
    end: int | None
    """`log[start:end]`, or None for a document pin."""
    document: str | None


class BankStore(Protocol):
    """Banks, their documents and memories, and the corrections marked on memories."""

    # banks
    def ensure_bank(self, name: str) -> Bank: ...

    def get_bank(self, name: str) -> Bank | None: ...

    def list_banks(self) -> list[Bank]: ...

    def delete_bank(self, name: str) -> bool: ...

    def bank_stats(self, name: str) -> BankStats: ...

    def bank_embedders(self, name: str) -> dict[str, int]:
        """How many of the bank's memories each embedder's vectors cover (empty for a bank that
        does not exist). One index probe: recall asks it before every query."""
        ...

    def generation(self, bank: str) -> tuple[int, int]:
        """(changes, deletions): the first grows with every change to the bank's memories, the
        second only when memories were removed or changed in place (an index built earlier must
        then be rebuilt rather than extended). Cheap to read."""
        ...

    # documents
    def get_document(self, bank: str, document: str) -> Document | None: ...

    def list_documents(self, bank: str) -> list[Document]: ...

    def delete_document(self, bank: str, document: str) -> int:
        """Forget a document: its memories, records and cursor. Returns memories removed."""
        ...

    def get_cursor(self, bank: str, document: str) -> Cursor: ...

    def content_hashes(self, bank: str, ids: Iterable[str]) -> dict[str, str]:
        """The stored content hash of each memory id that exists."""
        ...

    def count_records(self, bank: str, document: str | None = None) -> int: ...

    def record_ids(self, bank: str, document: str) -> list[str]:
        """Ids of the records retained for a document (sorted)."""
        ...

    # retain
    def apply_retain(self, batch: RetainBatch) -> RetainOutcome: ...

    # memories
    def get_memories(self, bank: str, ids: Sequence[str]) -> list[Memory]: ...

    def delete_memory(self, bank: str, memory_id: str) -> bool: ...

    def forget_before(self, bank: str, before: datetime) -> int:
        """Forget the bank's memories that happened before `before` (by their time: when it
        happened, else when it was said; memories without a time stay), keeping the search
        indexes right as `delete_memory` does. One probe of the bank's time index when nothing
        is that old. Returns how many were forgotten."""
        ...

    def iter_memories(
        self, bank: str, *, after_seq: int = 0, with_embeddings: bool = True
    ) -> Iterator[MemoryRow]:
        """Memories in storage order, those stored after `after_seq` only."""
        ...

    def page_memories(
        self,
        bank: str,
        where: MemoryFilter,
        limit: int,
        offset: int = 0,
        *,
        oldest_first: bool = False,
        count_kinds: bool = True,
    ) -> MemoryPage:
        """Memories matching `where`, newest first (or in exactly the reverse order), `limit`
        of them from `offset`, with the total matching and the bank's count per kind (left
        empty without `count_kinds`, which costs a pass over the bank); read in the database,
        vectors left out."""
        ...

    def set_embeddings(
        self,
        bank: str,
        vectors: Mapping[str, Any],
        embedder: str,
        *,
        hashes: Mapping[str, str] | None = None,
    ) -> int:
        """Set the vectors of the given memories (by id), made by `embedder`; returns how many
        were set. With `hashes`, a memory's vector is set only while its content hash is the
        one given (a vector made from text another retain has replaced since is dropped)."""
        ...

    def set_entities(self, bank: str, entities: Mapping[str, Sequence[str]]) -> int:
        """Replace the entities of the given memories (by id); returns how many changed."""
        ...

    # corrections: a user's marks on memories (wrong, superseded), kept by memory id
    def save_correction(self, bank: str, correction: Correction) -> None:
        """Mark a memory (replacing the mark it had). `StoreError` when there is no such bank.
        The mark is kept by id: it outlives a retain that rewrites the memory."""
        ...

    def delete_correction(self, bank: str, memory_id: str) -> bool:
        """Remove a memory's mark; False when it had none."""
        ...

    def load_corrections(
        self, bank: str, ids: Sequence[str] | None = None
    ) -> dict[str, Correction]:
        """The marks of the given memory ids (None: every mark of the bank), by memory id.
        One probe of a table as large as the user's marks, whatever the bank's size: recall
        reads it before every query."""
        ...


class LogStore(Protocol):
    """Context logs: messages in append order, summaries written once, the last frontier,
    pins and token counts (lamina.context)."""

    def append_log_messages(self, bank: str, log: str, messages: Sequence[Message]) -> int:
        """Append messages to a log in order, creating the bank and the log if needed (also
        with no messages); a message whose id the log already holds is skipped. Returns how
        many were added."""
        ...

    def read_log(
        self, bank: str, log: str, start: int = 0, end: int | None = None
    ) -> list[Message]:
        """The log's messages from position `start` (0-based) up to `end` (excluded; None: to
        the last), in order; none for no log."""
        ...

    def held_log_ids(self, bank: str, log: str, ids: Sequence[str]) -> set[str]:
        """Which of `ids` the log holds (a message's id is held once)."""
        ...

    def list_logs(self, bank: str) -> list[ContextLogInfo]: ...

    def set_log_times(
        self, bank: str, log: str, created_at: datetime, updated_at: datetime
    ) -> None:
        """Set a log's creation and update times (copies and imports keep the source's)."""
        ...

    def delete_log(self, bank: str, log: str) -> bool:
        """Delete a log with its summaries and frontier."""
        ...

    def save_summary(self, bank: str, log: str, summary: StoredSummary) -> bool:
        """Write a summary once: False, and nothing changed, when the log already holds one with
        this id (the first write stands). `StoreError` when there is no such log."""
        ...

    def load_summaries(self, bank: str, log: str) -> list[StoredSummary]:
        """All summaries of a log in the order they were written."""
        ...

    def save_frontier(self, bank: str, log: str, frontier: Mapping[str, JSONValue]) -> None:
        """Replace the log's last frontier (a JSON object the compiler defines). `StoreError`
        when there is no such log."""
        ...

    def load_frontier(self, bank: str, log: str) -> dict[str, JSONValue] | None: ...

    def save_log_counts(
        self,
        bank: str,
        log: str,
        key: str,
        start: int,
        counts: Sequence[tuple[int, int, int]],
    ) -> None:
        """Keep the token counts of the log's messages from position `start` on, under `key`
        (the tokenizer and counting rules); counts already kept stay. Nothing for no log."""
        ...

    def load_log_counts(self, bank: str, log: str, key: str) -> list[tuple[int, int, int]]:
        """The counts kept under `key` for the log's first messages, in order, up to the first
        position that has none."""
        ...

    def save_pin(self, bank: str, log: str, pin: StoredPin) -> None:
        """Add a pin, or replace the log's pin of that name. `StoreError` when there is no
        such log."""
        ...

    def delete_pin(self, bank: str, log: str, name: str) -> bool: ...

    def load_pins(self, bank: str, log: str) -> list[StoredPin]:
        """The log's pins in the order they were first added."""
        ...


class KeyStore(Protocol):
    """Access keys for HTTP and MCP, kept as hashes."""

    def create_api_key(self, name: str, key_hash: str, banks: Sequence[str]) -> None: ...

    def find_api_key(self, key_hash: str) -> tuple[str, list[str]] | None:
        """(name, banks) of the key with this hash; banks may hold "*" for every bank."""
        ...

    def list_api_keys(self) -> list[tuple[str, list[str], str]]: ...

    def api_key_hashes(self) -> dict[str, str]:
        """Name -> stored hash of every key (for copying keys between stores)."""
        ...

    def delete_api_key(self, name: str) -> bool: ...

    def count_api_keys(self) -> int: ...


class OperationStore(Protocol):
    """Asynchronous operations, and model spending shared by every process using the database."""

    def save_operation(
        self,
        op_id: str,
        kind: str,
        bank: str,
        status: str,
        result: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None: ...

    def get_operation(self, op_id: str) -> dict[str, Any] | None: ...

    def record_spend(
        self, summariser: str, at: datetime, input_tokens: int, output_tokens: int
    ) -> None:
        """Note one provider call's tokens. Entries older than two days are dropped."""
        ...

    def spent_since(self, summariser: str, since: datetime) -> int:
        """Tokens (input and output) the summariser used from `since` on."""
        ...


class Store(BankStore, LogStore, KeyStore, OperationStore, Protocol):
    """A memory store. Implementations are safe to share between threads of one process and
    between processes using the same database."""

    # lifecycle
    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied."""
        ...

    def close(self) -> None: ...

    # maintenance
    def size_bytes(self) -> int | None:
        """Bytes the store takes on disk (None when unknown, e.g. in memory)."""
        ...
