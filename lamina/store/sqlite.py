"""The embedded default store: one SQLite file, WAL mode, safe for several processes.

Each thread gets its own connection. Writes take the write lock up front (`BEGIN IMMEDIATE`)
and wait for it (busy timeout), so two hooks, a server and a CLI sharing one bank never see
"database is locked" under normal load. A retain is one transaction, guarded by the document
cursor's version: it commits whole, or not at all.

What the store does is written once for both databases (lamina.store.documents, memories,
logs, keys, operations); this module connects, migrates, spells values and lists the SQLite
way (`SQLiteDialect`), and writes memories with their postings (lamina.store.sqlite_postings),
whose counts the schema's triggers keep.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..errors import StoreError
from ..memories import Memory
from ..owned import private_dir
from ..tokens import count_text
from . import rows
from .dialect import Columns, Dialect, Rows
from .documents import SQLDocuments
from .keys import SQLKeys
from .logs import SQLLogs
from .memories import SQLMemories
from .operations import SQLOperations
from .rows import MEMORY_INSERT, memory_params
from .sqlite_migrations import MIGRATIONS
from .sqlite_search import SQLiteSearch

# Postings (lamina.store.sqlite_postings, with the text analysis they need) and vector files
# (lamina.store.vectors) are imported by the methods that write them: a process that only
# keeps context logs (`lamina compile --bank`) never loads them.

__all__ = ["SQLiteDialect", "SQLiteStore"]

BUSY_TIMEOUT_MS = 60_000


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _json_list(values: Sequence[Any]) -> str:
    return _json(list(values))


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _bound(value: datetime) -> str:
    """A time bound as stored times are written; a time without a zone is taken as UTC."""
    return _utc(value if value.tzinfo else value.replace(tzinfo=UTC))


def _vector_bytes(value: Any) -> bytes:
    return bytes(np.asarray(value, dtype=np.float32).tobytes())


def _vector_of_bytes(value: bytes | None) -> npt.NDArray[np.float32] | None:
    return np.frombuffer(value, dtype=np.float32) if value else None


def _fold(value: str | None) -> str | None:
    """`lamina_fold(text)` in SQL: Python's case folding, for words SQLite's ASCII-only
    `lower()` cannot fold."""
    return value.casefold() if value is not None else None


class SQLiteDialect(Dialect):
    """SQLite's spelling: JSON text for JSON and arrays, UTC ISO text for times (which sorts
    as time does), float32 bytes for vectors, lists passed as JSON (`json_each`)."""

    has_tag = "EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)"
    # instr() takes the word literally (no LIKE wildcards to escape).
    has_ascii_word = "instr(lower(m.text), ?) > 0"
    has_word = "instr(lamina_fold(m.text), ?) > 0"
    # SQLite sorts NULL below every time: newest first puts memories without one last.
    newest_first = "m.t DESC, m.seq"
    oldest_first = "m.t, m.seq DESC"
    # The document's own index (its memories only), not the bank's time index the planner
    # would pick for the order (70 ms instead of 0.1 at 100,000 memories).
    bank_with_document = "+m.bank_id = ?"
    unique_violation = sqlite3.IntegrityError

    def execute(
        self, conn: Any, sql: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> Any:
        return conn.execute(sql, params)

    def executemany(self, conn: Any, sql: str, rows: Rows) -> int:
        return int(conn.executemany(sql, rows).rowcount)

    def insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        return int(conn.execute(sql, params).lastrowid)

    def insert_new(self, conn: Any, table: str, columns: Columns, rows: Rows) -> int:
        names = ", ".join(name for name, _type in columns)
        marks = ", ".join("?" * len(columns))
        # Counted by rowcount: total_changes would count what triggers changed too.
        sql = f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})"
        return self.executemany(conn, sql, rows)

    def any_of(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    json_in = staticmethod(_json)
    json_out = array_out = staticmethod(orjson.loads)
    array_in = list_in = staticmethod(_json_list)
    time_in = staticmethod(_utc)
    time_out = staticmethod(datetime.fromisoformat)
    bound_in = staticmethod(_bound)
    vector_in = staticmethod(_vector_bytes)
    vector_out = staticmethod(_vector_of_bytes)
    word_param = staticmethod(str.casefold)


SQLITE = SQLiteDialect()


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


class SQLiteStore(SQLiteSearch, SQLDocuments, SQLMemories, SQLLogs, SQLKeys, SQLOperations):
    """A `Store` on one SQLite database file (or `:memory:` for a single connection), which
    searches its banks itself (`SearchStore`, see lamina.store.sqlite_search)."""

    dialect: ClassVar[Dialect] = SQLITE
    VECTOR_EPOCH = ", vector_epoch = vector_epoch + 1"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            private_dir(Path(self.path).parent)
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
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
            self._all_conns.append(conn)
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

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return nullcontext(self.conn)

    def _stream(self, sql: str, params: Sequence[Any]) -> Iterator[Sequence[Any]]:
        yield from self.conn.execute(sql, params)

    def close(self) -> None:
        with self._lock:
            for conn in self._all_conns:
                conn.close()
            self._all_conns.clear()
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
                    (name, SQLITE.now()),
                )
                applied.append(name)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return applied

    # -- memories with their postings -------------------------------------------------------
    @staticmethod
    def _memory(bank: str, row: Sequence[Any], embedding: Any = None) -> Memory:
        """A memory from a row of `_MEMORY_COLUMNS` and its vector (lamina.store.sqlite_search)."""
        return rows.memory(bank, row, SQLITE)

    def _delete_memories(
        self, conn: Any, bank_id: int, condition: str, params: Sequence[Any]
    ) -> int:
        # The triggers take each memory's postings and counts with it.
        cur = conn.execute(
            f"DELETE FROM memories WHERE bank_id = ? AND {condition}", (bank_id, *params)
        )
        return max(int(cur.rowcount), 0)

    def _write_memories(
        self, conn: Any, bank_id: int, doc_id: int, memories: Sequence[Memory], now: Any
    ) -> tuple[int, set[str]]:
        from .sqlite_postings import postings_of, write_postings

        replaced = 0
        written: set[str] = set()
        for memory in memories:
            cur = conn.execute(
                "DELETE FROM memories WHERE bank_id = ? AND id = ?", (bank_id, memory.id)
            )
            replaced += cur.rowcount
            length, terms = postings_of(memory.text, memory.entities)
            cur = conn.execute(
                f"INSERT INTO memories ({MEMORY_INSERT}, terms, tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*memory_params(memory, bank_id, doc_id, now, SQLITE), length, _tokens(memory)),
            )
            write_postings(conn, bank_id, int(cur.lastrowid or 0), length, terms)
            written.update(terms)
        return replaced, written

    def _retained(self, bank: str, bank_id: int, batch: Any, terms: set[str]) -> None:
        if batch.memories:
            self._after_writing(bank, bank_id, terms)

    def _drop_bank(self, conn: Any, bank_id: int) -> None:
        conn.execute("DELETE FROM posting_packs WHERE bank_id = ?", (bank_id,))
        conn.execute("DELETE FROM pack_dead WHERE bank_id = ?", (bank_id,))
        if self.path != ":memory:":
            from .vectors import vector_dir

            # A cache: a failed commit leaves nothing the next search does not rebuild.
            for path in vector_dir(self.path).glob(f"{bank_id}-*"):
                path.unlink(missing_ok=True)

    def _after_writing(self, bank: str, bank_id: int, terms: Iterable[str]) -> None:
        """Keep the search structures fresh after a commit: the packs of the terms written
        (see lamina.store.sqlite_postings) and the bank's vector files. Done here, by the
        writer, so a recall never writes; a failure loses nothing (searches stay exact, only
        slower until the next write)."""
        from .sqlite_postings import maintain_packs

        with suppress(sqlite3.Error), self._write() as conn:
            maintain_packs(conn, bank_id, terms)
        self._sync_vectors_quietly(bank)

    def _sync_vectors_quietly(self, bank: str) -> None:
        """Append what a retain stored to the bank's vector files, so the next recall (a
        hook, a fresh process) finds them current. A failure here loses nothing: the files
        are a cache the next search brings up to date."""
        with suppress(OSError, sqlite3.Error):
            self.sync_vectors(bank)

    def set_entities(self, bank: str, entities: Mapping[str, Sequence[str]]) -> int:
        from .sqlite_postings import drop_packs, postings_of, write_postings

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
                seq, text = row
                conn.execute(
                    "UPDATE memories SET entities = ? WHERE seq = ?", (_json(list(found)), seq)
                )
                # Entities are terms of the lexical index: the memory's postings change too.
                conn.execute("DELETE FROM postings WHERE seq = ?", (seq,))
                length, terms = postings_of(text, found)
                write_postings(conn, bank_id, seq, length, terms)
                written.update(terms)
                changed += 1
            drop_packs(conn, bank_id, written)  # rewritten inside their packs' ranges
            if changed:
                # Changed in place: readers must rebuild their index.
                self._bump(conn, bank_id, deleted=True)
        if changed:
            self._after_writing(bank, bank_id, written)
        return changed

    # -- maintenance -----------------------------------------------------------------------
    def size_bytes(self) -> int | None:
        if self.path == ":memory:":
            return None
        from .vectors import vector_dir

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
        from .sqlite_postings import common_terms, drop_packs, postings_of, write_postings

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
