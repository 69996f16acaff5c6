"""Recall's searches run inside PostgreSQL (see lamina.store.search for the contract).

Lexical: BM25 over the per-term posting blocks (lamina.store.postgres_blocks) with the
in-process index's formula, computed here from the lists lamina.store.postgres_postings
reads. Two ways to the exact top k:

- When every query term's list is in memory or cheap to read, all of them are read whole
  and summed on one array over the bank's seq range; the commonest terms are only looked
  up for the memories they could still lift into the top k (see `PostgresPostings.top`).
- Otherwise ("proving"), terms are taken rarest first, and a term is only used to *find*
  candidates while the memories it alone could bring in might still beat the current k-th
  score (the "MaxScore" bound: a term adds at most weight * (k1 + 1)); the other terms are
  looked up for the candidates only. Its work is bounded by `lexical_search_budget` (exact
  below it).

Dense: the dot product with the query (pgvector's `<#>`). Banks (or filtered subsets) of up to
EXACT_LIMIT memories are scanned exactly; a larger bank gets its own HNSW index (a partial
index per bank and vector size, built when the bank passes EXACT_LIMIT), searched with
iterative scans so filters still return `depth` results.
"""

from __future__ import annotations

import shutil
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from ..memories import Memory
from ..text.lexical import idf
from .packs import PackCache
from .postgres_postings import (
    IN_MEMORY_COST,
    PACK_MIN,
    PROBE_COST,
    SHORTLIST,
    Held,
    PostgresPostings,
    pack_cache,
    positive,
)
from .ranking import BM25_K1, best
from .search import DatabaseSearch, Dated, FilterSQL, SearchFilter, rows_dated

__all__ = [
    "EXACT_LIMIT",
    "IndexBuild",
    "PackCache",
    "PostgresSearch",
    "index_build_need",
    "pack_cache",
    "plan_index_build",
]

EXACT_LIMIT = 5_000
"""Up to this many candidate memories, dense search scans them exactly."""
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
HNSW_EF_SEARCH = 200
"""The least `hnsw.ef_search` a search gets (its depth when deeper). On the latency bench's
300,000-memory bank (tools/hnsw_recall.py, 60 questions), recall@10 against an exact scan was
0.925 at 100, 0.973 at 200, 0.98 at 300; recall asks for 200 memories, so this only raises
smaller searches to what recall's top 10 already gets."""
BUILD_MEMORY_CAP = 4 << 30
"""The most a bulk load asks for to build one HNSW index in memory; a larger index is built
spilling to disk (slower, and never more memory than this)."""
BUILD_MEMORY_MIN = 64 << 20
"""The least a bulk load gives an HNSW build (PostgreSQL's own default)."""


def index_build_need(vectors: int, dim: int) -> int:
    """Bytes of `maintenance_work_mem` that build the HNSW index of `vectors` vectors of `dim`
    dimensions in memory: the vectors (4 bytes a dimension) and their graph (2 * m
    neighbours of about 8 bytes each at the lowest layer, and headers), plus a quarter for the
    build's own bookkeeping. Measured here: 1M vectors of 384 dimensions make a 2.05 GB index,
    which the 1 GB `lamina copy` used to ask for built spilling."""
    return int(vectors * (dim * 4 + 2 * HNSW_M * 8 + 128) * 1.25)


@dataclass(frozen=True)
class IndexBuild:
    """The memory a bulk load gives one HNSW build, and what decided it."""

    vectors: int
    dim: int
    needed: int
    """Bytes the build needs to run in memory (`index_build_need`)."""
    chosen: int
    """Bytes asked for (`maintenance_work_mem`)."""
    bound: str
    """What decided `chosen`: the need itself, or the limit that held it lower."""

    @property
    def setting(self) -> str:
        return f"{self.chosen >> 20}MB"

    def as_dict(self) -> dict[str, Any]:
        return {
            "vectors": self.vectors,
            "dim": self.dim,
            "needed_mb": self.needed >> 20,
            "maintenance_work_mem": self.setting,
            "bound": self.bound,
        }

    def describe(self) -> str:
        return (
            f"building the HNSW index of {self.vectors:,} vectors of {self.dim} dimensions"
            f" with maintenance_work_mem {self.setting} ({self.bound})"
        )


def plan_index_build(vectors: int, dim: int, limits: Sequence[tuple[int, str]] = ()) -> IndexBuild:
    """What to give the build: its need, at least BUILD_MEMORY_MIN, at most BUILD_MEMORY_CAP
    and each of `limits` (bytes, why)."""
    needed = index_build_need(vectors, dim)
    chosen, bound = needed, f"what the index needs, {needed >> 20} MB"
    for limit, why in [(BUILD_MEMORY_CAP, "Lamina's cap for one build"), *limits]:
        if limit < chosen:
            chosen, bound = limit, f"{needed >> 20} MB needed; bounded by {why}"
    if chosen < BUILD_MEMORY_MIN:
        chosen, bound = BUILD_MEMORY_MIN, f"the least a build is given; {needed >> 20} MB needed"
    return IndexBuild(vectors, dim, needed, chosen, bound)


def build_memory_limits(conn: psycopg.Connection[Any]) -> list[tuple[int, str]]:
    """What bounds an HNSW build's memory besides Lamina's cap: the most the server accepts
    for `maintenance_work_mem` and, when the server runs on this machine, half of the memory
    available here and, for a parallel build in POSIX shared memory, what /dev/shm has free
    (a larger request fails). A remote server's memory cannot be read from here."""
    rows = conn.execute(
        "SELECT name, setting, max_val FROM pg_settings WHERE name IN"
        " ('maintenance_work_mem', 'dynamic_shared_memory_type')"
    ).fetchall()
    settings = {str(name): (str(value), most) for name, value, most in rows}
    limits: list[tuple[int, str]] = []
    most = settings.get("maintenance_work_mem", ("", None))[1]
    if most is not None:
        limits.append((int(most) << 10, "the server's maximum maintenance_work_mem"))
    host = conn.info.host
    if host.startswith("/") or host in ("localhost", "127.0.0.1", "::1"):
        available = _available_memory()
        if available:
            limits.append((available // 2, "half of this machine's available memory"))
        free = _shared_memory_free()
        if free and settings.get("dynamic_shared_memory_type", ("",))[0] == "posix":
            limits.append((free * 9 // 10, "the shared memory free in /dev/shm"))
    return limits


def _shared_memory_free() -> int:
    """Bytes free in /dev/shm, where a parallel build's graph goes (POSIX shared memory)."""
    try:
        return shutil.disk_usage("/dev/shm").free
    except OSError:
        return 0


def _available_memory() -> int:
    """Bytes of memory this machine has available (MemAvailable), 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


RECENT_SECONDS = 2.0
"""For this long, lexical_scores may reuse the lists its thread's last search read whole."""
EXCLUDED_MAX = 50_000
"""A filter that only leaves documents out (the current session, say) is applied by taking
their memories out of what is read, packs included, while they are at most this many; a
filter excluding more, or selecting, is applied in SQL, row by row."""


def _same(value: datetime) -> datetime:
    return value


_FILTER = FilterSQL(
    mark="%s",
    among="{} = ANY(%s)",
    tagged="m.tags && %s::text[]",
    values=list,
    time=_same,
)


_HNSW_SETTINGS: weakref.WeakKeyDictionary[psycopg.Connection[Any], int] = (
    weakref.WeakKeyDictionary()
)
"""The hnsw.ef_search each pooled connection was given."""


class PostgresSearch(DatabaseSearch):
    """Mixed into PostgresStore: the `SearchStore` methods."""

    search_in_database: bool = True

    # Provided by PostgresStore.
    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    @staticmethod
    def _memory(bank: str, row: Any) -> Memory:
        raise NotImplementedError

    _MEMORY_COLUMNS: str

    def searchable(self, bank: str) -> bool:
        return self.search_in_database

    # -- filters ---------------------------------------------------------------------------
    def _bank(self, conn: psycopg.Connection[Any], bank: str) -> tuple[int, int, int] | None:
        row = conn.execute(
            "SELECT id, live_memories, total_terms FROM banks WHERE name = %s", (bank,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

    @staticmethod
    def _excluded(
        conn: psycopg.Connection[Any], bank_id: int, where: SearchFilter
    ) -> npt.NDArray[np.int64] | None:
        """The sorted seqs a filter leaves out, when it only excludes documents and they hold
        at most EXCLUDED_MAX memories (read through the documents' index); else None."""
        if not where.exclude or not replace(where, exclude={}).empty:
            return None
        parts: list[str] = []
        params: list[Any] = []
        for document, cutoff in sorted(where.exclude.items()):
            # The filter's condition, the other way round.
            condition, extra = _FILTER.said_since(cutoff)
            parts.append(
                "SELECT m.seq FROM memories m WHERE m.document_id ="
                f" (SELECT id FROM documents WHERE bank_id = %s AND name = %s){condition}"
            )
            params += [bank_id, document, *extra]
        row = conn.execute(
            "SELECT count(*), string_agg(int8send(seq), '' ORDER BY seq)"
            f" FROM ({' UNION ALL '.join(parts)} LIMIT %s) x",
            [*params, EXCLUDED_MAX + 1],
            binary=True,
        ).fetchone()
        if row is None or int(row[0]) > EXCLUDED_MAX:
            return None
        return np.frombuffer(row[1] or b"", dtype=">i8").astype(np.int64)

    def count_memories(self, bank: str, where: SearchFilter) -> int:
        """Live memories that pass the filter."""
        with self._conn() as conn:
            info = self._bank(conn, bank)
            if info is None:
                return 0
            if where.empty:
                return info[1]
            excluded = self._excluded(conn, info[0], where)
            if excluded is not None:
                return info[1] - len(excluded)
            sql, params = _FILTER.conditions(info[0], where)
            row = conn.execute(
                f"SELECT count(*) FROM memories m WHERE m.bank_id = %s AND {sql}",
                [info[0], *params],
            ).fetchone()
        return int(row[0]) if row else 0

    def term_counts(self, bank: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """See SearchStore.term_counts."""
        with self._conn() as conn:
            found = self._bank_terms(conn, bank, terms)
        return (0, {}) if found is None else (found[0][1], found[1])

    @staticmethod
    def _bank_terms(
        conn: psycopg.Connection[Any], bank: str, terms: Sequence[str]
    ) -> tuple[tuple[int, int, int], dict[str, int]] | None:
        """The bank's (id, live memories, total terms) and the document frequency of each
        of `terms` it holds, in one query."""
        rows = conn.execute(
            "SELECT b.id, b.live_memories, b.total_terms, c.term, c.df FROM banks b"
            " LEFT JOIN term_counts c ON c.bank_id = b.id AND c.term = ANY(%s) AND c.df > 0"
            " WHERE b.name = %s",
            (sorted(set(terms)), bank),
        ).fetchall()
        if not rows:
            return None
        info = (int(rows[0][0]), int(rows[0][1]), int(rows[0][2]))
        return info, {str(r[3]): int(r[4]) for r in rows if r[3] is not None}

    # -- lexical ---------------------------------------------------------------------------
    @staticmethod
    def _weights(n: int, terms: Sequence[str], df: dict[str, int]) -> dict[str, float]:
        """The BM25 weight (query count x idf) of each query term the bank holds."""
        counts = Counter(terms)
        return {t: counts[t] * idf(n, d) for t, d in df.items() if t in counts}

    def lexical_search(
        self, bank: str, terms: Sequence[str], depth: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        with self._conn() as conn:
            stats = self._bank_terms(conn, bank, terms) if terms and depth > 0 else None
            if stats is None or stats[0][1] == 0:
                return []
            (bank_id, n, total), df = stats
            avgdl = total / n if total else 1.0
            weights = self._weights(n, terms, df)
            if not weights:
                return []
            order = sorted(weights, key=lambda t: (-weights[t], t))
            bound = {t: weights[t] * (BM25_K1 + 1) for t in order}
            # A filter that only excludes a few documents: their memories are taken out of
            # what is read, so common terms' lists held in memory still serve.
            excluded = self._excluded(conn, bank_id, where)
            filter_sql, filter_params = (
                ("", []) if excluded is not None else _FILTER.conditions(bank_id, where)
            )
            lists = PostgresPostings(
                conn, bank_id, avgdl, weights, filter_sql, filter_params, df,
                self.lexical_pack_min, excluded, self._pack_cache(),
            )  # fmt: skip
            # Find candidates with the rarest terms, enough of them to fill `depth` twice over.
            k, seen = 1, df[order[0]]
            while k < len(order) and seen < 2 * depth:
                seen += df[order[k]]
                k += 1
            if sum(lists.read_cost(t) for t in order) <= IN_MEMORY_COST:
                lists.read(order)
                if not filter_sql:
                    self._recent().search = (bank, tuple(terms), time.monotonic(), lists)
                return lists.top(order, order[:k], depth, bound)
            shortlist = SHORTLIST * depth
            budget = self.lexical_search_budget
            while True:
                finding, adding = order[:k], order[k:]
                lists.read(finding)
                seqs, scores = lists.union(finding)
                # Only the best `shortlist` by their finding terms are scored in full: one left
                # out can gain at most reach = sum(bound[adding]) on the best one left out.
                left_out = -np.inf
                if adding and len(seqs) > shortlist:
                    head = best(seqs, scores, shortlist + 1)
                    left_out = float(scores[head[shortlist]])
                    keep = np.sort(head[:shortlist])
                    seqs, scores = seqs[keep], scores[keep]
                # Read whole where that is cheaper than looking up each candidate.
                lists.read([t for t in adding if lists.read_cost(t) <= PROBE_COST * len(seqs)])
                scores = lists.added(adding, seqs, scores)
                top = best(seqs, scores, depth)
                ranked = [(int(seqs[i]), float(scores[i])) for i in top]
                kth = ranked[-1][1] if len(ranked) >= depth else 0.0
                reach = sum(bound[t] for t in adding)
                if reach <= kth and left_out + reach <= kth:
                    return ranked  # exact: nothing outside can reach the k-th score
                if reach <= kth:
                    # Everything that matters holds a finding term: score more of them.
                    shortlist *= SHORTLIST
                    more = sum(min(lists.read_cost(t), PROBE_COST * shortlist) for t in adding)
                    if budget is not None and lists.cost + more > budget:
                        return ranked  # approximate: see lexical_search_budget
                    continue
                # A memory holding none of the finding terms scores below `reach`. Widening
                # only raises the k-th score, so jump to the first split this one proves.
                wider = k
                while wider < len(order) and sum(bound[t] for t in order[wider:]) > kth:
                    wider += 1
                more = sum(lists.read_cost(t) for t in order[k:wider])
                if budget is not None and lists.cost + more > budget:
                    return ranked  # approximate: see lexical_search_budget
                k = wider

    lexical_search_budget: int | None = 150_000
    """Lexical search stops widening once its work (postings read, lookups counted
    PROBE_COST each) would pass this, and returns the best of what it has. The exact top k
    sometimes needs a very common query word's contribution to tens of thousands of
    memories (a name said in most of them); on a bank of a million memories that costs
    hundreds of milliseconds. Under the budget the result is exact (on banks of up to about
    100,000 memories nearly always); over it, the ranking can miss or misorder memories
    whose score depends on the query's commonest words. None: always exact."""

    dense_exact: bool = False
    """Dense search scans every candidate, HNSW index or not (benchmarks compare with it)."""

    lexical_pack_cache_bytes: int = 256 << 20
    """Memory for packs kept between searches (PackCache), shared by every bank this store
    searches, each keeping part of its lists when they do not all fit: a search then asks
    the database only whether they are still current. 0 keeps none."""

    def _pack_cache(self) -> PackCache[Held] | None:
        if self.lexical_pack_cache_bytes <= 0:
            return None
        cache = self.__dict__.get("_packs")
        if cache is None or cache.max_bytes != self.lexical_pack_cache_bytes:
            cache = self.__dict__["_packs"] = pack_cache(self.lexical_pack_cache_bytes)
        return cache

    lexical_pack_min: int | None = PACK_MIN
    """Lists of terms held by at least this many memories are kept in this process's memory
    between searches (see lexical_pack_cache_bytes); None reads every list from its blocks
    every time."""

    def _recent(self) -> threading.local:
        """What this thread's last lexical search read (see lexical_scores)."""
        recent: threading.local | None = self.__dict__.get("_recent_search")
        if recent is None:
            recent = self.__dict__.setdefault("_recent_search", threading.local())
        return recent

    def lexical_scores(
        self, bank: str, terms: Sequence[str], seqs: Sequence[int]
    ) -> dict[int, float]:
        if not seqs:
            return {}
        wanted = np.unique(np.asarray(seqs, dtype=np.int64))
        # A recall scores the other channels' finds right after its lexical search, in the
        # same thread, for the same terms: the lists that search read whole serve again (the
        # same statistics, so the same scores it gave), with nothing asked of the database.
        last = self._recent().__dict__.pop("search", None)  # used once: its memory goes
        if last is not None and last[:2] == (bank, tuple(terms)):
            lists: PostgresPostings = last[3]  # its lists hold the memories its filter leaves out
            if time.monotonic() - last[2] < RECENT_SECONDS:
                return positive(wanted, lists.added(sorted(lists.weights), wanted))
        with self._conn() as conn:
            stats = self._bank_terms(conn, bank, terms)
            if stats is None or stats[0][1] == 0:
                return {}
            (bank_id, n, total), df = stats
            weights = self._weights(n, terms, df)
            if not weights:
                return {}
            lists = PostgresPostings(
                conn, bank_id, total / n if total else 1.0, weights, "", (), df,
                self.lexical_pack_min, None, self._pack_cache(),
            )  # fmt: skip
            return positive(wanted, lists.added(sorted(weights), wanted))

    # -- dense -----------------------------------------------------------------------------
    @staticmethod
    def _index_name(bank_id: int, dim: int) -> str:
        return f"memories_embedding_b{bank_id}_d{dim}"

    def vector_index_exists(self, bank_id: int, dim: int) -> bool:
        known: set[tuple[int, int]] = self.__dict__.setdefault("_vector_indexes", set())
        if (bank_id, dim) in known:
            return True
        with self._conn() as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = %s AND i.indisvalid",
                (self._index_name(bank_id, dim),),
            ).fetchone()
        if row is not None:
            known.add((bank_id, dim))
        return row is not None

    def ensure_vector_index(
        self, bank: str, dim: int, *, build_memory: str | None = None, force: bool = False
    ) -> bool:
        """The bank's HNSW index for vectors of `dim` numbers, once it holds more than
        EXACT_LIMIT memories (smaller banks are scanned exactly). Built concurrently, so
        retains into the bank go on meanwhile; returns whether the index exists now (for a
        bank still at or under EXACT_LIMIT, only an index this store already knows of).

        One index per bank (a partial index) rather than one for the whole table: a query
        filtered to one bank of a shared index walks the other banks' vectors too.
        Bulk loads are faster without it: `drop_vector_index`, load, then this with
        `build_memory` (e.g. "2GB") to build it in one go, in parallel."""
        with self._conn() as conn:
            info = self._bank(conn, bank)
        if info is None:
            return False
        bank_id, live, _total = info
        if bank in self.__dict__.get("_bulk_loading", ()):
            return False  # built once the load is over
        if live <= EXACT_LIMIT and not force:
            # Scanned exactly: no catalogue lookup on every retain into a small bank.
            return (bank_id, dim) in self.__dict__.get("_vector_indexes", ())
        if self.vector_index_exists(bank_id, dim):
            return True
        name = self._index_name(bank_id, dim)
        # Another process may build it at the same moment; an interrupted concurrent build
        # leaves an invalid index behind, dropped first.
        with self._conn() as conn:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            if build_memory is not None:
                conn.execute(f"SET maintenance_work_mem = '{build_memory}'")
                conn.execute("SET max_parallel_maintenance_workers = 2")
            try:
                conn.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories"
                    f" USING hnsw ((embedding::vector({dim})) vector_ip_ops)"
                    f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                    f" WHERE bank_id = {int(bank_id)} AND vector_dims(embedding) = {dim}"
                )
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                pass
            finally:
                if build_memory is not None:
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("RESET max_parallel_maintenance_workers")
        return self.vector_index_exists(bank_id, dim)

    @contextmanager
    def bulk_load(
        self,
        bank: str,
        build_memory: str | None = None,
        told: Callable[[IndexBuild], None] | None = None,
    ) -> Iterator[None]:
        """Load many memories into a bank faster: its HNSW indexes are dropped for the load
        and built once after it, in parallel, with `build_memory` (default: what the index
        needs within what the server and this machine allow, see `plan_index_build`; `told`
        hears that choice before each build; `lamina copy` uses this)."""
        with self._conn() as conn:
            info = self._bank(conn, bank)
            bank_id = info[0] if info is not None else None
            names = [
                str(r[0])
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'"
                    " AND indexname LIKE %s",
                    (f"memories_embedding_b{bank_id}_d%",),
                )
            ]
        if bank_id is None:
            yield
            return
        for name in names:
            self.drop_vector_index(bank, int(name.rsplit("_d", 1)[1]))
        loading: set[str] = self.__dict__.setdefault("_bulk_loading", set())
        loading.add(bank)
        try:
            yield
        finally:
            loading.discard(bank)
            with self._conn() as conn:
                dims = {
                    int(r[0]): int(r[1])
                    for r in conn.execute(
                        "SELECT vector_dims(embedding), count(*) FROM memories"
                        " WHERE bank_id = %s AND embedding IS NOT NULL"
                        " GROUP BY vector_dims(embedding)",
                        (bank_id,),
                    )
                }
                limits = build_memory_limits(conn) if build_memory is None else []
            indexed = sum(dims.values()) > EXACT_LIMIT  # smaller banks are scanned exactly
            for dim, count in dims.items():
                plan = plan_index_build(count, dim, limits)
                if told is not None and build_memory is None and indexed:
                    told(plan)
                self.ensure_vector_index(bank, dim, build_memory=build_memory or plan.setting)

    def drop_vector_index(self, bank: str, dim: int) -> None:
        """Drop the bank's HNSW index (before a bulk load; see ensure_vector_index)."""
        with self._conn() as conn:
            info = self._bank(conn, bank)
            if info is None:
                return
            self.__dict__.setdefault("_vector_indexes", set()).discard((info[0], dim))
            conn.execute(f"DROP INDEX IF EXISTS {self._index_name(info[0], dim)}")

    def dense_search(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        depth: int,
        where: SearchFilter,
        embedder: str | None = None,
        *,
        exact: bool = False,
    ) -> list[tuple[int, float]]:
        """See SearchStore.dense_search; `exact` scans every candidate (for benchmarks)."""
        dim = int(vector.shape[0])
        with self._conn() as conn:
            info = self._bank(conn, bank)
            if info is None or info[1] == 0 or depth <= 0:
                return []
            bank_id, live, _total = info
            filter_sql, filter_params = _FILTER.conditions(bank_id, where)
            # The bank id is written out (an integer from the database): a bank's partial
            # HNSW index applies only when the planner sees it.
            conditions = f"m.bank_id = {int(bank_id)} AND vector_dims(m.embedding) = {dim}"
            params: list[Any] = []
            if embedder is not None:
                conditions += " AND m.embedder = %s"
                params.append(embedder)
            if filter_sql:
                conditions += f" AND {filter_sql}"
                params += filter_params
            candidates = live
            excluded = self._excluded(conn, bank_id, where) if live > EXACT_LIMIT else None
            if excluded is not None:
                candidates = live - len(excluded)
            elif filter_sql and live > EXACT_LIMIT:
                row = conn.execute(
                    f"SELECT count(*) FROM memories m WHERE {conditions}", params
                ).fetchone()
                candidates = int(row[0]) if row else 0
            query = np.asarray(vector, dtype=np.float32)
            indexed = not (exact or self.dense_exact) and candidates > EXACT_LIMIT
            if indexed and not self.vector_index_exists(bank_id, dim):
                indexed = False  # not built yet: scan exactly, slower but right
            if not indexed:
                # Ordering by the bare expression keeps the planner off the HNSW index.
                order_by = "m.embedding <#> %s"
            else:
                # Set on the connection (no transaction), once: every indexed search sets
                # them, and nothing else reads them.
                ef_search = max(depth, HNSW_EF_SEARCH)
                if _HNSW_SETTINGS.get(conn) != ef_search:
                    conn.execute(
                        f"SET hnsw.ef_search = {ef_search}; SET hnsw.iterative_scan = relaxed_order"
                    )
                    _HNSW_SETTINGS[conn] = ef_search
                order_by = f"m.embedding::vector({dim}) <#> %s::vector({dim})"
            rows = conn.execute(
                f"SELECT m.seq, -(m.embedding <#> %s) FROM memories m WHERE {conditions}"
                f" ORDER BY {order_by} LIMIT %s",
                [query, *params, query, depth],
            ).fetchall()
        ranked = [(int(seq), float(score)) for seq, score in rows]
        ranked.sort(key=lambda kv: (-kv[1], kv[0]))
        return ranked

    # -- time ------------------------------------------------------------------------------
    @contextmanager
    def _dated(self, bank: str, where: SearchFilter) -> Iterator[Dated | None]:
        with self._conn() as conn:
            info = self._bank(conn, bank)
            if info is None:
                yield None
                return
            sql, params = _FILTER.conditions(info[0], where)

            def read(query: str, values: list[Any]) -> list[tuple[Any, Any]]:
                return conn.execute(query, values).fetchall()

            condition = f" AND {sql}" if sql else ""
            epoch = "extract(epoch FROM m.t)"
            yield rows_dated(read, epoch, info[0], condition, params, _same, float, "%s")

    # -- fetching --------------------------------------------------------------------------
    def _products(
        self, bank: str, query: npt.NDArray[np.float32], seqs: list[int], embedder: str | None
    ) -> dict[int, float]:
        dim = int(query.shape[0])
        condition = " AND m.embedder = %s" if embedder is not None else ""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.seq, -(m.embedding <#> %s) FROM memories m"
                " WHERE m.bank_id = (SELECT id FROM banks WHERE name = %s) AND m.seq = ANY(%s)"
                f" AND vector_dims(m.embedding) = {dim}{condition}",
                [query, bank, seqs] + ([embedder] if embedder is not None else []),
            ).fetchall()
        return {int(seq): float(score) for seq, score in rows}

    def memory_times(self, bank: str, seqs: Sequence[int]) -> dict[int, float]:
        if not seqs:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.seq, extract(epoch FROM m.t) FROM memories m"
                " WHERE m.bank_id = (SELECT id FROM banks WHERE name = %s) AND m.seq = ANY(%s)"
                " AND m.t IS NOT NULL",
                (bank, list(seqs)),
            ).fetchall()
        return {int(seq): float(t) for seq, t in rows}

    def memories_by_seq(
        self, bank: str, seqs: Sequence[int], *, with_embeddings: bool = True
    ) -> dict[int, Memory]:
        return dict(self._memories_where(bank, "m.seq", list(seqs), with_embeddings))

    def _memories_where(
        self, bank: str, column: str, values: list[Any], with_embeddings: bool = True
    ) -> list[tuple[int, Memory]]:
        """(seq, memory) of the bank's memories whose `column` is one of `values`."""
        if not values:
            return []
        embedding = "m.embedding" if with_embeddings else "NULL::vector"
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {self._MEMORY_COLUMNS}, {embedding} FROM memories m"
                " JOIN documents d ON d.id = m.document_id JOIN banks b ON b.id = m.bank_id"
                f" WHERE b.name = %s AND {column} = ANY(%s)",
                (bank, values),
                binary=True,
            )
            return [(int(row[0]), self._memory(bank, row)) for row in rows]
