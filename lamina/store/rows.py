"""One mapping per record type between the store's rows and lamina's records.

Each record type has a row type (a NamedTuple: the columns a read selects, in order, read by
name) and a function turning such a row into the record, decoding values through the
database's `Dialect`. A new column is a field here and a line in its mapping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, NamedTuple

from ..memories import Bank, Correction, Cursor, Document, Memory
from .base import ContextLogInfo, StoredPin, StoredSummary
from .dialect import Dialect

__all__ = [
    "BANK",
    "CORRECTION",
    "DOCUMENT",
    "LOG",
    "MEMORY_COLUMNS",
    "PIN",
    "SUMMARY",
    "BankRow",
    "CorrectionRow",
    "DocumentRow",
    "LogRow",
    "MemoryColumns",
    "PinRow",
    "SummaryRow",
    "bank",
    "correction",
    "cursor",
    "document",
    "log_info",
    "memory",
    "memory_params",
    "pin",
    "stored_memory",
    "summary",
]


def select(fields: Sequence[str], alias: str, **named: str) -> str:
    """The SELECT list of `fields` from the table aliased `alias`; `named` gives the
    expression of a field that is not a column of that table."""
    return ", ".join(named.get(f, f"{alias}.{f}") for f in fields)


class BankRow(NamedTuple):
    name: str
    created_at: Any
    metadata: Any


BANK = select(BankRow._fields, "b")


def bank(row: Sequence[Any], d: Dialect) -> Bank:
    r = BankRow._make(row)
    return Bank(r.name, d.time_out(r.created_at), d.json_out(r.metadata))


class DocumentRow(NamedTuple):
    id: int
    name: str
    created_at: Any
    updated_at: Any
    metadata: Any
    tags: Any
    source: str | None
    format: str | None
    cursor_offset: int
    cursor_open_offset: int
    cursor_records: int
    cursor_fingerprint: str
    cursor_size: int
    cursor_version: int
    cursor_open_line: int | None


DOCUMENT = select(DocumentRow._fields, "d")


def document(bank: str, r: DocumentRow, d: Dialect) -> Document:
    return Document(
        bank=bank,
        id=r.name,
        created_at=d.time_out(r.created_at),
        updated_at=d.time_out(r.updated_at),
        metadata=d.json_out(r.metadata),
        tags=tuple(d.array_out(r.tags)),
        source=r.source,
        format=r.format,
    )


_CURSOR = {f.name: f"cursor_{f.name}" for f in fields(Cursor)}
"""Each field of a cursor and the document's column holding it."""


def cursor(r: DocumentRow) -> Cursor:
    return Cursor(**{name: getattr(r, column) for name, column in _CURSOR.items()})


class MemoryColumns(NamedTuple):
    seq: int
    id: str
    document: str
    kind: str
    text: str
    record_ids: Any
    occurred_at: Any
    said_at: Any
    speakers: Any
    entities: Any
    tags: Any
    content_hash: str
    embedder: str | None
    first_line: int | None
    last_line: int | None
    tokens: int | None
    embedding: Any


MEMORY_COLUMNS = select(MemoryColumns._fields[:-1], "m", document="d.name")
"""A memory's columns but its vector, from `memories m JOIN documents d`: a read selects
the vector (`m.embedding`) or leaves it out (the dialect's `null_vector`) after them."""


def memory(bank: str, row: Sequence[Any], d: Dialect) -> Memory:
    return _memory(bank, MemoryColumns._make(row), d)


def stored_memory(bank: str, row: Sequence[Any], d: Dialect) -> tuple[int, Memory]:
    """(seq, memory)."""
    r = MemoryColumns._make(row)
    return int(r.seq), _memory(bank, r, d)


def _memory(bank: str, r: MemoryColumns, d: Dialect) -> Memory:
    array, time = d.array_out, d.time_out  # read once: recall maps many rows
    return Memory(
        id=r.id,
        bank=bank,
        document=r.document,
        kind=r.kind,
        text=r.text,
        record_ids=tuple(array(r.record_ids)),
        occurred_at=None if r.occurred_at is None else time(r.occurred_at),
        said_at=None if r.said_at is None else time(r.said_at),
        speakers=tuple(array(r.speakers)),
        entities=tuple(array(r.entities)),
        tags=tuple(array(r.tags)),
        content_hash=r.content_hash,
        embedding=d.vector_out(r.embedding),
        embedder=r.embedder,
        first_line=r.first_line,
        last_line=r.last_line,
        tokens=r.tokens,
    )


class CorrectionRow(NamedTuple):
    memory_id: str
    state: str
    replacement: str | None
    note: str
    created_at: Any


CORRECTION = select(CorrectionRow._fields, "c")


def correction(row: Sequence[Any], d: Dialect) -> Correction:
    r = CorrectionRow._make(row)
    return Correction(r.memory_id, r.state, r.replacement, r.note, d.time_out(r.created_at))


class LogRow(NamedTuple):
    name: str
    messages: int
    summaries: int
    created_at: Any
    updated_at: Any


LOG = select(
    LogRow._fields,
    "l",
    summaries="(SELECT count(*) FROM context_summaries s WHERE s.log_id = l.id)",
)


def log_info(bank: str, row: Sequence[Any], d: Dialect) -> ContextLogInfo:
    r = LogRow._make(row)
    return ContextLogInfo(
        bank,
        r.name,
        int(r.messages),
        int(r.summaries),
        d.time_out(r.created_at),
        d.time_out(r.updated_at),
    )


class SummaryRow(NamedTuple):
    id: str
    level: int
    start_position: int
    end_position: int
    children: Any
    text: str
    tokens: int
    summariser: str
    request_hash: str
    stop_reason: str


SUMMARY = select(SummaryRow._fields, "s")


def summary(row: Sequence[Any], d: Dialect) -> StoredSummary:
    r = SummaryRow._make(row)
    return StoredSummary(
        id=r.id,
        level=r.level,
        start=int(r.start_position),
        end=int(r.end_position),
        children=tuple(d.array_out(r.children)),
        text=r.text,
        tokens=r.tokens,
        summariser=r.summariser,
        request_hash=r.request_hash,
        stop_reason=r.stop_reason,
    )


class PinRow(NamedTuple):
    name: str
    mode: str
    level: int
    start_position: int | None
    end_position: int | None
    document: str | None


PIN = select(PinRow._fields, "p")


def pin(row: Sequence[Any]) -> StoredPin:
    r = PinRow._make(row)
    return StoredPin(r.name, r.mode, r.level, r.start_position, r.end_position, r.document)


MEMORY_INSERT = (
    "id, bank_id, document_id, kind, text, record_ids, occurred_at, said_at, speakers,"
    " entities, tags, content_hash, embedding, embedder, first_line, last_line, created_at"
)
"""The columns `memory_params` gives values for, in order."""


def memory_params(
    memory: Memory, bank_id: int, doc_id: int, now: Any, d: Dialect
) -> tuple[Any, ...]:
    """The values of `MEMORY_INSERT` for a memory of a document."""
    vector = memory.embedding
    return (
        memory.id,
        bank_id,
        doc_id,
        memory.kind,
        memory.text,
        d.array_in(memory.record_ids),
        None if memory.occurred_at is None else d.time_in(memory.occurred_at),
        None if memory.said_at is None else d.time_in(memory.said_at),
        d.array_in(memory.speakers),
        d.array_in(memory.entities),
        d.array_in(memory.tags),
        memory.content_hash,
        None if vector is None else d.vector_in(vector),
        memory.embedder if vector is not None else None,
        memory.first_line,
        memory.last_line,
        now,
    )
