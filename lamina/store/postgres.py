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

What the store does is written once for both databases (lamina.store.documents, memories,
logs, keys, operations); this module connects and pools, migrates, spells values and lists
the PostgreSQL way (`PostgresDialect`), and writes memories with their postings and BM25
statistics.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt

from ..errors import StoreError
from ..memories import Memory
from ..text.entities import ENTITY_PREFIX, entity_terms
from ..text.lexical import term_counts
from ..tokens import count_text
from . import postgres_blocks as blocks
from . import rows
from .dialect import Columns, Dialect, Rows, cached
from .documents import SQLDocuments
from .keys import SQLKeys
from .logs import SQLLogs
from .memories import SQLMemories
from .operations import SQLOperations
from .packs import Raw, concatenated
from .postgres_migrations import MIGRATIONS
from .postgres_search import PostgresSearch
from .rows import MEMORY_INSERT, memory_params
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

__all__ = ["PostgresDialect", "PostgresStore"]

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
        names = {str(name) for (name,) in conn.execute("SELECT name FROM schema_migrations")}
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


_placeholders = cached(lambda text: text.replace("%", "%%").replace("?", "%s"))
"""Shared SQL (`?` placeholders) as psycopg reads it."""


def _same(value: Any) -> Any:
    return value


def _list(values: Sequence[Any]) -> list[Any]:
    return list(values)


def _float32(value: Any) -> npt.NDArray[np.float32]:
    return np.asarray(value, dtype=np.float32)


def _vector(value: Any) -> npt.NDArray[np.float32] | None:
    return None if value is None else _float32(value)


def _aware(value: datetime) -> datetime:
    """A time without a zone is taken as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class PostgresDialect(Dialect):
    """PostgreSQL's spelling: jsonb, native arrays and timestamptz, pgvector vectors, lists
    passed as arrays (`= ANY(...)`), `%s` placeholders."""

    mark = "%s"
    for_update = " FOR UPDATE"
    null_vector = "NULL::vector"
    unique_violation = psycopg.errors.UniqueViolation
    has_tag = "? = ANY(m.tags)"
    has_ascii_word = "strpos(lower(m.text), ?) > 0"  # strpos() takes it literally
    has_word = "m.text ~ ?"  # lower() folds ASCII only under the C locale
    newest_first = "m.t DESC NULLS LAST, m.seq"
    oldest_first = "m.t ASC NULLS FIRST, m.seq DESC"
    bank_with_document = "m.bank_id = ?"

    def sql(self, text: str) -> str:
        return _placeholders(text)

    def execute(
        self, conn: Any, sql: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> Any:
        return conn.execute(self.sql(sql), params, binary=binary)

    def executemany(self, conn: Any, sql: str, rows: Rows) -> int:
        with conn.cursor() as cur:
            cur.executemany(self.sql(sql), rows)
            return int(cur.rowcount)

    def insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        return int(conn.execute(self.sql(sql + " RETURNING id"), params).fetchone()[0])

    def insert_new(self, conn: Any, table: str, columns: Columns, rows: Rows) -> int:
        if not rows:
            return 0
        names = ", ".join(name for name, _type in columns)
        arrays = ", ".join(f"%s::{kind}[]" for _name, kind in columns)
        return int(
            conn.execute(
                f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
                " ON CONFLICT DO NOTHING",
                [list(values) for values in zip(*rows, strict=True)],
            ).rowcount
        )

    def any_of(self, column: str) -> str:
        return f"{column} = ANY(?)"

    json_in = staticmethod(_jsonb)
    json_out = array_out = time_in = time_out = staticmethod(_same)
    array_in = list_in = staticmethod(_list)
    bound_in = staticmethod(_aware)
    vector_in = staticmethod(_float32)
    vector_out = staticmethod(_vector)
    word_param = staticmethod(_either_case)


POSTGRES = PostgresDialect()


class PostgresStore(PostgresSearch, SQLDocuments, SQLMemories, SQLLogs, SQLKeys, SQLOperations):
    """A `Store` on a PostgreSQL database with the pgvector extension."""

    dialect: ClassVar[Dialect] = POSTGRES

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

    def _read(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._conn()

    def _stream(self, sql: str, params: Sequence[Any]) -> Iterator[Sequence[Any]]:
        # A server-side cursor streams big banks instead of loading them whole.
        with (
            self._conn() as conn,
            conn.transaction(),
            conn.cursor(name="lamina_iter_memories", binary=True) as cur,
        ):
            cur.itersize = 2000
            cur.execute(POSTGRES.sql(sql), params)
            yield from cur

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
            done = {name for (name,) in conn.execute("SELECT name FROM schema_migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                try:
                    if callable(sql):
                        sql(conn)
                    else:
                        conn.execute(sql.encode())
                except psycopg.Error as exc:
                    raise StoreError(
                        f"{describe_target(self.url)}: migration {name} failed ({exc})"
                    ) from None
                conn.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)",
                    (name, datetime.now(UTC)),
                )
                applied.append(name)
        return applied

    def applied_migrations(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    # -- memories with their postings and BM25 statistics -----------------------------------
    @staticmethod
    def _memory(bank: str, row: Sequence[Any]) -> Memory:
        """A memory from a row of `_MEMORY_COLUMNS` and its vector (for postgres_search)."""
        return rows.memory(bank, row, POSTGRES)

    def _delete_memories(
        self, conn: Any, bank_id: int, condition: str, params: Sequence[Any]
    ) -> int:
        return _delete_memories(conn, bank_id, POSTGRES.sql(condition), tuple(params))

    def _write_memories(
        self, conn: Any, bank_id: int, doc_id: int, memories: Sequence[Memory], now: Any
    ) -> tuple[int, set[str]]:
        replaced = _delete_memories(conn, bank_id, "id = ANY(%s)", ([m.id for m in memories],))
        _insert_memories(conn, bank_id, doc_id, memories, now)
        return replaced, set()

    def _retained(self, bank: str, bank_id: int, batch: Any, terms: set[str]) -> None:
        self._embedded(bank, {m.id: m.embedding for m in batch.memories if m.embedding is not None})

    def _embedded(self, bank: str, vectors: Mapping[str, Any]) -> None:
        for dim in {int(np.asarray(v).shape[0]) for v in vectors.values()}:
            self.ensure_vector_index(bank, dim)

    def set_entities(self, bank: str, entities: Mapping[str, Sequence[str]]) -> int:
        if not entities:
            return 0
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank, lock=True)
            if bank_id is None:
                return 0
            found = conn.execute(
                "SELECT seq, id, entities, terms FROM memories WHERE bank_id = %s AND id = ANY(%s)",
                (bank_id, list(entities)),
            ).fetchall()
            gone: dict[str, list[int]] = {}
            new_df: Counter[str] = Counter()
            postings: list[tuple[str, int, int, int]] = []
            seqs: list[int] = []
            for seq, memory_id, old, length in found:
                seqs.append(int(seq))
                for term in set(entity_terms(old)):
                    gone.setdefault(term, []).append(int(seq))
                counts = Counter(entity_terms(entities[memory_id]))
                new_df.update(counts.keys())
                postings.extend((term, int(seq), tf, int(length)) for term, tf in counts.items())
            if not seqs:
                return 0
            # The entity postings (their terms carry ENTITY_PREFIX) are replaced whole.
            removed = blocks.remove(
                conn, bank_id, {t: np.array(sorted(s), dtype=np.int64) for t, s in gone.items()}
            )
            blocks.add(conn, bank_id, _lists(postings))
            _count_terms(conn, bank_id, Counter({t: len(r[0]) for t, r in removed.items()}), -1)
            _count_terms(conn, bank_id, new_df, 1)
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE memories SET entities = %s WHERE seq = %s",
                    [(list(entities[str(memory_id)]), int(seq)) for seq, memory_id, _, _ in found],
                )
            self._bump(conn, bank_id, deleted=True)
        return len(seqs)

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
    """Delete the bank's memories matching `condition` (SQL on `memories`) with their
    postings, keeping the BM25 statistics right: document frequencies and the bank's live
    count and total length.

    A memory's postings are found through the terms of its text and entities, counted again
    as retain counted them; should they not all be found as written (the tokenizer changed
    since), every block of the memories' seq range is read instead, so none is left."""
    gone = conn.execute(
        f"SELECT seq, terms, text, entities FROM memories WHERE bank_id = %s AND {condition}",
        (bank_id, *params),
    ).fetchall()
    if not gone:
        return 0
    seqs = sorted(int(row[0]) for row in gone)
    held: dict[str, list[int]] = {}
    lengths: dict[int, int] = {}
    for seq, length, text, entities in gone:
        lengths[int(seq)] = int(length)
        for term in term_counts(text, entity_terms(entities))[1]:
            held.setdefault(term, []).append(int(seq))
    removed = blocks.remove(
        conn, bank_id, {t: np.array(sorted(s), dtype=np.int64) for t, s in held.items()}
    )
    if not _as_written(removed, held, lengths):
        rest = blocks.remove_everywhere(conn, bank_id, np.array(seqs, dtype=np.int64))
        for term, raw in rest.items():
            removed[term] = concatenated([removed[term], raw]) if term in removed else raw
    _count_terms(conn, bank_id, Counter({t: len(r[0]) for t, r in removed.items()}), -1)
    conn.execute(
        "UPDATE banks SET live_memories = live_memories - %s, total_terms = total_terms - %s"
        " WHERE id = %s",
        (len(seqs), sum(lengths.values()), bank_id),
    )
    return conn.execute("DELETE FROM memories WHERE seq = ANY(%s)", (seqs,)).rowcount


def _as_written(
    removed: Mapping[str, Raw], wanted: Mapping[str, Sequence[int]], lengths: Mapping[int, int]
) -> bool:
    """Whether the postings taken out are every one asked for, and the text terms' counts of
    each memory add up to the length it was stored with."""
    if sum(len(r[0]) for r in removed.values()) != sum(len(s) for s in wanted.values()):
        return False
    total: Counter[int] = Counter()
    for term, (seqs, tfs, _lengths) in removed.items():
        if not term.startswith(ENTITY_PREFIX):
            for seq, tf in zip(seqs.tolist(), tfs.tolist(), strict=True):
                total[seq] += tf
    return all(total[seq] == length for seq, length in lengths.items())


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
    values: list[tuple[Any, ...]] = []
    postings: list[tuple[str, int, int, int]] = []
    for seq, memory in zip(seqs, memories, strict=True):
        length, counts = term_counts(memory.text, entity_terms(memory.entities))
        total += length
        df.update(counts.keys())
        postings.extend((term, seq, tf, length) for term, tf in counts.items())
        tokens = memory.tokens if memory.tokens is not None else count_text(memory.text)
        values.append((seq, *memory_params(memory, bank_id, doc_id, now, POSTGRES), length, tokens))
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO memories (seq, {MEMORY_INSERT}, terms, tokens) VALUES (%s, %s, %s, %s,"
            " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            values,
        )
    blocks.add(conn, bank_id, _lists(postings))
    _count_terms(conn, bank_id, df, 1)
    conn.execute(
        "UPDATE banks SET live_memories = live_memories + %s, total_terms = total_terms + %s"
        " WHERE id = %s",
        (len(memories), total, bank_id),
    )


def _lists(postings: Sequence[tuple[str, int, int, int]]) -> dict[str, Raw]:
    """(term, seq, tf, length) postings as each term's arrays."""
    grouped: dict[str, list[tuple[int, int, int]]] = {}
    for term, seq, tf, length in postings:
        grouped.setdefault(term, []).append((seq, tf, length))
    out: dict[str, Raw] = {}
    for term, found in grouped.items():
        table = np.array(found, dtype=np.int64).reshape(-1, 3)
        out[term] = (table[:, 0], table[:, 1].astype(np.int32), table[:, 2].astype(np.int32))
    return out


def _count_terms(
    conn: psycopg.Connection[Any], bank_id: int, counts: Counter[str], sign: int
) -> None:
    """Add (sign 1) or take away (sign -1) memories holding each term from its df, and give
    each term a new version, newer than its blocks (called after they are written)."""
    if not counts:
        return
    terms = list(counts)
    counted = conn.execute(
        "INSERT INTO term_counts (bank_id, term, df, version)"
        " SELECT %s, t, n, nextval('posting_block_versions')"
        " FROM unnest(%s::text[], %s::bigint[]) AS u(t, n)"
        " ON CONFLICT (bank_id, term) DO UPDATE SET df = term_counts.df + excluded.df,"
        " version = excluded.version" + (" RETURNING term, df" if sign < 0 else ""),
        (bank_id, terms, [sign * counts[t] for t in terms]),
    )
    if sign < 0:
        # A term no memory holds any more leaves no row behind (a later one starts a new
        # row, with a newer version than any list held of it).
        gone = [str(term) for term, df in counted.fetchall() if int(df) <= 0]
        if gone:
            conn.execute(
                "DELETE FROM term_counts WHERE bank_id = %s AND term = ANY(%s) AND df <= 0",
                (bank_id, gone),
            )
