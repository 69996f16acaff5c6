"""The embedded default store: one SQLite file, WAL mode, safe for several processes.

Each thread gets its own connection. Writes take the write lock up front (`BEGIN IMMEDIATE`)
and wait for it (busy timeout), so two hooks, a server and a CLI sharing one bank never see
"database is locked" under normal load. A retain is one transaction, guarded by the document
cursor's version: it commits whole, or not at all.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

from ..errors import StoreError
from ..memories import Bank, BankStats, Correction, Cursor, Document, Memory
from ..messages import JSONValue, Message, message_from_json, message_to_json
from ..owned import private_dir
from ..tokens import count_text
from .base import (
    SPEND_KEPT,
    ContextLogInfo,
    MemoryFilter,
    MemoryPage,
    MemoryRow,
    RetainBatch,
    RetainOutcome,
    StoredPin,
    StoredSummary,
    contiguous_counts,
)
from .paging import Dialect, page_seqs
from .sqlite_migrations import MIGRATIONS
from .sqlite_postings import (
    common_terms,
    drop_packs,
    maintain_packs,
    postings_of,
    write_postings,
)
from .sqlite_search import SQLiteSearch
from .vectors import vector_dir

__all__ = ["SQLiteStore"]

BUSY_TIMEOUT_MS = 60_000


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def _bound(value: datetime) -> str:
    """A time bound as stored times are written (UTC ISO text, which sorts as time does); a
    time without a zone is taken as UTC."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


_DIALECT = Dialect(
    mark="?",
    has_tag="EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)",
    # instr() takes the word literally (no LIKE wildcards to escape).
    has_ascii_word="instr(lower(m.text), ?) > 0",
    has_word="instr(lamina_fold(m.text), ?) > 0",
    word_param=str.casefold,
    time_param=_bound,
    # SQLite sorts NULL below every time: newest first puts memories without one last.
    newest_first="m.t DESC, m.seq",
    oldest_first="m.t, m.seq DESC",
    # The document's own index (its memories only), not the bank's time index the planner
    # would pick for the order (70 ms instead of 0.1 at 100,000 memories).
    bank_with_document="+m.bank_id = ?",
)
"""How `page_memories`' filter is written in SQLite."""


def _fold(value: str | None) -> str | None:
    """`lamina_fold(text)` in SQL: Python's case folding, for words SQLite's ASCII-only
    `lower()` cannot fold."""
    return value.casefold() if value is not None else None


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _enable_wal(conn: sqlite3.Connection, path: str) -> None:
    """Switch the file to WAL, waiting out other processes doing the same.

    SQLite does not call the busy handler while a journal-mode change waits for its
    exclusive lock, so two processes opening a new database at once can see "database
    is locked" at once. WAL is persistent: once any process has switched, it is done.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            row = conn.execute("PRAGMA journal_mode").fetchone()
            if row and str(row[0]).lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise StoreError(f"{path}: cannot switch to WAL ({exc})") from None
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{path}: database stayed locked for {BUSY_TIMEOUT_MS / 1000:g} s"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class SQLiteStore(SQLiteSearch):
    """A `Store` on one SQLite database file (or `:memory:` for a single connection), which
    searches its banks itself (`SearchStore`, see lamina.store.sqlite_search)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            private_dir(Path(self.path).parent)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._migrated = False

    # -- connections -----------------------------------------------------------------------
    def exposed(self) -> list[str]:
        """The data directory and database files other users may read (data files are meant
        for their owner only): `path (mode 0755)` each."""
        if self.path == ":memory:":
            return []
        database = Path(self.path)
        found = []
        for path in (database.parent, database, *database.parent.glob(database.name + "-*")):
            try:
                mode = path.stat().st_mode & 0o777
            except OSError:
                continue
            if mode & 0o077:
                found.append(f"{path} (mode {mode:04o})")
        return found

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:" and not Path(self.path).exists():
            # Created for its owner only; SQLite gives its -wal and -shm files the same mode.
            with suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the database ({exc})") from None
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            _enable_wal(conn, self.path)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.create_function("lamina_fold", 1, _fold, deterministic=True)
        with self._lock:
            self._all.append(conn)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        if not self._migrated:
            self._migrated = True
            self.migrate()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the write lock from its start."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    # -- migrations ------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        self._migrated = True
        conn = getattr(self._local, "conn", None) or self.conn
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations"
            " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        pending = [(n, sql) for n, sql in MIGRATIONS if n not in done]
        if not pending:
            return []
        applied: list[str] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
            for name, sql in pending:
                if name in done:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    (name, _now()),
                )
                applied.append(name)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return applied

    # -- banks -----------------------------------------------------------------------------
    def _bank_id(self, conn: sqlite3.Connection, name: str) -> int | None:
        row = conn.execute("SELECT id FROM banks WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else None

    def ensure_bank(self, name: str) -> Bank:
        existing = self.get_bank(name)
        if existing is not None:
            return existing
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO banks (name, created_at) VALUES (?, ?)", (name, _now())
            )
        bank = self.get_bank(name)
        assert bank is not None
        return bank

    def get_bank(self, name: str) -> Bank | None:
        row = self.conn.execute(
            "SELECT name, created_at, metadata FROM banks WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            return None
        return Bank(row[0], datetime.fromisoformat(row[1]), orjson.loads(row[2]))

    def list_banks(self) -> list[Bank]:
        rows = self.conn.execute("SELECT name, created_at, metadata FROM banks ORDER BY name")
        return [Bank(r[0], datetime.fromisoformat(r[1]), orjson.loads(r[2])) for r in rows]

    def delete_bank(self, name: str) -> bool:
        with self._write() as conn:
            bank_id = self._bank_id(conn, name)
            cur = conn.execute("DELETE FROM banks WHERE name = ?", (name,))
            conn.execute("DELETE FROM posting_packs WHERE bank_id = ?", (bank_id,))
            conn.execute("DELETE FROM pack_dead WHERE bank_id = ?", (bank_id,))
        if bank_id is not None and self.path != ":memory:":
            for path in vector_dir(self.path).glob(f"{bank_id}-*"):
                path.unlink(missing_ok=True)
        return cur.rowcount > 0

    def bank_stats(self, name: str) -> BankStats:
        """Read from counters the triggers keep and two index probes: the same cost at a
        million memories as at a thousand."""
        conn = self.conn
        row = conn.execute(
            "SELECT id, live_memories, embedded, records FROM banks WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            return BankStats(name, 0, 0, 0, 0, {}, None, None)
        bank_id, memories, embedded, records = (int(v) for v in row)
        documents = conn.execute(
            "SELECT count(*) FROM documents WHERE bank_id = ?", (bank_id,)
        ).fetchone()[0]
        first = conn.execute(
            "SELECT min(t) FROM memories WHERE bank_id = ? AND t IS NOT NULL", (bank_id,)
        ).fetchone()[0]
        last = conn.execute(
            "SELECT max(t) FROM memories WHERE bank_id = ? AND t IS NOT NULL", (bank_id,)
        ).fetchone()[0]
        embedders = self._embedders(bank_id)
        return BankStats(
            name, documents, memories, records, embedded, embedders, _dt(first), _dt(last)
        )

    def bank_embedders(self, name: str) -> dict[str, int]:
        row = self.conn.execute("SELECT id FROM banks WHERE name = ?", (name,)).fetchone()
        return self._embedders(int(row[0])) if row is not None else {}

    def _embedders(self, bank_id: int) -> dict[str, int]:
        return {
            str(e): int(n)
            for e, n in self.conn.execute(
                "SELECT embedder, memories FROM bank_embedders WHERE bank_id = ?"
                " AND memories > 0 ORDER BY embedder",
                (bank_id,),
            )
        }

    def generation(self, bank: str) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT generation, deletions FROM banks WHERE name = ?", (bank,)
        ).fetchone()
        return (-1, -1) if row is None else (int(row[0]), int(row[1]))

    # -- documents -------------------------------------------------------------------------
    def _doc_row(self, conn: sqlite3.Connection, bank: str, document: str) -> Any:
        return conn.execute(
            "SELECT d.id, d.name, d.created_at, d.updated_at, d.metadata, d.tags, d.source,"
            " d.format, d.cursor_offset, d.cursor_open_offset, d.cursor_records,"
            " d.cursor_fingerprint, d.cursor_size, d.cursor_version, d.cursor_open_line"
            " FROM documents d JOIN banks b ON b.id = d.bank_id"
            " WHERE b.name = ? AND d.name = ?",
            (bank, document),
        ).fetchone()

    @staticmethod
    def _document(bank: str, row: Any) -> Document:
        return Document(
            bank=bank,
            id=row[1],
            created_at=datetime.fromisoformat(row[2]),
            updated_at=datetime.fromisoformat(row[3]),
            metadata=orjson.loads(row[4]),
            tags=tuple(orjson.loads(row[5])),
            source=row[6],
            format=row[7],
        )

    def get_document(self, bank: str, document: str) -> Document | None:
        row = self._doc_row(self.conn, bank, document)
        return None if row is None else self._document(bank, row)

    def list_documents(self, bank: str) -> list[Document]:
        rows = self.conn.execute(
            "SELECT d.id, d.name, d.created_at, d.updated_at, d.metadata, d.tags, d.source,"
            " d.format FROM documents d JOIN banks b ON b.id = d.bank_id WHERE b.name = ?"
            " ORDER BY d.updated_at, d.name",
            (bank,),
        )
        return [self._document(bank, r) for r in rows]

    def delete_document(self, bank: str, document: str) -> int:
        with self._write() as conn:
            row = self._doc_row(conn, bank, document)
            if row is None:
                return 0
            removed = conn.execute(
                "SELECT count(*) FROM memories WHERE document_id = ?", (row[0],)
            ).fetchone()[0]
            # Children first, while the document row exists: the triggers that keep the
            # bank's counts find their bank through it.
            conn.execute("DELETE FROM memories WHERE document_id = ?", (row[0],))
            conn.execute("DELETE FROM records WHERE document_id = ?", (row[0],))
            conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
            conn.execute(
                "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                " WHERE name = ?",
                (bank,),
            )
        return int(removed)

    def get_cursor(self, bank: str, document: str) -> Cursor:
        row = self._doc_row(self.conn, bank, document)
        if row is None:
            return Cursor()
        return Cursor(
            offset=row[8],
            open_offset=row[9],
            records=row[10],
            fingerprint=row[11],
            size=row[12],
            version=row[13],
            open_line=row[14],
        )

    def content_hashes(self, bank: str, ids: Iterable[str]) -> dict[str, str]:
        conn = self.conn
        bank_id = self._bank_id(conn, bank)
        wanted = list(ids)
        if bank_id is None or not wanted:
            return {}
        out: dict[str, str] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT id, content_hash FROM memories WHERE bank_id = ? AND id IN ({marks})",
                (bank_id, *part),
            )
            out.update({r[0]: r[1] for r in rows})
        return out

    def count_records(self, bank: str, document: str | None = None) -> int:
        query = (
            "SELECT count(*) FROM records r JOIN documents d ON d.id = r.document_id"
            " JOIN banks b ON b.id = d.bank_id WHERE b.name = ?"
        )
        args: tuple[str, ...] = (bank,)
        if document is not None:
            query += " AND d.name = ?"
            args = (bank, document)
        return int(self.conn.execute(query, args).fetchone()[0])

    def record_ids(self, bank: str, document: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT r.record_id FROM records r JOIN documents d ON d.id = r.document_id"
            " JOIN banks b ON b.id = d.bank_id WHERE b.name = ? AND d.name = ?"
            " ORDER BY r.record_id",
            (bank, document),
        )
        return [r[0] for r in rows]

    # -- retain ----------------------------------------------------------------------------
    def apply_retain(self, batch: RetainBatch) -> RetainOutcome:
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO banks (name, created_at) VALUES (?, ?)", (batch.bank, now)
            )
            bank_id = self._bank_id(conn, batch.bank)
            assert bank_id is not None
            row = self._doc_row(conn, batch.bank, batch.document)
            version = row[13] if row is not None else 0
            if version != batch.expected_version:
                return RetainOutcome(committed=False)
            c = batch.cursor
            if row is None:
                conn.execute(
                    "INSERT INTO documents (bank_id, name, created_at, updated_at, metadata,"
                    " tags, source, format, cursor_offset, cursor_open_offset, cursor_records,"
                    " cursor_fingerprint, cursor_size, cursor_version, cursor_open_line)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        bank_id, batch.document, now, now, _json(batch.metadata or {}),
                        _json(list(batch.tags or ())), batch.source, batch.format,
                        c.offset, c.open_offset, c.records, c.fingerprint, c.size, version + 1,
                        c.open_line,
                    ),
                )  # fmt: skip
                doc_id = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
            else:
                doc_id = int(row[0])
                metadata = orjson.loads(row[4])
                if batch.metadata:
                    metadata.update(batch.metadata)
                tags = list(dict.fromkeys([*orjson.loads(row[5]), *(batch.tags or ())]))
                conn.execute(
                    "UPDATE documents SET updated_at = ?, metadata = ?, tags = ?,"
                    " source = coalesce(?, source), format = coalesce(?, format),"
                    " cursor_offset = ?, cursor_open_offset = ?, cursor_records = ?,"
                    " cursor_fingerprint = ?, cursor_size = ?, cursor_version = ?,"
                    " cursor_open_line = ? WHERE id = ?",
                    (
                        now, _json(metadata), _json(tags), batch.source, batch.format,
                        c.offset, c.open_offset, c.records, c.fingerprint, c.size,
                        version + 1, c.open_line, doc_id,
                    ),
                )  # fmt: skip
            # Counted by rowcount: total_changes would count what triggers changed too.
            new_records = conn.executemany(
                "INSERT OR IGNORE INTO records (document_id, record_id) VALUES (?, ?)",
                [(doc_id, r) for r in batch.records],
            ).rowcount
            replaced = deleted = 0
            if batch.delete_memories:
                deleted = conn.executemany(
                    "DELETE FROM memories WHERE bank_id = ? AND id = ?",
                    [(bank_id, m) for m in batch.delete_memories],
                ).rowcount
            inserted = 0
            written: set[str] = set()
            for memory in batch.memories:
                cur = conn.execute(
                    "DELETE FROM memories WHERE bank_id = ? AND id = ?", (bank_id, memory.id)
                )
                replaced += cur.rowcount
                length, terms = postings_of(memory.text, memory.entities)
                cur = conn.execute(
                    "INSERT INTO memories (id, bank_id, document_id, kind, text, record_ids,"
                    " occurred_at, said_at, speakers, entities, tags, content_hash, embedding,"
                    " embedder, first_line, last_line, created_at, terms, tokens)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*_memory_params(memory, bank_id, doc_id, now), length, _tokens(memory)),
                )
                write_postings(conn, bank_id, int(cur.lastrowid or 0), length, terms)
                written.update(terms)
                inserted += 1
            if batch.memories or deleted:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1,"
                    " deletions = deletions + ? WHERE id = ?",
                    (1 if deleted else 0, bank_id),
                )
        if batch.memories:
            self._after_writing(batch.bank, bank_id, written)
        return RetainOutcome(True, new_records, inserted - replaced, replaced, deleted)

    def _after_writing(self, bank: str, bank_id: int, terms: Iterable[str]) -> None:
        """Keep the search structures fresh after a commit: the packs of the terms written
        (see lamina.store.sqlite_postings) and the bank's vector files. Done here, by the
        writer, so a recall never writes; a failure loses nothing (searches stay exact, only
        slower until the next write)."""
        with suppress(sqlite3.Error), self._write() as conn:
            maintain_packs(conn, bank_id, terms)
        self._sync_vectors_quietly(bank)

    def _sync_vectors_quietly(self, bank: str) -> None:
        """Append what a retain stored to the bank's vector files, so the next recall (a
        hook, a fresh process) finds them current. A failure here loses nothing: the files
        are a cache the next search brings up to date."""
        with suppress(OSError, sqlite3.Error):
            self.sync_vectors(bank)

    # -- memories --------------------------------------------------------------------------
    _MEMORY_COLUMNS = (
        "m.seq, m.id, d.name, m.kind, m.text, m.record_ids, m.occurred_at, m.said_at,"
        " m.speakers, m.entities, m.tags, m.content_hash, m.embedder, m.first_line,"
        " m.last_line, m.tokens"
    )

    @staticmethod
    def _memory(bank: str, row: Any, embedding: bytes | None) -> Memory:
        return Memory(
            id=row[1],
            bank=bank,
            document=row[2],
            kind=row[3],
            text=row[4],
            record_ids=tuple(orjson.loads(row[5])),
            occurred_at=_dt(row[6]),
            said_at=_dt(row[7]),
            speakers=tuple(orjson.loads(row[8])),
            entities=tuple(orjson.loads(row[9])),
            tags=tuple(orjson.loads(row[10])),
            content_hash=row[11],
            embedding=np.frombuffer(embedding, dtype=np.float32) if embedding else None,
            embedder=row[12],
            first_line=row[13],
            last_line=row[14],
            tokens=row[15],
        )

    def get_memories(self, bank: str, ids: Sequence[str]) -> list[Memory]:
        conn = self.conn
        found: dict[str, Memory] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT {self._MEMORY_COLUMNS}, m.embedding FROM memories m"
                " JOIN documents d ON d.id = m.document_id JOIN banks b ON b.id = m.bank_id"
                f" WHERE b.name = ? AND m.id IN ({marks})",
                (bank, *part),
            )
            for row in rows:
                found[row[1]] = self._memory(bank, row, row[16])
        return [found[i] for i in ids if i in found]

    def delete_memory(self, bank: str, memory_id: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM memories WHERE id = ? AND bank_id ="
                " (SELECT id FROM banks WHERE name = ?)",
                (memory_id, bank),
            )
            if cur.rowcount:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                    " WHERE name = ?",
                    (bank,),
                )
        return cur.rowcount > 0

    def forget_before(self, bank: str, before: datetime) -> int:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None:
                return 0
            # `t` is NULL for a memory without a time, and NULL < x is not true: those stay.
            # The triggers take each memory's postings and counts with it.
            cur = conn.execute(
                "DELETE FROM memories WHERE bank_id = ? AND t < ?", (bank_id, _bound(before))
            )
            if cur.rowcount:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                    " WHERE id = ?",
                    (bank_id,),
                )
        return max(cur.rowcount, 0)

    def iter_memories(
        self, bank: str, *, after_seq: int = 0, with_embeddings: bool = True
    ) -> Iterator[MemoryRow]:
        embedding = "m.embedding" if with_embeddings else "NULL"
        rows = self.conn.execute(
            f"SELECT {self._MEMORY_COLUMNS}, {embedding} FROM memories m"
            " JOIN documents d ON d.id = m.document_id JOIN banks b ON b.id = m.bank_id"
            " WHERE b.name = ? AND m.seq > ? ORDER BY m.seq",
            (bank, after_seq),
        )
        for row in rows:
            yield MemoryRow(int(row[0]), self._memory(bank, row, row[16]))

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
        conn = self.conn
        bank_id = self._bank_id(conn, bank)
        if bank_id is None:
            return MemoryPage([], 0, {})
        seqs, total, kinds = page_seqs(
            conn.execute, bank_id, where, limit, offset, _DIALECT,
            oldest_first=oldest_first, count_kinds=count_kinds,
        )  # fmt: skip
        found: dict[int, Memory] = {}
        if seqs:
            marks = ",".join("?" * len(seqs))
            for row in conn.execute(
                f"SELECT {self._MEMORY_COLUMNS}, NULL FROM memories m"
                f" JOIN documents d ON d.id = m.document_id WHERE m.seq IN ({marks})",
                seqs,
            ):
                found[int(row[0])] = self._memory(bank, row, None)
        return MemoryPage([found[s] for s in seqs if s in found], total, kinds)

    def set_entities(self, bank: str, entities: Mapping[str, Sequence[str]]) -> int:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None or not entities:
                return 0
            changed = 0
            written: set[str] = set()
            for mid, found in entities.items():
                row = conn.execute(
                    "SELECT seq, text FROM memories WHERE bank_id = ? AND id = ?", (bank_id, mid)
                ).fetchone()
                if row is None:
                    continue
                conn.execute(
                    "UPDATE memories SET entities = ? WHERE seq = ?", (_json(list(found)), row[0])
                )
                # Entities are terms of the lexical index: the memory's postings change too.
                conn.execute("DELETE FROM postings WHERE seq = ?", (row[0],))
                length, terms = postings_of(row[1], found)
                write_postings(conn, bank_id, int(row[0]), length, terms)
                written.update(terms)
                changed += 1
            drop_packs(conn, bank_id, written)  # rewritten inside their packs' ranges
            if changed:
                # Changed in place: readers must rebuild their index.
                conn.execute(
                    "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                    " WHERE id = ?",
                    (bank_id,),
                )
        if changed:
            self._after_writing(bank, bank_id, written)
        return changed

    def set_embeddings(self, bank: str, vectors: Mapping[str, Any], embedder: str) -> int:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None:
                return 0
            changed = conn.executemany(
                "UPDATE memories SET embedding = ?, embedder = ? WHERE bank_id = ? AND id = ?",
                [
                    (np.asarray(v, dtype=np.float32).tobytes(), embedder, bank_id, mid)
                    for mid, v in vectors.items()
                ],
            ).rowcount
            # Vectors changed in place: readers must rebuild their index, and vector files
            # their rows.
            conn.execute(
                "UPDATE banks SET generation = generation + 1, deletions = deletions + 1,"
                " vector_epoch = vector_epoch + 1 WHERE id = ?",
                (bank_id,),
            )
        return changed

    # -- corrections ------------------------------------------------------------------------
    def save_correction(self, bank: str, correction: Correction) -> None:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None:
                raise StoreError(f"no bank {bank!r}")
            conn.execute(
                "INSERT OR REPLACE INTO corrections (bank_id, memory_id, state, replacement,"
                " note, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    bank_id, correction.memory, correction.state, correction.replacement,
                    correction.note, (correction.at or datetime.now(UTC)).isoformat(),
                ),
            )  # fmt: skip

    def delete_correction(self, bank: str, memory_id: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM corrections WHERE memory_id = ?"
                " AND bank_id = (SELECT id FROM banks WHERE name = ?)",
                (memory_id, bank),
            )
        return cur.rowcount > 0

    def load_corrections(
        self, bank: str, ids: Sequence[str] | None = None
    ) -> dict[str, Correction]:
        sql = (
            "SELECT c.memory_id, c.state, c.replacement, c.note, c.created_at"
            " FROM corrections c JOIN banks b ON b.id = c.bank_id WHERE b.name = ?"
        )
        params: list[Any] = [bank]
        if ids is not None:
            if not ids:
                return {}
            sql += " AND c.memory_id IN (SELECT value FROM json_each(?))"
            params.append(orjson.dumps(list(ids)).decode())
        rows = self.conn.execute(sql + " ORDER BY c.created_at, c.memory_id", params)
        return {
            r[0]: Correction(r[0], r[1], r[2], r[3], datetime.fromisoformat(r[4])) for r in rows
        }

    # -- API keys and operations ------------------------------------------------------------
    def create_api_key(self, name: str, key_hash: str, banks: Sequence[str]) -> None:
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO api_keys (name, key_hash, banks, created_at) VALUES (?, ?, ?, ?)",
                    (name, key_hash, _json(list(banks)), _now()),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"an API key named {name!r} already exists") from None

    def find_api_key(self, key_hash: str) -> tuple[str, list[str]] | None:
        row = self.conn.execute(
            "SELECT name, banks FROM api_keys WHERE key_hash = ?", (key_hash,)
        ).fetchone()
        return None if row is None else (row[0], list(orjson.loads(row[1])))

    def list_api_keys(self) -> list[tuple[str, list[str], str]]:
        rows = self.conn.execute("SELECT name, banks, created_at FROM api_keys ORDER BY name")
        return [(r[0], list(orjson.loads(r[1])), r[2]) for r in rows]

    def api_key_hashes(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT name, key_hash FROM api_keys").fetchall())

    def delete_api_key(self, name: str) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM api_keys WHERE name = ?", (name,))
        return cur.rowcount > 0

    def count_api_keys(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM api_keys").fetchone()[0])

    def save_operation(
        self,
        op_id: str,
        kind: str,
        bank: str,
        status: str,
        result: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO operations (id, kind, bank, status, result, error, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                " status = excluded.status, result = excluded.result, error = excluded.error,"
                " updated_at = excluded.updated_at",
                (op_id, kind, bank, status, None if result is None else _json(result), error,
                 now, now),
            )  # fmt: skip

    def get_operation(self, op_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT id, kind, bank, status, result, error, created_at, updated_at"
            " FROM operations WHERE id = ?",
            (op_id,),
        ).fetchone()
        if row is None:
            return None
        keys = ("id", "kind", "bank", "status", "result", "error", "created_at", "updated_at")
        data = dict(zip(keys, row, strict=True))
        data["result"] = orjson.loads(data["result"]) if data["result"] else None
        return data

    # -- context logs ----------------------------------------------------------------------
    def _log_id(self, conn: sqlite3.Connection, bank: str, log: str) -> int | None:
        row = conn.execute(
            "SELECT l.id FROM context_logs l JOIN banks b ON b.id = l.bank_id"
            " WHERE b.name = ? AND l.name = ?",
            (bank, log),
        ).fetchone()
        return int(row[0]) if row else None

    def _existing_log(self, conn: sqlite3.Connection, bank: str, log: str) -> int:
        log_id = self._log_id(conn, bank, log)
        if log_id is None:
            raise StoreError(f"no context log {log!r} in bank {bank!r}")
        return log_id

    def append_log_messages(self, bank: str, log: str, messages: Sequence[Message]) -> int:
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO banks (name, created_at) VALUES (?, ?)", (bank, now)
            )
            bank_id = self._bank_id(conn, bank)
            conn.execute(
                "INSERT OR IGNORE INTO context_logs (bank_id, name, created_at, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (bank_id, log, now, now),
            )
            log_id, count = conn.execute(
                "SELECT id, messages FROM context_logs WHERE bank_id = ? AND name = ?",
                (bank_id, log),
            ).fetchone()
            added = 0
            for message in messages:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO context_messages (log_id, position, message_id, body)"
                    " VALUES (?, ?, ?, ?)",
                    (log_id, count + added, message.id, _json(message_to_json(message))),
                )
                added += cur.rowcount
            if added:
                conn.execute(
                    "UPDATE context_logs SET messages = ?, updated_at = ? WHERE id = ?",
                    (count + added, now, log_id),
                )
        return added

    def set_log_times(
        self, bank: str, log: str, created_at: datetime, updated_at: datetime
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE context_logs SET created_at = ?, updated_at = ?"
                " WHERE name = ? AND bank_id = (SELECT id FROM banks WHERE name = ?)",
                (
                    created_at.astimezone(UTC).isoformat(),
                    updated_at.astimezone(UTC).isoformat(),
                    log,
                    bank,
                ),
            )

    def read_log(self, bank: str, log: str, start: int = 0) -> list[Message]:
        conn = self.conn
        log_id = self._log_id(conn, bank, log)
        if log_id is None:
            return []
        rows = conn.execute(
            "SELECT body FROM context_messages WHERE log_id = ? AND position >= ?"
            " ORDER BY position",
            (log_id, start),
        )
        return [message_from_json(orjson.loads(r[0])) for r in rows]

    def list_logs(self, bank: str) -> list[ContextLogInfo]:
        rows = self.conn.execute(
            "SELECT l.name, l.messages, l.created_at, l.updated_at,"
            " (SELECT count(*) FROM context_summaries s WHERE s.log_id = l.id)"
            " FROM context_logs l JOIN banks b ON b.id = l.bank_id WHERE b.name = ?"
            " ORDER BY l.name",
            (bank,),
        )
        return [
            ContextLogInfo(
                bank, r[0], r[1], r[4], datetime.fromisoformat(r[2]), datetime.fromisoformat(r[3])
            )
            for r in rows
        ]

    def delete_log(self, bank: str, log: str) -> bool:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            if log_id is None:
                return False
            conn.execute("DELETE FROM context_logs WHERE id = ?", (log_id,))
        return True

    def save_summary(self, bank: str, log: str, summary: StoredSummary) -> bool:
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log)
            cur = conn.execute(
                "INSERT OR IGNORE INTO context_summaries (log_id, id, level, start_position,"
                " end_position, children, text, tokens, summariser, request_hash, stop_reason,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    log_id, summary.id, summary.level, summary.start, summary.end,
                    _json(list(summary.children)), summary.text, summary.tokens,
                    summary.summariser, summary.request_hash, summary.stop_reason, _now(),
                ),
            )  # fmt: skip
        return cur.rowcount > 0

    def load_summaries(self, bank: str, log: str) -> list[StoredSummary]:
        conn = self.conn
        log_id = self._log_id(conn, bank, log)
        if log_id is None:
            return []
        rows = conn.execute(
            "SELECT id, level, start_position, end_position, children, text, tokens,"
            " summariser, request_hash, stop_reason FROM context_summaries WHERE log_id = ?"
            " ORDER BY seq",
            (log_id,),
        )
        return [
            StoredSummary(r[0], r[1], r[2], r[3], tuple(orjson.loads(r[4])), *r[5:]) for r in rows
        ]

    def save_frontier(self, bank: str, log: str, frontier: Mapping[str, JSONValue]) -> None:
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log)
            conn.execute(
                "UPDATE context_logs SET frontier = ? WHERE id = ?", (_json(frontier), log_id)
            )

    def load_frontier(self, bank: str, log: str) -> dict[str, JSONValue] | None:
        row = self.conn.execute(
            "SELECT l.frontier FROM context_logs l JOIN banks b ON b.id = l.bank_id"
            " WHERE b.name = ? AND l.name = ?",
            (bank, log),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        value: dict[str, JSONValue] = orjson.loads(row[0])
        return value

    def save_log_counts(
        self,
        bank: str,
        log: str,
        key: str,
        start: int,
        counts: Sequence[tuple[int, int, int]],
    ) -> None:
        if not counts:
            return
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            if log_id is None:
                return
            conn.executemany(
                "INSERT OR IGNORE INTO context_counts (log_id, key, position, tokens, shown,"
                " uncut) VALUES (?, ?, ?, ?, ?, ?)",
                [(log_id, key, start + n, *c) for n, c in enumerate(counts)],
            )

    def load_log_counts(self, bank: str, log: str, key: str) -> list[tuple[int, int, int]]:
        conn = self.conn
        log_id = self._log_id(conn, bank, log)
        if log_id is None:
            return []
        rows = conn.execute(
            "SELECT position, tokens, shown, uncut FROM context_counts"
            " WHERE log_id = ? AND key = ? ORDER BY position",
            (log_id, key),
        )
        return contiguous_counts(rows)

    def save_pin(self, bank: str, log: str, pin: StoredPin) -> None:
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log)
            seq = conn.execute(
                "SELECT coalesce((SELECT seq FROM context_pins WHERE log_id = ? AND name = ?),"
                " (SELECT coalesce(max(seq), 0) + 1 FROM context_pins WHERE log_id = ?))",
                (log_id, pin.name, log_id),
            ).fetchone()[0]
            conn.execute(
                "INSERT OR REPLACE INTO context_pins (log_id, name, seq, mode, level,"
                " start_position, end_position, document, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    log_id, pin.name, seq, pin.mode, pin.level, pin.start, pin.end,
                    pin.document, _now(),
                ),
            )  # fmt: skip

    def delete_pin(self, bank: str, log: str, name: str) -> bool:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            if log_id is None:
                return False
            cur = conn.execute(
                "DELETE FROM context_pins WHERE log_id = ? AND name = ?", (log_id, name)
            )
        return cur.rowcount > 0

    def load_pins(self, bank: str, log: str) -> list[StoredPin]:
        conn = self.conn
        log_id = self._log_id(conn, bank, log)
        if log_id is None:
            return []
        rows = conn.execute(
            "SELECT name, mode, level, start_position, end_position, document"
            " FROM context_pins WHERE log_id = ? ORDER BY seq",
            (log_id,),
        )
        return [StoredPin(*r) for r in rows]

    def record_spend(
        self, summariser: str, at: datetime, input_tokens: int, output_tokens: int
    ) -> None:
        when = at.astimezone(UTC)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO llm_spend (summariser, at, input_tokens, output_tokens)"
                " VALUES (?, ?, ?, ?)",
                (summariser, when.isoformat(), input_tokens, output_tokens),
            )
            conn.execute("DELETE FROM llm_spend WHERE at < ?", ((when - SPEND_KEPT).isoformat(),))

    def spent_since(self, summariser: str, since: datetime) -> int:
        row = self.conn.execute(
            "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM llm_spend"
            " WHERE summariser = ? AND at >= ?",
            (summariser, since.astimezone(UTC).isoformat()),
        ).fetchone()
        return int(row[0])

    # -- maintenance -----------------------------------------------------------------------
    def size_bytes(self) -> int | None:
        if self.path == ":memory:":
            return None
        files = [*Path(self.path).parent.glob(Path(self.path).name + "*")]
        files += vector_dir(self.path).glob("*.vec")
        return sum(p.stat().st_size for p in files if p.is_file())

    def prepare_search(
        self, bank: str, progress: Callable[[int, int], None] | None = None, batch: int = 2000
    ) -> int:
        """Index, for search in the database, the memories of a bank retained before it
        searched there (their postings and token counts), a batch per transaction, then mark
        the bank searchable. Safe to interrupt and to run beside retains. Returns how many
        memories it indexed; `progress` is told (done, total)."""
        conn = self.conn
        bank_id = self._bank_id(conn, bank)
        if bank_id is None:
            return 0
        total = int(
            conn.execute(
                "SELECT count(*) FROM memories WHERE bank_id = ? AND terms IS NULL", (bank_id,)
            ).fetchone()[0]
        )
        done = after = 0
        while True:
            rows = conn.execute(
                "SELECT seq, text, entities, tokens FROM memories WHERE bank_id = ? AND seq > ?"
                " AND terms IS NULL ORDER BY seq LIMIT ?",
                (bank_id, after, batch),
            ).fetchall()
            if not rows:
                break
            with self._write() as writing:
                written: set[str] = set()
                for seq, text, entities, tokens in rows:
                    length, terms = postings_of(text, orjson.loads(entities))
                    writing.execute("DELETE FROM postings WHERE seq = ?", (seq,))
                    write_postings(writing, bank_id, seq, length, terms)
                    written.update(terms)
                    writing.execute(
                        "UPDATE memories SET terms = ?, tokens = ? WHERE seq = ? AND terms IS NULL",
                        (length, tokens if tokens is not None else count_text(text), seq),
                    )
                # Retains meanwhile may have packed these terms above these seqs.
                drop_packs(writing, bank_id, written)
            done += len(rows)
            after = int(rows[-1][0])
            if progress is not None:
                progress(done, max(total, done))
        with self._write() as writing:
            writing.execute("UPDATE banks SET search_ready = 1 WHERE id = ?", (bank_id,))
        self._after_writing(bank, bank_id, common_terms(conn, bank_id))
        return done

    def schema(self) -> list[str]:
        """The schema's SQL, normalised, for the pin test."""
        rows = self.conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
            " ORDER BY type, name"
        )
        return [" ".join(r[0].split()) for r in rows]


def _tokens(memory: Memory) -> int:
    return memory.tokens if memory.tokens is not None else count_text(memory.text)


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script, whole (a trigger's body holds semicolons)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip().strip(";").strip():
                yield pending
            pending = ""
    if pending.strip():
        yield pending


def _memory_params(memory: Memory, bank_id: int, doc_id: int, now: str) -> tuple[Any, ...]:
    vector = memory.embedding
    return (
        memory.id,
        bank_id,
        doc_id,
        memory.kind,
        memory.text,
        _json(list(memory.record_ids)),
        _iso(memory.occurred_at),
        _iso(memory.said_at),
        _json(list(memory.speakers)),
        _json(list(memory.entities)),
        _json(list(memory.tags)),
        memory.content_hash,
        None if vector is None else np.asarray(vector, dtype=np.float32).tobytes(),
        memory.embedder if vector is not None else None,
        memory.first_line,
        memory.last_line,
        now,
    )
