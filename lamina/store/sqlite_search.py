"""Search inside the SQLite database: the `SearchStore` methods of `SQLiteStore`.

A recall on SQLite used to load the whole bank into the process (every text and vector, and a
BM25 index built again from the texts): about 0.1 ms of CPU per memory, ten seconds at 100,000
memories, in every fresh hook process. Now each channel reads only what its query needs:

- **lexical**: BM25 over the `postings` of the query's terms only (written at retain, common
  terms packed into one row each; see lamina.store.sqlite_postings), scored with numpy with
  the in-process index's k1, b and idf, so the same ranking;
- **dense**: exact dot products over the bank's vector file (lamina.store.vectors), mapped
  into the process once and scanned in place; the best candidates are then checked against
  the database (rows of deleted or replaced memories stay in the file until it is rebuilt),
  and a recall's other candidates are scored from the same mapping;
- **time**, **counts**, **fetching**: indexed queries (`memories_by_bank_time`) and counters
  kept by triggers (`banks.live_memories`, `total_terms`, ...).

Leaving the current session out costs in proportion to that session: its memories are read
through the documents index and taken out of the results.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .packs import PackCache
    from .sqlite_postings import Packed, Postings, Tail
    from .vectors import Mapped, VectorFile
else:
    from .._lazy import numpy as np
import orjson

from ..memories import Memory
from .ranking import best, members
from .search import DatabaseSearch, Dated, FilterSQL, SearchFilter, rows_dated

# The postings (with the text analysis they need) and the vector files are imported by the
# methods that search: a process that only keeps context logs (`lamina compile --bank`) never
# loads them.

__all__ = ["SQLiteSearch"]

V = TypeVar("V")

_MEMO_SIZE = 8
"""BM25 sums kept per store (see `_scored`)."""
_VERIFY_BATCH = 256
"""Dense candidates checked against the database at a time."""


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _epoch(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


_FILTER = FilterSQL(
    mark="?",
    among="{} IN (SELECT value FROM json_each(?))",
    tagged="EXISTS (SELECT 1 FROM json_each(m.tags) t"
    " WHERE t.value IN (SELECT value FROM json_each(?)))",
    values=lambda values: orjson.dumps(values).decode(),
    time=_iso,
)


@dataclass(frozen=True, slots=True)
class _BankInfo:
    id: int
    live: int
    total_terms: int
    ready: bool
    vector_epoch: int
    created_at: str
    generation: int


class SQLiteSearch(DatabaseSearch):
    """Mixed into SQLiteStore: the `SearchStore` methods."""

    path: str

    # Provided by SQLiteStore.
    @property
    def conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    _MEMORY_COLUMNS: str
    _memory: Callable[..., Memory]

    # -- banks and filters -----------------------------------------------------------------
    @staticmethod
    def _bank_info(conn: sqlite3.Connection, bank: str) -> _BankInfo | None:
        row = conn.execute(
            "SELECT id, live_memories, total_terms, search_ready, vector_epoch, created_at,"
            " generation FROM banks WHERE name = ?",
            (bank,),
        ).fetchone()
        if row is None:
            return None
        return _BankInfo(
            int(row[0]), int(row[1]), int(row[2]), bool(row[3]), int(row[4]), row[5], int(row[6])
        )

    def searchable(self, bank: str) -> bool:
        """Whether the bank's postings are complete (banks retained before they existed are
        indexed by `prepare_search`, which `MemoryBank` runs before their first recall)."""
        info = self._bank_info(self.conn, bank)
        return info is None or info.ready

    @property
    def search_threads(self) -> bool:
        """Whether recall may search on several threads at once: not in a `:memory:`
        database, which is one connection's (each thread would open an empty one)."""
        return self.path != ":memory:"

    @staticmethod
    def _excluded(
        conn: sqlite3.Connection, bank_id: int, where: SearchFilter
    ) -> npt.NDArray[np.int64] | None:
        """The sorted seqs a filter leaves out when it only excludes documents (read through
        the documents' index: the cost of those documents, not of the bank); else None."""
        if not where.exclude or not replace(where, exclude={}).empty:
            return None
        seqs: list[int] = []
        for document, cutoff in sorted(where.exclude.items()):
            condition, extra = _FILTER.said_since(cutoff)
            rows = conn.execute(
                "SELECT m.seq FROM memories m WHERE m.document_id ="
                f" (SELECT id FROM documents WHERE bank_id = ? AND name = ?){condition}",
                (bank_id, document, *extra),
            )
            seqs += [int(r[0]) for r in rows]
        return np.array(sorted(set(seqs)), dtype=np.int64)

    def _restriction(
        self, conn: sqlite3.Connection, bank_id: int, where: SearchFilter, column: str
    ) -> tuple[str, list[Any]]:
        """A condition on `column` (a seq) that applies the filter."""
        if where.empty:
            return "", []
        excluded = self._excluded(conn, bank_id, where)
        if excluded is not None:
            if not excluded.size:
                return "", []
            return (
                f" AND {column} NOT IN (SELECT value FROM json_each(?))",
                [orjson.dumps(excluded.tolist()).decode()],
            )
        sql, params = _FILTER.conditions(bank_id, where)
        return (
            f" AND {column} IN (SELECT m.seq FROM memories m WHERE m.bank_id = ? AND {sql})",
            [bank_id, *params],
        )

    def count_memories(self, bank: str, where: SearchFilter) -> int:
        conn = self.conn
        info = self._bank_info(conn, bank)
        if info is None:
            return 0
        if where.empty:
            return info.live
        excluded = self._excluded(conn, info.id, where)
        if excluded is not None:
            return info.live - len(excluded)
        sql, params = _FILTER.conditions(info.id, where)
        row = conn.execute(
            f"SELECT count(*) FROM memories m WHERE m.bank_id = ? AND {sql}", [info.id, *params]
        ).fetchone()
        return int(row[0]) if row else 0

    # -- lexical ---------------------------------------------------------------------------
    def _lists(
        self, conn: sqlite3.Connection, bank: str, terms: Sequence[str]
    ) -> tuple[_BankInfo, dict[str, Postings]] | None:
        """The bank and the live postings of the query's terms, read in one snapshot."""
        began = not conn.in_transaction
        if began:
            conn.execute("BEGIN")
        try:
            info = self._bank_info(conn, bank)
            if info is None:
                return None
            from .sqlite_postings import read_postings

            packs = self._pack_cache()
            tails = self._tail_cache() if packs is not None else None
            return info, read_postings(conn, info.id, terms, packs, tails, info.generation)
        finally:
            if began:
                conn.execute("COMMIT")

    def _scored(
        self, conn: sqlite3.Connection, bank: str, terms: Sequence[str]
    ) -> tuple[_BankInfo, npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        """Every memory holding a query term and its BM25 score. The last few are kept, by
        the bank's generation (which every write to its memories changes): a recall scores
        the other channels' finds with the sums its lexical search made, and the hook's full
        recall reuses its lexical-only one's."""
        memo: OrderedDict[tuple[Any, ...], tuple[Any, ...]]
        memo = self.__dict__.setdefault("_bm25_memo", OrderedDict())
        lock: threading.Lock = self.__dict__.setdefault("_bm25_lock", threading.Lock())
        info = self._bank_info(conn, bank)
        if info is None:
            return None
        # A bank deleted and made again restarts its generation: its id and birth tell them apart.
        key = (bank, info.id, info.created_at, info.generation, tuple(sorted(terms)))
        with lock:
            held = memo.get(key)
            if held is not None:
                memo.move_to_end(key)
                return held[0], held[1], held[2]
        found = self._lists(conn, bank, terms)
        if found is None:
            return None
        info, lists = found
        from .sqlite_postings import bm25

        seqs, scores = bm25(lists, terms, info.live, info.total_terms)
        with lock:
            memo[(*key[:3], info.generation, key[4])] = (info, seqs, scores)
            while len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)
        return info, seqs, scores

    def term_counts(self, bank: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        found = self._lists(self.conn, bank, terms)
        if found is None:
            return 0, {}
        info, lists = found
        return info.live, {t: len(p) for t, p in lists.items()}

    def lexical_search(
        self, bank: str, terms: Sequence[str], depth: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        conn = self.conn
        found = self._scored(conn, bank, terms) if terms and depth > 0 else None
        if found is None:
            return []
        info, seqs, scores = found
        keep = self._passes(conn, info, where, seqs)
        if keep is not None:
            seqs, scores = seqs[keep], scores[keep]
        return [(int(seqs[i]), float(scores[i])) for i in best(seqs, scores, depth)]

    def _passes(
        self,
        conn: sqlite3.Connection,
        info: _BankInfo,
        where: SearchFilter,
        seqs: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.bool_] | None:
        """Which of `seqs` the filter lets through (None: all)."""
        if where.empty or not len(seqs):
            return None
        excluded, chosen = self._filtered(conn, info, where)
        if chosen is not None:
            return members(seqs, chosen)
        return ~members(seqs, excluded)

    def _filtered(
        self, conn: sqlite3.Connection, info: _BankInfo, where: SearchFilter
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None]:
        """A non-empty filter as (the seqs it leaves out, None) when it only excludes
        documents, else (nothing, the live seqs it lets through)."""
        excluded = self._excluded(conn, info.id, where)
        if excluded is not None:
            return excluded, None
        sql, params = _FILTER.conditions(info.id, where)
        rows = conn.execute(
            f"SELECT m.seq FROM memories m WHERE m.bank_id = ? AND {sql}", [info.id, *params]
        )
        return np.empty(0, dtype=np.int64), np.array([r[0] for r in rows], dtype=np.int64)

    def lexical_scores(
        self, bank: str, terms: Sequence[str], seqs: Sequence[int]
    ) -> dict[int, float]:
        if not seqs or not terms:
            return {}
        found = self._scored(self.conn, bank, terms)
        if found is None:
            return {}
        _info, scored, scores = found
        # Not np.unique: its first call imports numpy.ma, 7 ms that the cold hook would pay.
        wanted = np.array(sorted({int(s) for s in seqs}), dtype=np.int64)
        at = np.searchsorted(scored, wanted)
        at = np.minimum(at, max(len(scored) - 1, 0))
        hit = (scored[at] == wanted) if len(scored) else np.zeros(len(wanted), dtype=bool)
        return {
            int(s): float(x) for s, x in zip(wanted[hit], scores[at[hit]], strict=True) if x > 0
        }

    # -- dense -----------------------------------------------------------------------------
    def _vector_file(
        self, conn: sqlite3.Connection, info: _BankInfo, embedder: str | None
    ) -> VectorFile | None:
        """The bank's vector file for `embedder` (None: the embedder most of its vectors
        come from), brought up to date with the database."""
        if self.path == ":memory:":
            return None
        if embedder is None:
            row = conn.execute(
                "SELECT embedder FROM bank_embedders WHERE bank_id = ? AND memories > 0"
                " ORDER BY memories DESC, embedder LIMIT 1",
                (info.id,),
            ).fetchone()
            if row is None:
                return None
            embedder = str(row[0])
        live_row = conn.execute(
            "SELECT memories FROM bank_embedders WHERE bank_id = ? AND embedder = ?",
            (info.id, embedder),
        ).fetchone()
        if live_row is None or int(live_row[0]) <= 0:
            return None
        from .vectors import VectorFile, bank_key, vector_dir

        vectors = VectorFile(vector_dir(self.path), info.id, embedder)
        header = vectors.header()
        key = bank_key(info.id, info.created_at)
        if not vectors.sound(header):
            # Another user's file, one others may write, or one cut short: made again.
            vectors.sync(conn, key, info.vector_epoch, int(live_row[0]), rebuild=True)
            return vectors
        if header is not None and header.key == key and header.epoch == info.vector_epoch:
            newest = conn.execute(
                "SELECT max(seq) FROM memories WHERE bank_id = ? AND embedder = ?",
                (info.id, embedder),
            ).fetchone()[0]
            if newest is None or int(newest) <= header.last_seq:
                return vectors
        vectors.sync(conn, key, info.vector_epoch, int(live_row[0]))
        return vectors

    keep_in_memory: bool = False
    """Keep what lexical searches read (packs, tails) in this process between searches: for
    servers, which answer many recalls; a one-shot process (a hook) reads and lets go. Vector
    files are mapped, not read, so every process keeps its mapping (see `_mapped_scores`)."""

    def _mapped_scores(
        self, vectors: VectorFile, query: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The file's seqs and their scores (None: the query's dimension is not the file's),
        through the mapping this store holds (mapped again when the file was rebuilt or
        replaced). A mapping holds no memory of its own: its pages are the page cache's.
        OSError when the file cannot be mapped (gone meanwhile, damaged, not trusted)."""
        held: dict[Path, Mapped] = self.__dict__.setdefault("_mapped", {})
        lock: threading.Lock = self.__dict__.setdefault("_mapped_lock", threading.Lock())
        with lock:
            mapped = vectors.mapped(held.get(vectors.path))
            if mapped is None:
                held.pop(vectors.path, None)
                raise OSError(f"{vectors.path}: cannot be mapped")
            held[vectors.path] = mapped
        return mapped.scores(query)

    def _pack_cache(self) -> PackCache[Packed] | None:
        from .sqlite_postings import pack_cache  # here: a store that only writes needs none

        return self._kept("_packs", pack_cache)

    def _tail_cache(self) -> PackCache[Tail] | None:
        from .sqlite_postings import tail_cache

        return self._kept("_tails", tail_cache)

    def _kept(self, key: str, make: Callable[[], PackCache[V]]) -> PackCache[V] | None:
        """The store's cache under `key`, made on first use; None when nothing is kept in
        memory."""
        if not self.keep_in_memory:
            return None
        cache: PackCache[V] | None = self.__dict__.get(key)
        if cache is None:
            cache = self.__dict__[key] = make()
        return cache

    def sync_vectors(self, bank: str) -> None:
        """Bring the bank's vector files up to date (retain calls this after committing, so
        the next recall finds nothing to add)."""
        conn = self.conn
        info = self._bank_info(conn, bank)
        if info is None:
            return
        embedders = [
            str(r[0])
            for r in conn.execute(
                "SELECT embedder FROM bank_embedders WHERE bank_id = ? AND memories > 0",
                (info.id,),
            )
        ]
        for embedder in embedders:
            self._vector_file(conn, info, embedder)

    def dense_search(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        depth: int,
        where: SearchFilter,
        embedder: str | None = None,
    ) -> list[tuple[int, float]]:
        conn = self.conn
        info = self._bank_info(conn, bank)
        if info is None or info.live == 0 or depth <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        try:
            if self.path == ":memory:":
                raise OSError("no vector files beside an in-memory database")
            vectors = self._vector_file(conn, info, embedder)
            found = None if vectors is None else self._mapped_scores(vectors, query)
        except OSError:
            # No vector file can be written or mapped here (a read-only or full disk, no disk
            # at all, a file not to be trusted): score the database's vectors directly, slower
            # but the same.
            found = self._scores_from_database(conn, info, embedder, query)
        if found is None:
            return []
        seqs, scores = found
        keep = np.ones(len(seqs), dtype=bool)
        allowed: set[int] | None = None  # live seqs the filter chose: no check needed
        if not where.empty:
            excluded, chosen = self._filtered(conn, info, where)
            if chosen is None:
                keep &= ~members(seqs, excluded)
            else:
                keep &= members(seqs, chosen)
                allowed = set(chosen.tolist())
        candidates = np.flatnonzero(keep)
        out: list[tuple[int, float]] = []
        for batch in _best_first(candidates, scores, 2 * depth):
            wanted = [int(s) for s in seqs[batch]]
            if allowed is not None:
                live = allowed
            else:
                live = {
                    int(r[0])
                    for r in conn.execute(
                        "SELECT seq FROM memories WHERE +bank_id = ?"
                        " AND seq IN (SELECT value FROM json_each(?))",
                        (info.id, orjson.dumps(wanted).decode()),
                    )
                }
            for slot, seq in zip(batch, wanted, strict=True):
                if seq in live:
                    out.append((seq, float(scores[slot])))
                    if len(out) >= depth:
                        return out
        return out

    @staticmethod
    def _scores_from_database(
        conn: sqlite3.Connection,
        info: _BankInfo,
        embedder: str | None,
        query: npt.NDArray[np.float32],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        condition = " AND embedder = ?" if embedder is not None else ""
        rows = conn.execute(
            "SELECT seq, embedding FROM memories WHERE bank_id = ? AND embedding IS NOT NULL"
            f"{condition} ORDER BY seq",
            [info.id] + ([embedder] if embedder is not None else []),
        )
        from .vectors import CHUNK_ROWS, products

        width = 4 * int(query.shape[0])
        seqs: list[npt.NDArray[np.int64]] = []
        scores: list[npt.NDArray[np.float32]] = []
        while batch := rows.fetchmany(CHUNK_ROWS):
            kept = [(s, b) for s, b in batch if len(b) == width]
            if kept:
                matrix = np.frombuffer(b"".join(b for _s, b in kept), dtype=np.float32)
                seqs.append(np.array([s for s, _b in kept], dtype=np.int64))
                scores.append(products(matrix.reshape(len(kept), -1), query))
        if not seqs:
            return None
        return np.concatenate(seqs), np.concatenate(scores).astype(np.float32)

    def _products(
        self, bank: str, query: npt.NDArray[np.float32], seqs: list[int], embedder: str | None
    ) -> dict[int, float]:
        out = self._mapped_products(bank, query, seqs, embedder)
        if len(out) < len(seqs):
            rest = [seq for seq in seqs if seq not in out]
            out.update(self._stored_products(bank, query, rest, embedder))
        return out

    def _mapped_products(
        self, bank: str, query: npt.NDArray[np.float32], seqs: list[int], embedder: str | None
    ) -> dict[int, float]:
        """The products of those of `seqs` (sorted) whose rows the mapping this store holds
        of the bank's current vector file has: the dense search of the same recall mapped it,
        so the pool's other candidates are scored without reading their vectors from the
        database. A seq's row there is its vector in the database as long as the file is of
        the bank's vector epoch (vectors changed in place make a new file)."""
        held: dict[Path, Mapped] = self.__dict__.get("_mapped", {})
        if embedder is None or not held or self.path == ":memory:":
            return {}
        info = self._bank_info(self.conn, bank)
        if info is None:
            return {}
        from .vectors import VectorFile, bank_key, products, vector_dir

        mapped = held.get(VectorFile(vector_dir(self.path), info.id, embedder).path)
        layout = (bank_key(info.id, info.created_at), info.vector_epoch, int(query.shape[0]))
        if mapped is None or mapped.layout[:3] != layout or not mapped.count:
            return {}
        stored = mapped.seqs[: mapped.count]
        wanted = np.array(seqs, dtype=np.int64)
        at = np.minimum(np.searchsorted(stored, wanted), mapped.count - 1)
        hit = stored[at] == wanted
        found = products(mapped.matrix[at[hit]], query)
        return {int(s): float(p) for s, p in zip(wanted[hit], found, strict=True)}

    def _stored_products(
        self, bank: str, query: npt.NDArray[np.float32], seqs: list[int], embedder: str | None
    ) -> dict[int, float]:
        """The products of `seqs` from the vectors in the database."""
        if not seqs:
            return {}
        width = 4 * int(query.shape[0])
        condition = " AND m.embedder = ?" if embedder is not None else ""
        rows = self.conn.execute(
            "SELECT m.seq, m.embedding FROM memories m"
            " WHERE +m.bank_id = (SELECT id FROM banks WHERE name = ?)"
            " AND m.seq IN (SELECT value FROM json_each(?))"
            f" AND m.embedding IS NOT NULL{condition}",
            [bank, orjson.dumps(seqs).decode()] + ([embedder] if embedder is not None else []),
        ).fetchall()
        kept = [(int(seq), blob) for seq, blob in rows if len(blob) == width]
        if not kept:
            return {}
        matrix = np.frombuffer(b"".join(b for _s, b in kept), dtype=np.float32)
        from .vectors import products

        found = products(matrix.reshape(len(kept), -1), query)
        return {seq: float(p) for (seq, _b), p in zip(kept, found, strict=True)}

    # -- time ------------------------------------------------------------------------------
    @contextmanager
    def _dated(self, bank: str, where: SearchFilter) -> Iterator[Dated | None]:
        conn = self.conn
        info = self._bank_info(conn, bank)
        if info is None:
            yield None
            return
        condition, params = self._restriction(conn, info.id, where, "m.seq")

        def read(sql: str, values: list[Any]) -> list[tuple[Any, Any]]:
            return conn.execute(sql, values).fetchall()

        yield rows_dated(read, "m.t", info.id, condition, params, _iso, _epoch, "?")

    def memory_times(self, bank: str, seqs: Sequence[int]) -> dict[int, float]:
        if not seqs:
            return {}
        rows = self.conn.execute(
            "SELECT m.seq, m.t FROM memories m"
            " WHERE +m.bank_id = (SELECT id FROM banks WHERE name = ?)"
            " AND m.seq IN (SELECT value FROM json_each(?)) AND m.t IS NOT NULL",
            (bank, orjson.dumps(sorted({int(s) for s in seqs})).decode()),
        )
        return {int(seq): _epoch(t) for seq, t in rows}

    def memories_by_seq(
        self, bank: str, seqs: Sequence[int], *, with_embeddings: bool = True
    ) -> dict[int, Memory]:
        if not seqs:
            return {}
        embedding = "m.embedding" if with_embeddings else "NULL"
        rows = self.conn.execute(
            # By seq (the primary key), not through the bank's index: `+` keeps the planner
            # from scanning the whole bank to find a page of memories.
            f"SELECT {self._MEMORY_COLUMNS}, {embedding} FROM memories m"
            " JOIN documents d ON d.id = m.document_id"
            " WHERE m.seq IN (SELECT value FROM json_each(?))"
            " AND +m.bank_id = (SELECT id FROM banks WHERE name = ?)",
            (orjson.dumps(sorted({int(s) for s in seqs})).decode(), bank),
        )
        return {int(row[0]): self._memory(bank, row, row[-1]) for row in rows}


def _best_first(
    candidates: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], first: int
) -> Iterator[npt.NDArray[np.int64]]:
    """`candidates` (slots) in batches of _VERIFY_BATCH, best score first, ties to the lower
    slot (the file is in seq order, so the lower seq): the best `first` (and their ties)
    sorted first, the rest only if a caller reads that far."""
    top = candidates
    if len(candidates) > first > 0:
        values = scores[candidates]
        kth = np.partition(values, len(values) - first)[len(values) - first]
        top = candidates[values >= kth]
    order = top[np.lexsort((top, -scores[top]))]
    yield from (order[i : i + _VERIFY_BATCH] for i in range(0, len(order), _VERIFY_BATCH))
    if len(top) < len(candidates):
        rest = np.setdiff1d(candidates, top, assume_unique=True)
        order = rest[np.lexsort((rest, -scores[rest]))]
        yield from (order[i : i + _VERIFY_BATCH] for i in range(0, len(order), _VERIFY_BATCH))
