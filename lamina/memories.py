"""What a memory bank holds: banks, documents, cursors, memories and corrections (the record
types the store reads and writes and the bank hands out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from ._fields import field_dict

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from ._lazy import numpy as np

__all__ = [
    "Bank",
    "BankStats",
    "Correction",
    "Cursor",
    "Document",
    "Memory",
    "Vector",
    "memory_tokens",
]

Vector: TypeAlias = "npt.NDArray[np.float32]"


@dataclass(frozen=True, slots=True)
class Bank:
    """An isolated memory space (one per user, project or agent)."""

    name: str
    created_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Document:
    """One retained source inside a bank (a session transcript, a file, a conversation)."""

    bank: str
    id: str
    created_at: datetime
    updated_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    source: str | None = None
    """Where it was read from (a path), when it came from a file."""
    format: str | None = None


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a document has been retained.

    `offset` is the byte offset just past the last complete record retained (line-based files)
    and `open_offset` the offset of the record that starts the last, still open, turn: the next
    retain re-reads from there so a turn whose records continue is completed, not duplicated.
    For sources without offsets both count messages instead. `fingerprint` identifies the
    retained prefix, so a file rewritten in place is noticed. `version` increases by one with
    every retain; a retain commits only if the version it read is still current.
    """

    offset: int = 0
    open_offset: int = 0
    open_line: int | None = None
    records: int = 0
    fingerprint: str = ""
    size: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True)
class Memory:
    """A retrievable unit: a turn (or a window of turns), a fact, a summary."""

    id: str
    bank: str
    document: str
    kind: str
    """`turn`, `window`, `fact`, ..."""
    text: str
    record_ids: tuple[str, ...]
    """The source messages it covers, in order (first and last are its span)."""
    occurred_at: datetime | None = None
    """When what it describes happened (for a turn: when it was said)."""
    said_at: datetime | None = None
    speakers: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    content_hash: str = ""
    embedding: Vector | None = None
    embedder: str | None = None
    first_line: int | None = None
    last_line: int | None = None
    tokens: int | None = None
    """Tokens of `text` (lamina.tokens), counted once at retain; None: not counted yet."""

    @property
    def time(self) -> datetime | None:
        return self.occurred_at or self.said_at

    @property
    def first_record(self) -> str | None:
        return self.record_ids[0] if self.record_ids else None

    @property
    def last_record(self) -> str | None:
        return self.record_ids[-1] if self.record_ids else None


@dataclass(frozen=True, slots=True)
class Correction:
    """A user's mark on a memory that turned out wrong (`state` "wrong") or that a newer one
    replaces (`state` "superseded", `replacement` the newer memory's id). Kept by memory id,
    beside the memory rather than in it: a retain that rewrites the memory, a reindex, or a
    forget and a retain again keep the mark; `lamina memory unmark` removes it."""

    memory: str
    state: str
    """`wrong` or `superseded`."""
    replacement: str | None = None
    note: str = ""
    at: datetime | None = None
    """When it was marked (set by the store)."""

    def as_dict(self) -> dict[str, Any]:
        return {**field_dict(self), "at": self.at.isoformat() if self.at else None}


CORRECTION_STATES = ("wrong", "superseded")


@dataclass(frozen=True, slots=True)
class BankStats:
    bank: str
    documents: int
    memories: int
    records: int
    embedded: int
    embedders: Mapping[str, int]
    first_time: datetime | None
    last_time: datetime | None
    bytes: int | None = None


def memory_tokens(memory: Memory) -> int:
    """A memory's tokens: counted at retain, so recall needs no tokenizer (only memories
    stored before counts were kept are counted here, loading it)."""
    if memory.tokens is not None:
        return memory.tokens
    from .tokens import count_text

    return count_text(memory.text)
