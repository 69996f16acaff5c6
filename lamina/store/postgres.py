"""The PostgreSQL store: the same protocol as SQLite, for banks shared by many hosts.

    store = PostgresStore("postgresql://lamina@db.internal/lamina")

Connections come from a pool (psycopg_pool), sized by `pool_min` / `pool_max` or the URL's
`pool_max` query parameter; `pack_cache_mb` in the URL sizes the memory for posting packs kept
between searches (`lexical_pack_cache_bytes`). Vectors live in pgvector `vector` columns,
metadata in jsonb.

Concurrency. A retain is one transaction. It first locks its bank's row (`SELECT ... FOR
UPDATE`), so writes to one bank are serialised the way SQLite serialises all writes:

- the cursor compare-and-swap is exact (two hosts retaining the same growing transcript store
  each record once; the loser's batch commits nothing and it retries from the new cursor);
- memory sequence numbers are handed out in commit order within a bank, which is what lets a
  reader extend its in-process index with `iter_memories(after_seq=...)` without missing rows.

Writes to different banks do not wait for each other.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt
import orjson

from ..errors import StoreError
from ..memories import Bank, BankStats, Correction, Cursor, Document, Memory
from ..messages import JSONValue, Message, message_from_json, message_to_json
from ..text.entities import entity_terms
from ..text.lexical import term_counts
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
from .postgres_migrations import MIGRATIONS
from .postgres_search import PostgresSearch
from .urls import describe_target

try:
    import psycopg
    from psycopg.adapt import Buffer, Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise StoreError(
        "the PostgreSQL store needs the postgres extra: pip install 'lamina[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_MIGRATION_LOCK = 0x4C414D49  # "LAMI": one migrating process at a time, per database


def _now() -> datetime:
    return datetime.now(UTC)


# -- pgvector <-> numpy, binary both ways ------------------------------------------------------
# pgvector's binary form is: dimensions (int16), unused (int16), then float32s, big-endian.
class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        vector = np.asarray(obj, dtype=">f4")
        return np.array([vector.shape[0], 0], dtype=">u2").tobytes() + vector.tobytes()


class _VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> npt.NDArray[np.float32]:
        return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise StoreError("the pgvector extension is missing from the database (run lamina migrate)")
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(info.oid, _VectorLoader)


def _jsonb(value: Mapping[str, Any]) -> Jsonb:
    """Metadata as jsonb, which cannot hold NUL characters: they become U+FFFD."""

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            return v.replace("\x00", "\ufffd")
        if isinstance(v, Mapping):
            return {clean(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return Jsonb(clean(value))


def _up_to_date(conn: psycopg.Connection[Any]) -> bool:
    """Whether the database has every migration already (read without a lock or a write)."""
    try:
        names = {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}
    except psycopg.errors.UndefinedTable:
        return False
    return all(name in names for name, _sql in MIGRATIONS)


def _first_line(exc: BaseException) -> str:
    """What went wrong, in one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_URL_OPTIONS = ("pool_max", "pack_cache_mb")
"""The URL query parameters the store reads itself, rather than passing on to libpq."""


def _url_number(url: str, query: dict[str, str], name: str, default: float, least: float) -> float:
    """A number given in the URL's query, at least `least`."""
    if name not in query:
        return default
    text = query[name]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= least:
        raise StoreError(
            f"{describe_target(url)}: {name}={text!r} in the URL is not a number >= {least:g}"
        )
    return value


def _vector(value: Any) -> npt.NDArray[np.float32] | None:
    return None if value is None else np.asarray(value, dtype=np.float32)


def _either_case(word: str) -> str:
    """A regular expression matching `word` literally with each letter in either case (the
    database's locale may fold ASCII only)."""
    out: list[str] = []
    for char in word:
        forms = sorted({f for f in (char, char.lower(), char.upper()) if len(f) == 1})
        if len(forms) > 1:
            out.append("[" + "".join(forms) + "]")
        else:
            out.append(char if char.isalnum() else "\\" + char)
    return "".join(out)


def _aware(value: datetime) -> datetime:
    """A time without a zone is taken as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


_DIALECT = Dialect(
    mark="%s",
    has_tag="%s = ANY(m.tags)",
    has_ascii_word="strpos(lower(m.text), %s) > 0",  # strpos() takes it literally
    has_word="m.text ~ %s",  # lower() folds ASCII only under the C locale
    word_param=_either_case,
    time_param=_aware,
    newest_first="m.t DESC NULLS LAST, m.seq",
    oldest_first="m.t ASC NULLS FIRST, m.seq DESC",
    bank_with_document="m.bank_id = %s",
)
"""How `page_memories`' filter is written in PostgreSQL."""


class PostgresStore(PostgresSearch):
    """A `Store` on a PostgreSQL database with the pgvector extension."""

    def __init__(self, url: str, *, pool_min: int = 4, pool_max: int | None = None) -> None:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.pool_max = int(_url_number(url, query, "pool_max", pool_max or 8, 1))
        self.pool_min = min(pool_min, self.pool_max)
        if "pack_cache_mb" in query:
            megabytes = _url_number(url, query, "pack_cache_mb", 0, 0)
            self.lexical_pack_cache_bytes = int(megabytes * (1 << 20))
        # The rest of the query goes to libpq as written (re-encoding would turn the
        # spaces of `options=-c%20...` into "+", which libpq does not read as spaces).
        kept = [
            p
            for p in parts.query.split("&")
            if p and unquote_plus(p.split("=")[0]) not in _URL_OPTIONS
        ]
        self.url = urlunsplit(parts._replace(query="&".join(kept)))
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()
        self._migrated = False

    def __repr__(self) -> str:
        return f"PostgresStore({describe_target(self.url)!r})"

    # -- connections -----------------------------------------------------------------------
    def _connect_raw(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                f"{describe_target(self.url)}: cannot connect ({_first_line(exc)})"
            ) from None

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    if not self._migrated:
                        self.migrate()
                    pool = ConnectionPool(
                        self.url,
                        min_size=self.pool_min,
                        max_size=self.pool_max,
                        kwargs={"autocommit": True},
                        configure=_register_vector,
                        open=False,
                        name="lamina",
                    )
                    try:
                        pool.open(wait=True, timeout=30)
                    except Exception as exc:
                        pool.close()
                        raise StoreError(
                            f"{describe_target(self.url)}: cannot open a connection pool ({exc})"
                        ) from None
                    self._pool = pool
        return self._pool

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        with self.pool.connection() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self.pool.connection() as conn, conn.transaction():
                yield conn
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege) as exc:
            raise StoreError(
                f"{describe_target(self.url)}: the database refuses this write ({_first_line(exc)})"
            ) from None

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    # -- migrations ------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        self._migrated = True
        with self._connect_raw() as conn:
            if _up_to_date(conn):
                return []  # no lock taken, nothing written: a read-only standby opens too
            return self._migrate(conn)

    def _migrate(self, conn: psycopg.Connection[Any]) -> list[str]:
        applied: list[str] = []
        with conn.transaction():
            # Several processes may start at once; one migrates, the others wait and see.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (name text PRIMARY KEY, applied_at timestamptz NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                try:
                    conn.execute(sql.encode())
                except psycopg.Error as exc:
                    raise StoreError(
                        f"{describe_target(self.url)}: migration {name} failed ({exc})"
                    ) from None
                conn.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)",
                    (name, _now()),
                )
                applied.append(name)
        return applied

    def applied_migrations(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    # -- banks -----------------------------------------------------------------------------
    def ensure_bank(self, name: str) -> Bank:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO banks (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (name,)
            )
        bank = self.get_bank(name)
        assert bank is not None
        return bank

    def get_bank(self, name: str) -> Bank | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT name, created_at, metadata FROM banks WHERE name = %s", (name,)
            ).fetchone()
        return None if row is None else Bank(row[0], row[1], row[2])

    def list_banks(self) -> list[Bank]:
        with self._conn() as conn:
            rows = conn.execute("SELECT name, created_at, metadata FROM banks ORDER BY name")
            return [Bank(r[0], r[1], r[2]) for r in rows]

    def delete_bank(self, name: str) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM banks WHERE name = %s", (name,))
        return cur.rowcount > 0

    def bank_stats(self, name: str) -> BankStats:
        """Read from counters kept at every write and two index probes: the same cost at a
        million memories as at a thousand."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT id, live_memories, embedded, records FROM banks WHERE name = %s", (name,)
            ).fetchone()
            if row is None:
                return BankStats(name, 0, 0, 0, 0, {}, None, None)
            bank_id, memories, embedded, records = (int(v) for v in row)
            documents = conn.execute(
                "SELECT count(*) FROM documents WHERE bank_id = %s", (bank_id,)
            ).fetchone()
            first, last = conn.execute(
                "SELECT (SELECT min(t) FROM memories WHERE bank_id = %s),"
                " (SELECT max(t) FROM memories WHERE bank_id = %s)",
                (bank_id, bank_id),
            ).fetchone() or (None, None)
            embedders = self._embedders(conn, bank_id)
        return BankStats(
            name,
            int(documents[0]) if documents else 0,
            memories,
            records,
            embedded,
            embedders,
            first,
            last,
        )

    def bank_embedders(self, name: str) -> dict[str, int]:
        with self._conn() as conn:
            row = conn.execute("SELECT id FROM banks WHERE name = %s", (name,)).fetchone()
            return self._embedders(conn, int(row[0])) if row is not None else {}

    @staticmethod
    def _embedders(conn: Any, bank_id: int) -> dict[str, int]:
        return {
            str(e): int(n)
            for e, n in conn.execute(
                "SELECT embedder, memories FROM bank_embedders WHERE bank_id = %s"
                " AND memories > 0 ORDER BY embedder",
                (bank_id,),
            )
        }

    def generation(self, bank: str) -> tuple[int, int]:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT generation, deletions FROM banks WHERE name = %s", (bank,)
            ).fetchone()
        return (-1, -1) if row is None else (int(row[0]), int(row[1]))

    # -- documents -------------------------------------------------------------------------
    _DOC_COLUMNS = (
        "d.id, d.name, d.created_at, d.updated_at, d.metadata, d.tags, d.source, d.format,"
        " d.cursor_offset, d.cursor_open_offset, d.cursor_records, d.cursor_fingerprint,"
        " d.cursor_size, d.cursor_version, d.cursor_open_line"
    )

    def _doc_row(self, conn: psycopg.Connection[Any], bank: str, document: str) -> Any:
        return conn.execute(
            f"SELECT {self._DOC_COLUMNS} FROM documents d JOIN banks b ON b.id = d.bank_id"
            " WHERE b.name = %s AND d.name = %s",
            (bank, document),
        ).fetchone()

    @staticmethod
    def _document(bank: str, row: Any) -> Document:
        return Document(
            bank=bank,
            id=row[1],
            created_at=row[2],
            updated_at=row[3],
            metadata=row[4],
            tags=tuple(row[5]),
            source=row[6],
            format=row[7],
        )

    def get_document(self, bank: str, document: str) -> Document | None:
        with self._conn() as conn:
            row = self._doc_row(conn, bank, document)
        return None if row is None else self._document(bank, row)

    def list_documents(self, bank: str) -> list[Document]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {self._DOC_COLUMNS} FROM documents d JOIN banks b ON b.id = d.bank_id"
                " WHERE b.name = %s ORDER BY d.updated_at, d.name",
                (bank,),
            )
            return [self._document(bank, r) for r in rows]

    def delete_document(self, bank: str, document: str) -> int:
        with self._write() as conn:
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (bank,)
            ).fetchone()
            row = self._doc_row(conn, bank, document)
            if bank_row is None or row is None:
                return 0
            removed = _delete_memories(conn, bank_row[0], "document_id = %s", (row[0],))
            # Records before their document: the trigger counting them finds the bank
            # through it.
            conn.execute("DELETE FROM records WHERE document_id = %s", (row[0],))
            conn.execute("DELETE FROM documents WHERE id = %s", (row[0],))
            conn.execute(
                "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                " WHERE id = %s",
                (bank_row[0],),
            )
        return removed

    def get_cursor(self, bank: str, document: str) -> Cursor:
        with self._conn() as conn:
            row = self._doc_row(conn, bank, document)
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
        wanted = list(ids)
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.id, m.content_hash FROM memories m JOIN banks b ON b.id = m.bank_id"
                " WHERE b.name = %s AND m.id = ANY(%s)",
                (bank, wanted),
            )
            return {r[0]: r[1] for r in rows}

    def count_records(self, bank: str, document: str | None = None) -> int:
        query = (
            "SELECT count(*) FROM records r JOIN documents d ON d.id = r.document_id"
            " JOIN banks b ON b.id = d.bank_id WHERE b.name = %s"
        )
        args: tuple[str, ...] = (bank,)
        if document is not None:
            query += " AND d.name = %s"
            args = (bank, document)
        with self._conn() as conn:
            row = conn.execute(query, args).fetchone()
        return int(row[0]) if row else 0

    def record_ids(self, bank: str, document: str) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT r.record_id FROM records r JOIN documents d ON d.id = r.document_id"
                " JOIN banks b ON b.id = d.bank_id WHERE b.name = %s AND d.name = %s"
                ' ORDER BY r.record_id COLLATE "C"',
                (bank, document),
            )
            return [r[0] for r in rows]

    # -- retain ----------------------------------------------------------------------------
    def apply_retain(self, batch: RetainBatch) -> RetainOutcome:
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO banks (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                (batch.bank,),
            )
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (batch.bank,)
            ).fetchone()
            assert bank_row is not None
            bank_id = int(bank_row[0])
            row = self._doc_row(conn, batch.bank, batch.document)
            version = int(row[13]) if row is not None else 0
            if version != batch.expected_version:
                return RetainOutcome(committed=False)
            c = batch.cursor
            if row is None:
                inserted_doc = conn.execute(
                    "INSERT INTO documents (bank_id, name, created_at, updated_at, metadata,"
                    " tags, source, format, cursor_offset, cursor_open_offset, cursor_records,"
                    " cursor_fingerprint, cursor_size, cursor_version, cursor_open_line)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " RETURNING id",
                    (
                        bank_id, batch.document, now, now, _jsonb(batch.metadata or {}),
                        list(batch.tags or ()), batch.source, batch.format, c.offset,
                        c.open_offset, c.records, c.fingerprint, c.size, version + 1,
                        c.open_line,
                    ),
                ).fetchone()  # fmt: skip
                assert inserted_doc is not None
                doc_id = int(inserted_doc[0])
            else:
                doc_id = int(row[0])
                metadata = dict(row[4])
                if batch.metadata:
                    metadata.update(batch.metadata)
                tags = list(dict.fromkeys([*row[5], *(batch.tags or ())]))
                conn.execute(
                    "UPDATE documents SET updated_at = %s, metadata = %s, tags = %s,"
                    " source = coalesce(%s, source), format = coalesce(%s, format),"
                    " cursor_offset = %s, cursor_open_offset = %s, cursor_records = %s,"
                    " cursor_fingerprint = %s, cursor_size = %s, cursor_version = %s,"
                    " cursor_open_line = %s WHERE id = %s",
                    (
                        now, _jsonb(metadata), tags, batch.source, batch.format, c.offset,
                        c.open_offset, c.records, c.fingerprint, c.size, version + 1,
                        c.open_line, doc_id,
                    ),
                )  # fmt: skip
            new_records = 0
            if batch.records:
                new_records = conn.execute(
                    "INSERT INTO records (document_id, record_id)"
                    " SELECT %s, r FROM unnest(%s::text[]) AS r ON CONFLICT DO NOTHING",
                    (doc_id, list(dict.fromkeys(batch.records))),
                ).rowcount
            deleted = 0
            if batch.delete_memories:
                deleted = _delete_memories(
                    conn, bank_id, "id = ANY(%s)", (list(batch.delete_memories),)
                )
            replaced = 0
            if batch.memories:
                replaced = _delete_memories(
                    conn, bank_id, "id = ANY(%s)", ([m.id for m in batch.memories],)
                )
                _insert_memories(conn, bank_id, doc_id, batch.memories, now)
            inserted = len(batch.memories)
            if batch.memories or deleted:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1,"
                    " deletions = deletions + %s WHERE id = %s",
                    (1 if deleted else 0, bank_id),
                )
        for dim in {int(m.embedding.shape[0]) for m in batch.memories if m.embedding is not None}:
            self.ensure_vector_index(batch.bank, dim)
        return RetainOutcome(True, new_records, inserted - replaced, replaced, deleted)

    # -- memories --------------------------------------------------------------------------
    _MEMORY_COLUMNS = (
        "m.seq, m.id, d.name, m.kind, m.text, m.record_ids, m.occurred_at, m.said_at,"
        " m.speakers, m.entities, m.tags, m.content_hash, m.embedder, m.first_line,"
        " m.last_line, m.tokens"
    )

    @staticmethod
    def _memory(bank: str, row: Any) -> Memory:
        return Memory(
            id=row[1],
            bank=bank,
            document=row[2],
            kind=row[3],
            text=row[4],
            record_ids=tuple(row[5]),
            occurred_at=row[6],
            said_at=row[7],
            speakers=tuple(row[8]),
            entities=tuple(row[9]),
            tags=tuple(row[10]),
            content_hash=row[11],
            embedding=_vector(row[16]),
            embedder=row[12],
            first_line=row[13],
            last_line=row[14],
            tokens=row[15],
        )

    def get_memories(self, bank: str, ids: Sequence[str]) -> list[Memory]:
        found = {m.id: m for _seq, m in self._memories_where(bank, "m.id", list(ids))}
        return [found[i] for i in ids if i in found]

    def delete_memory(self, bank: str, memory_id: str) -> bool:
        with self._write() as conn:
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (bank,)
            ).fetchone()
            if bank_row is None:
                return False
            gone = _delete_memories(conn, bank_row[0], "id = %s", (memory_id,))
            if gone:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                    " WHERE id = %s",
                    (bank_row[0],),
                )
        return gone > 0

    def forget_before(self, bank: str, before: datetime) -> int:
        moment = before if before.tzinfo else before.replace(tzinfo=UTC)
        with self._write() as conn:
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (bank,)
            ).fetchone()
            if bank_row is None:
                return 0
            # A memory without a time has a NULL `t`, which no comparison selects: it stays.
            gone = _delete_memories(conn, bank_row[0], "t < %s", (moment,))
            if gone:
                conn.execute(
                    "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                    " WHERE id = %s",
                    (bank_row[0],),
                )
        return gone

    def iter_memories(
        self, bank: str, *, after_seq: int = 0, with_embeddings: bool = True
    ) -> Iterator[MemoryRow]:
        embedding = "m.embedding" if with_embeddings else "NULL::vector"
        # A server-side cursor streams big banks instead of loading them whole.
        with (
            self._conn() as conn,
            conn.transaction(),
            conn.cursor(name="lamina_iter_memories", binary=True) as cur,
        ):
            cur.itersize = 2000
            cur.execute(
                f"SELECT {self._MEMORY_COLUMNS}, {embedding} FROM memories m"
                " JOIN documents d ON d.id = m.document_id"
                " WHERE m.bank_id = (SELECT id FROM banks WHERE name = %s) AND m.seq > %s"
                " ORDER BY m.seq",
                (bank, after_seq),
            )
            for row in cur:
                yield MemoryRow(int(row[0]), self._memory(bank, row))

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
        with self._conn() as conn:
            bank_row = conn.execute("SELECT id FROM banks WHERE name = %s", (bank,)).fetchone()
            if bank_row is None:
                return MemoryPage([], 0, {})
            bank_id = int(bank_row[0])
            seqs, total, kinds = page_seqs(
                conn.execute, bank_id, where, limit, offset, _DIALECT,
                oldest_first=oldest_first, count_kinds=count_kinds,
            )  # fmt: skip
        found = dict(self._memories_where(bank, "m.seq", seqs, with_embeddings=False))
        return MemoryPage([found[s] for s in seqs if s in found], total, kinds)

    def set_entities(self, bank: str, entities: Mapping[str, Sequence[str]]) -> int:
        if not entities:
            return 0
        with self._write() as conn:
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (bank,)
            ).fetchone()
            if bank_row is None:
                return 0
            bank_id = int(bank_row[0])
            rows = conn.execute(
                "SELECT seq, id, entities, terms FROM memories WHERE bank_id = %s AND id = ANY(%s)",
                (bank_id, list(entities)),
            ).fetchall()
            old_df: Counter[str] = Counter()
            new_df: Counter[str] = Counter()
            postings: list[tuple[str, int, int, int]] = []
            seqs: list[int] = []
            for seq, memory_id, old, length in rows:
                seqs.append(int(seq))
                old_df.update(set(entity_terms(old)))
                counts = Counter(entity_terms(entities[memory_id]))
                new_df.update(counts.keys())
                postings.extend((term, int(seq), tf, int(length)) for term, tf in counts.items())
            if not seqs:
                return 0
            # The entity postings (their terms carry ENTITY_PREFIX) are replaced whole.
            conn.execute(
                "DELETE FROM postings WHERE bank_id = %s AND seq = ANY(%s) AND term = ANY(%s)",
                (bank_id, seqs, list(old_df)),
            )
            _count_terms(conn, bank_id, old_df, -1)
            _count_terms(conn, bank_id, new_df, 1)
            _add_postings(conn, bank_id, postings)
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE memories SET entities = %s WHERE seq = %s",
                    [(list(entities[str(r[1])]), int(r[0])) for r in rows],
                )
            conn.execute(
                "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                " WHERE id = %s",
                (bank_id,),
            )
        return len(seqs)

    def set_embeddings(self, bank: str, vectors: Mapping[str, Any], embedder: str) -> int:
        with self._write() as conn:
            bank_row = conn.execute(
                "SELECT id FROM banks WHERE name = %s FOR UPDATE", (bank,)
            ).fetchone()
            if bank_row is None:
                return 0
            changed = 0
            with conn.cursor() as cur:
                for memory_id, vector in vectors.items():
                    cur.execute(
                        "UPDATE memories SET embedding = %s, embedder = %s"
                        " WHERE bank_id = %s AND id = %s",
                        (np.asarray(vector, dtype=np.float32), embedder, bank_row[0], memory_id),
                    )
                    changed += cur.rowcount
            # Vectors changed in place: readers must rebuild their index.
            conn.execute(
                "UPDATE banks SET generation = generation + 1, deletions = deletions + 1"
                " WHERE id = %s",
                (bank_row[0],),
            )
        for dim in {int(np.asarray(v).shape[0]) for v in vectors.values()}:
            self.ensure_vector_index(bank, dim)
        return changed

    # -- corrections ------------------------------------------------------------------------
    def save_correction(self, bank: str, correction: Correction) -> None:
        with self._write() as conn:
            row = conn.execute("SELECT id FROM banks WHERE name = %s", (bank,)).fetchone()
            if row is None:
                raise StoreError(f"no bank {bank!r}")
            conn.execute(
                "INSERT INTO corrections (bank_id, memory_id, state, replacement, note,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (bank_id, memory_id) DO UPDATE SET state = excluded.state,"
                " replacement = excluded.replacement, note = excluded.note,"
                " created_at = excluded.created_at",
                (
                    row[0], correction.memory, correction.state, correction.replacement,
                    correction.note, correction.at or _now(),
                ),
            )  # fmt: skip

    def delete_correction(self, bank: str, memory_id: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM corrections c USING banks b"
                " WHERE c.bank_id = b.id AND b.name = %s AND c.memory_id = %s",
                (bank, memory_id),
            )
        return cur.rowcount > 0

    def load_corrections(
        self, bank: str, ids: Sequence[str] | None = None
    ) -> dict[str, Correction]:
        sql = (
            "SELECT c.memory_id, c.state, c.replacement, c.note, c.created_at"
            " FROM corrections c JOIN banks b ON b.id = c.bank_id WHERE b.name = %s"
        )
        params: list[Any] = [bank]
        if ids is not None:
            if not ids:
                return {}
            sql += " AND c.memory_id = ANY(%s)"
            params.append(list(ids))
        with self._conn() as conn:
            rows = conn.execute(sql + " ORDER BY c.created_at, c.memory_id", params).fetchall()
        return {r[0]: Correction(r[0], r[1], r[2], r[3], r[4]) for r in rows}

    # -- API keys and operations ------------------------------------------------------------
    def create_api_key(self, name: str, key_hash: str, banks: Sequence[str]) -> None:
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO api_keys (name, key_hash, banks, created_at)"
                    " VALUES (%s, %s, %s, %s)",
                    (name, key_hash, list(banks), _now()),
                )
        except psycopg.errors.UniqueViolation:
            raise StoreError(f"an API key named {name!r} already exists") from None

    def find_api_key(self, key_hash: str) -> tuple[str, list[str]] | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT name, banks FROM api_keys WHERE key_hash = %s", (key_hash,)
            ).fetchone()
        return None if row is None else (row[0], list(row[1]))

    def list_api_keys(self) -> list[tuple[str, list[str], str]]:
        with self._conn() as conn:
            rows = conn.execute("SELECT name, banks, created_at FROM api_keys ORDER BY name")
            return [(r[0], list(r[1]), r[2].isoformat()) for r in rows]

    def api_key_hashes(self) -> dict[str, str]:
        with self._conn() as conn:
            return dict(conn.execute("SELECT name, key_hash FROM api_keys").fetchall())

    def delete_api_key(self, name: str) -> bool:
        with self._write() as conn:
            return conn.execute("DELETE FROM api_keys WHERE name = %s", (name,)).rowcount > 0

    def count_api_keys(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT count(*) FROM api_keys").fetchone()
        return int(row[0]) if row else 0

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
                " updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE"
                " SET status = excluded.status, result = excluded.result,"
                " error = excluded.error, updated_at = excluded.updated_at",
                (op_id, kind, bank, status, None if result is None else _jsonb(result),
                 error, now, now),
            )  # fmt: skip

    def get_operation(self, op_id: str) -> dict[str, Any] | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT id, kind, bank, status, result, error, created_at, updated_at"
                " FROM operations WHERE id = %s",
                (op_id,),
            ).fetchone()
        if row is None:
            return None
        keys = ("id", "kind", "bank", "status", "result", "error", "created_at", "updated_at")
        data = dict(zip(keys, row, strict=True))
        data["created_at"] = data["created_at"].isoformat()
        data["updated_at"] = data["updated_at"].isoformat()
        return data

    # -- context logs ----------------------------------------------------------------------
    def _log_id(
        self, conn: psycopg.Connection[Any], bank: str, log: str, lock: bool = False
    ) -> int:
        row = conn.execute(
            "SELECT l.id FROM context_logs l JOIN banks b ON b.id = l.bank_id"
            " WHERE b.name = %s AND l.name = %s" + (" FOR UPDATE OF l" if lock else ""),
            (bank, log),
        ).fetchone()
        if row is None:
            raise StoreError(f"no context log {log!r} in bank {bank!r}")
        return int(row[0])

    def set_log_times(
        self, bank: str, log: str, created_at: datetime, updated_at: datetime
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE context_logs SET created_at = %s, updated_at = %s"
                " WHERE name = %s AND bank_id = (SELECT id FROM banks WHERE name = %s)",
                (created_at, updated_at, log, bank),
            )

    def append_log_messages(self, bank: str, log: str, messages: Sequence[Message]) -> int:
        now = _now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO banks (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (bank,)
            )
            conn.execute(
                "INSERT INTO context_logs (bank_id, name, created_at, updated_at)"
                " SELECT id, %s, %s, %s FROM banks WHERE name = %s"
                " ON CONFLICT (bank_id, name) DO NOTHING",
                (log, now, now, bank),
            )
            # The log's row lock orders appenders: positions follow commit order.
            log_id = self._log_id(conn, bank, log, lock=True)
            have = conn.execute(
                "SELECT message_id FROM context_messages WHERE log_id = %s"
                " AND message_id = ANY(%s::text[])",
                (log_id, [m.id for m in messages]),
            ).fetchall()
            seen = {r[0] for r in have}
            new: list[Message] = []
            for message in messages:
                if message.id not in seen:
                    seen.add(message.id)
                    new.append(message)
            if not new:
                return 0
            row = conn.execute(
                "UPDATE context_logs SET messages = messages + %s, updated_at = %s"
                " WHERE id = %s RETURNING messages",
                (len(new), now, log_id),
            ).fetchone()
            assert row is not None
            first = int(row[0]) - len(new)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO context_messages (log_id, position, message_id, body)"
                    " VALUES (%s, %s, %s, %s)",
                    [
                        (log_id, first + n, m.id, orjson.dumps(message_to_json(m)).decode())
                        for n, m in enumerate(new)
                    ],
                )
        return len(new)

    def read_log(self, bank: str, log: str, start: int = 0) -> list[Message]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.body FROM context_messages m JOIN context_logs l ON l.id = m.log_id"
                " JOIN banks b ON b.id = l.bank_id WHERE b.name = %s AND l.name = %s"
                " AND m.position >= %s ORDER BY m.position",
                (bank, log, start),
            ).fetchall()
        return [message_from_json(orjson.loads(r[0])) for r in rows]

    def list_logs(self, bank: str) -> list[ContextLogInfo]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT l.name, l.messages, l.created_at, l.updated_at,"
                " (SELECT count(*) FROM context_summaries s WHERE s.log_id = l.id)"
                " FROM context_logs l JOIN banks b ON b.id = l.bank_id WHERE b.name = %s"
                " ORDER BY l.name",
                (bank,),
            ).fetchall()
        return [ContextLogInfo(bank, r[0], int(r[1]), int(r[4]), r[2], r[3]) for r in rows]

    def delete_log(self, bank: str, log: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM context_logs l USING banks b WHERE b.id = l.bank_id"
                " AND b.name = %s AND l.name = %s",
                (bank, log),
            )
        return cur.rowcount > 0

    def save_summary(self, bank: str, log: str, summary: StoredSummary) -> bool:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            cur = conn.execute(
                "INSERT INTO context_summaries (log_id, id, level, start_position, end_position,"
                " children, text, tokens, summariser, request_hash, stop_reason, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (log_id, id) DO NOTHING",
                (
                    log_id, summary.id, summary.level, summary.start, summary.end,
                    list(summary.children), summary.text, summary.tokens, summary.summariser,
                    summary.request_hash, summary.stop_reason, _now(),
                ),
            )  # fmt: skip
        return cur.rowcount > 0

    def load_summaries(self, bank: str, log: str) -> list[StoredSummary]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT s.id, s.level, s.start_position, s.end_position, s.children, s.text,"
                " s.tokens, s.summariser, s.request_hash, s.stop_reason FROM context_summaries s"
                " JOIN context_logs l ON l.id = s.log_id JOIN banks b ON b.id = l.bank_id"
                " WHERE b.name = %s AND l.name = %s ORDER BY s.seq",
                (bank, log),
            ).fetchall()
        return [StoredSummary(r[0], r[1], int(r[2]), int(r[3]), tuple(r[4]), *r[5:]) for r in rows]

    def save_frontier(self, bank: str, log: str, frontier: Mapping[str, JSONValue]) -> None:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            conn.execute(
                "UPDATE context_logs SET frontier = %s WHERE id = %s", (_jsonb(frontier), log_id)
            )

    def load_frontier(self, bank: str, log: str) -> dict[str, JSONValue] | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT l.frontier FROM context_logs l JOIN banks b ON b.id = l.bank_id"
                " WHERE b.name = %s AND l.name = %s",
                (bank, log),
            ).fetchone()
        if row is None or row[0] is None:
            return None
        value: dict[str, JSONValue] = row[0]
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
            try:
                log_id = self._log_id(conn, bank, log)
            except StoreError:
                return
            conn.execute(
                "INSERT INTO context_counts (log_id, key, position, tokens, shown, uncut)"
                " SELECT %s, %s, %s + n - 1, t, s, u"
                " FROM unnest(%s::int[], %s::int[], %s::int[]) WITH ORDINALITY AS c(t, s, u, n)"
                " ON CONFLICT DO NOTHING",
                (
                    log_id, key, start,
                    [c[0] for c in counts], [c[1] for c in counts], [c[2] for c in counts],
                ),
            )  # fmt: skip

    def load_log_counts(self, bank: str, log: str, key: str) -> list[tuple[int, int, int]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.position, c.tokens, c.shown, c.uncut FROM context_counts c"
                " JOIN context_logs l ON l.id = c.log_id JOIN banks b ON b.id = l.bank_id"
                " WHERE b.name = %s AND l.name = %s AND c.key = %s ORDER BY c.position",
                (bank, log, key),
            ).fetchall()
        return contiguous_counts(rows)

    def save_pin(self, bank: str, log: str, pin: StoredPin) -> None:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log, lock=True)
            conn.execute(
                "INSERT INTO context_pins (log_id, name, seq, mode, level, start_position,"
                " end_position, document, created_at) VALUES (%s, %s,"
                " (SELECT coalesce(max(seq), 0) + 1 FROM context_pins WHERE log_id = %s),"
                " %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (log_id, name) DO UPDATE SET mode = excluded.mode,"
                " level = excluded.level, start_position = excluded.start_position,"
                " end_position = excluded.end_position, document = excluded.document,"
                " created_at = excluded.created_at",
                (
                    log_id, pin.name, log_id, pin.mode, pin.level, pin.start, pin.end,
                    pin.document, _now(),
                ),
            )  # fmt: skip

    def delete_pin(self, bank: str, log: str, name: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM context_pins p USING context_logs l, banks b"
                " WHERE p.log_id = l.id AND l.bank_id = b.id"
                " AND b.name = %s AND l.name = %s AND p.name = %s",
                (bank, log, name),
            )
        return cur.rowcount > 0

    def load_pins(self, bank: str, log: str) -> list[StoredPin]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT p.name, p.mode, p.level, p.start_position, p.end_position, p.document"
                " FROM context_pins p JOIN context_logs l ON l.id = p.log_id"
                " JOIN banks b ON b.id = l.bank_id WHERE b.name = %s AND l.name = %s"
                " ORDER BY p.seq",
                (bank, log),
            ).fetchall()
        return [StoredPin(*r) for r in rows]

    def record_spend(
        self, summariser: str, at: datetime, input_tokens: int, output_tokens: int
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO llm_spend (summariser, at, input_tokens, output_tokens)"
                " VALUES (%s, %s, %s, %s)",
                (summariser, at, input_tokens, output_tokens),
            )
            conn.execute("DELETE FROM llm_spend WHERE at < %s", (at - SPEND_KEPT,))

    def spent_since(self, summariser: str, since: datetime) -> int:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM llm_spend"
                " WHERE summariser = %s AND at >= %s",
                (summariser, since),
            ).fetchone()
        return int(row[0]) if row else 0

    # -- maintenance -----------------------------------------------------------------------
    def size_bytes(self) -> int | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'r' AND n.nspname = current_schema()"
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def schema(self) -> list[str]:
        """Tables, columns and indexes, normalised, for the pin test."""
        with self._conn() as conn:
            columns = conn.execute(
                "SELECT table_name, column_name, data_type, udt_name, is_nullable"
                " FROM information_schema.columns WHERE table_schema = current_schema()"
                " ORDER BY table_name, ordinal_position"
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                " ORDER BY indexname"
            ).fetchall()
        return [" ".join(str(v) for v in c) for c in columns] + [i[0] for i in indexes]


def _delete_memories(
    conn: psycopg.Connection[Any], bank_id: int, condition: str, params: tuple[Any, ...]
) -> int:
    """Delete the bank's memories matching `condition` (SQL on `memories`), keeping the BM25
    statistics right: document frequencies and the bank's live count and total length."""
    gone = conn.execute(
        f"SELECT seq, terms FROM memories WHERE bank_id = %s AND {condition}",
        (bank_id, *params),
    ).fetchall()
    if not gone:
        return 0
    seqs = [int(r[0]) for r in gone]
    # Packs holding one of these postings are out of date: dropped, rebuilt on demand.
    conn.execute(
        "DELETE FROM posting_packs k WHERE k.bank_id = %s AND k.term IN (SELECT p.term"
        " FROM postings p WHERE p.bank_id = %s AND p.seq = ANY(%s) AND p.seq <= k.upto_seq)",
        (bank_id, bank_id, seqs),
    )
    conn.execute(
        "UPDATE term_counts c SET df = c.df - g.n FROM (SELECT term, count(*) AS n"
        " FROM postings WHERE bank_id = %s AND seq = ANY(%s) GROUP BY term) g"
        " WHERE c.bank_id = %s AND c.term = g.term",
        (bank_id, seqs, bank_id),
    )
    conn.execute(
        "UPDATE banks SET live_memories = live_memories - %s, total_terms = total_terms - %s"
        " WHERE id = %s",
        (len(seqs), sum(int(r[1]) for r in gone), bank_id),
    )
    # Postings go with their memory (ON DELETE CASCADE).
    return conn.execute("DELETE FROM memories WHERE seq = ANY(%s)", (seqs,)).rowcount


def _insert_memories(
    conn: psycopg.Connection[Any],
    bank_id: int,
    doc_id: int,
    memories: Sequence[Memory],
    now: datetime,
) -> None:
    """Insert memories with their postings, and count them into the BM25 statistics.

    Sequence numbers are taken here, under the bank's lock, so they follow commit order."""
    seqs = [
        int(r[0])
        for r in conn.execute(
            "SELECT nextval(pg_get_serial_sequence('memories', 'seq')) FROM generate_series(1, %s)",
            (len(memories),),
        )
    ]
    df: Counter[str] = Counter()
    total = 0
    rows: list[tuple[Any, ...]] = []
    postings: list[tuple[str, int, int, int]] = []
    for seq, memory in zip(seqs, memories, strict=True):
        length, counts = term_counts(memory.text, entity_terms(memory.entities))
        total += length
        df.update(counts.keys())
        postings.extend((term, seq, tf, length) for term, tf in counts.items())
        tokens = memory.tokens if memory.tokens is not None else count_text(memory.text)
        rows.append((seq, *_memory_params(memory, bank_id, doc_id, now), length, tokens))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memories (seq, id, bank_id, document_id, kind, text, record_ids,"
            " occurred_at, said_at, speakers, entities, tags, content_hash, embedding, embedder,"
            " first_line, last_line, created_at, terms, tokens) VALUES (%s, %s, %s, %s, %s, %s,"
            " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    _add_postings(conn, bank_id, postings)
    _count_terms(conn, bank_id, df, 1)
    conn.execute(
        "UPDATE banks SET live_memories = live_memories + %s, total_terms = total_terms + %s"
        " WHERE id = %s",
        (len(memories), total, bank_id),
    )


def _add_postings(
    conn: psycopg.Connection[Any], bank_id: int, postings: Sequence[tuple[str, int, int, int]]
) -> None:
    """Write (term, seq, tf, terms) postings of the bank (dropping the packs of their terms
    that they would fall inside: a new memory's seq is above every pack's)."""
    if not postings:
        return
    conn.execute(
        "DELETE FROM posting_packs WHERE bank_id = %s AND term = ANY(%s) AND upto_seq >= %s",
        (bank_id, sorted({p[0] for p in postings}), min(p[1] for p in postings)),
    )
    with (
        conn.cursor() as cur,
        cur.copy("COPY postings (bank_id, term, seq, tf, terms) FROM STDIN") as copy,
    ):
        for term, seq, tf, length in postings:
            copy.write_row((bank_id, term, seq, tf, length))


def _count_terms(
    conn: psycopg.Connection[Any], bank_id: int, counts: Counter[str], sign: int
) -> None:
    """Add (sign 1) or take away (sign -1) memories holding each term from its df."""
    if not counts:
        return
    terms = list(counts)
    if sign < 0:  # postings of these terms went: their packs are out of date
        conn.execute(
            "DELETE FROM posting_packs WHERE bank_id = %s AND term = ANY(%s)", (bank_id, terms)
        )
    conn.execute(
        "INSERT INTO term_counts (bank_id, term, df) SELECT %s, t, n"
        " FROM unnest(%s::text[], %s::bigint[]) AS u(t, n)"
        " ON CONFLICT (bank_id, term) DO UPDATE SET df = term_counts.df + excluded.df",
        (bank_id, terms, [sign * counts[t] for t in terms]),
    )


def _memory_params(memory: Memory, bank_id: int, doc_id: int, now: datetime) -> tuple[Any, ...]:
    vector = memory.embedding
    return (
        memory.id,
        bank_id,
        doc_id,
        memory.kind,
        memory.text,
        list(memory.record_ids),
        memory.occurred_at,
        memory.said_at,
        list(memory.speakers),
        list(memory.entities),
        list(memory.tags),
        memory.content_hash,
        None if vector is None else np.asarray(vector, dtype=np.float32),
        memory.embedder if vector is not None else None,
        memory.first_line,
        memory.last_line,
        now,
    )
