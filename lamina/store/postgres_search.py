"""Recall's searches run inside PostgreSQL (see lamina.store.search for the contract).

Lexical: BM25 over the `postings` table with the in-process index's formula, computed here.
The postings of a bank's common terms are also kept packed, one row per term
(`posting_packs`), and a store keeps the packs it has read in memory (PackCache), asking
the database each time only whether they are still current. Two ways to the exact top k:

- When every query term's list is in memory or cheap to read, all of them are read whole
  and summed on one array over the bank's seq range; the commonest terms are only looked
  up for the memories they could still lift into the top k (see `_Postings.top`).
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

import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from ..memories import Memory
from ..text.lexical import idf
from .packs import PackCache
from .search import BM25_B, BM25_K1, SearchFilter

__all__ = ["EXACT_LIMIT", "PackCache", "PostgresSearch", "index_build_memory", "pack_cache"]

EXACT_LIMIT = 5_000
"""Up to this many candidate memories, dense search scans them exactly."""
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
BUILD_MEMORY_CAP = 4 << 30
"""The most a bulk load asks for to build one HNSW index in memory; a larger index is built
spilling to disk (slower, and never more memory than this)."""


def index_build_memory(vectors: int, dim: int) -> str:
    """`maintenance_work_mem` for building the HNSW index of `vectors` vectors of `dim`
    dimensions in memory: the vectors (4 bytes a dimension) and their graph (2 * m neighbours
    of about 8 bytes each at the lowest layer, and headers), plus a quarter for the build's
    own bookkeeping; at least 64 MB, at most BUILD_MEMORY_CAP. Measured here: 1M vectors of
    384 dimensions make a 2.05 GB index, which the 1 GB `lamina copy` used to ask for built
    spilling."""
    need = int(vectors * (dim * 4 + 2 * HNSW_M * 8 + 128) * 1.25)
    return f"{max(64 << 20, min(need, BUILD_MEMORY_CAP)) >> 20}MB"


PROBE_COST = 10
"""Looking one candidate up in a term's postings costs about this many postings read whole."""
SHORTLIST = 4
"""Candidates scored in full, per result wanted, before proving the rest cannot matter."""
PACK_MIN = 2_000
"""Terms held by at least this many memories are read from their pack (`posting_packs`):
one row of packed arrays instead of a row per posting."""
PACK_COST = 0.1
"""A posting read from a pack costs about this much of one read row by row."""
CACHED_COST = 0.01
"""... and one of a pack this process holds already (see PackCache), this much."""
LOOKUP_COST = 16
"""Looking a memory up in a list held in memory costs about as much as scoring and adding
this many of its postings."""
RECENT_SECONDS = 2.0
"""For this long, lexical_scores may reuse the lists its thread's last search read whole."""
IN_MEMORY_COST = 150_000
"""When reading every query term whole costs at most this much (about 1.5 million postings
sent from packs, or 15 million of packs held in memory), lexical search reads them all and
ranks in memory (`_Postings.top`): exact, and faster than proving which memories cannot
matter with lookups in the database."""
PACK_TAIL = 1_000
"""A pack is rebuilt once more than this many (and an eighth of its size) newer postings
have to be read beside it."""
EXCLUDED_MAX = 50_000
"""A filter that only leaves documents out (the current session, say) is applied by taking
their memories out of what is read, packs included, while they are at most this many; a
filter excluding more, or selecting, is applied in SQL, row by row."""

_Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
_AGGREGATES = (
    "string_agg(int8send(p.seq), '' ORDER BY p.seq),"
    " string_agg(int4send(p.tf), '' ORDER BY p.seq),"
    " string_agg(int4send(p.terms), '' ORDER BY p.seq)"
)
"""A term's postings packed big-endian (int8send/int4send), so that they arrive as three
byte strings rather than as many Python objects."""


_Raw = tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int32]]
"""A term's postings: seqs (ascending), term frequencies, memory lengths."""


_NONE: _Raw = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))


def _unpack(seqs: bytes | None, tfs: bytes | None, lengths: bytes | None) -> _Raw:
    return (
        np.frombuffer(seqs or b"", dtype=">i8").astype(np.int64),
        np.frombuffer(tfs or b"", dtype=">i4").astype(np.int32),
        np.frombuffer(lengths or b"", dtype=">i4").astype(np.int32),
    )


def _narrowest(values: npt.NDArray[np.int64], widths: Sequence[str]) -> bytes:
    """`values` (>= 0) as little-endian unsigned integers of the narrowest of `widths`
    that holds them all (the reader tells the width from the byte count)."""
    top = int(values.max()) if len(values) else 0
    for width in widths:
        if top <= np.iinfo(np.dtype(width)).max:
            return values.astype(width).tobytes()
    raise ValueError(f"{top} does not fit in {widths[-1]}")


def _encode(raw: _Raw) -> tuple[bytes, bytes, bytes]:
    """A pack's three columns: the first seq as 8 bytes then the gaps between seqs
    (2 or 4 bytes each), the term frequencies (1, 2 or 4 bytes) and the memories' lengths
    (2 or 4 bytes). About 5 bytes a posting, where the aggregates moved 16."""
    seqs, tfs, lengths = raw
    first = np.asarray(seqs[:1], dtype="<i8").tobytes()
    return (
        first + _narrowest(np.diff(seqs), ("<u2", "<u4", "<u8")),
        _narrowest(tfs.astype(np.int64), ("u1", "<u2", "<u4")),
        _narrowest(lengths.astype(np.int64), ("<u2", "<u4")),
    )


def _decode(count: int, seqs: bytes, tfs: bytes, lengths: bytes) -> _Raw:
    """The postings of a pack holding `count` of them (see _encode)."""
    if count == 0:
        return _NONE
    decoded = np.empty(count, dtype=np.int64)
    decoded[0] = np.frombuffer(seqs, dtype="<i8", count=1)[0]
    if count > 1:
        gaps = np.frombuffer(seqs, dtype=f"<u{(len(seqs) - 8) // (count - 1)}", offset=8)
        np.cumsum(gaps, dtype=np.int64, out=decoded[1:])
        decoded[1:] += decoded[0]
    return (
        decoded,
        np.frombuffer(tfs, dtype=f"<u{len(tfs) // count}").astype(np.int32),
        np.frombuffer(lengths, dtype=f"<u{len(lengths) // count}").astype(np.int32),
    )


def _raw_bytes(raw: _Raw) -> int:
    return sum(a.nbytes for a in raw)


def pack_cache(max_bytes: int) -> PackCache[_Raw]:
    """A PackCache of this store's decoded packs."""
    return PackCache(max_bytes, _raw_bytes)


class _Postings:
    """The postings of a query's terms and their BM25 contributions, per term as arrays in
    seq order: whole lists read once (a common term's from its pack, held in memory or
    sent), or only the entries of given candidates."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        bank_id: int,
        avgdl: float,
        weights: dict[str, float],
        filter_sql: str,
        filter_params: Sequence[Any],
        df: dict[str, int] | None = None,
        pack_min: int | None = None,
        excluded: npt.NDArray[np.int64] | None = None,
        cache: PackCache[_Raw] | None = None,
    ) -> None:
        self.conn, self.bank_id, self.avgdl, self.weights = conn, bank_id, avgdl, weights
        self.cache = cache
        self.filter_sql, self.filter_params = filter_sql, filter_params
        self.excluded = excluded if excluded is not None and len(excluded) else None
        """Sorted seqs left out of every ranking (the filter's, when it only excludes)."""
        self.df = df or {}
        # Packs hold every memory: a filtered search reads row by row.
        self.packed = (
            set()
            if filter_sql or pack_min is None
            else {t for t, n in self.df.items() if n >= pack_min}
        )
        self.whole: dict[str, _Raw] = {}
        """Lists read whole (the excluded memories are taken out of what they give)."""
        self._scored: dict[str, _Arrays] = {}
        self.cost = 0.0
        """Work done so far: postings read whole count 1 (PACK_COST from a pack), each
        candidate looked up PROBE_COST."""

    def read_cost(self, term: str) -> float:
        """What reading the term whole would add to `cost`."""
        if term in self.whole:
            return 0.0
        if term not in self.packed:
            return float(self.df.get(term, 0))
        return self.df.get(term, 0) * (CACHED_COST if self._held(term) else PACK_COST)

    def _held(self, term: str) -> bool:
        return self.cache is not None and self.cache.holds(self.bank_id, term)

    def _score(self, term: str, raw: _Raw) -> _Arrays:
        """Each posting's contribution: weight * tf * (k1 + 1) / (tf + norm), norm being
        k1 * (1 - b + b * length / avgdl), in place (these lists can be long) and in the
        in-process index's order of operations, so that the scores are the same to the bit."""
        seq, tf, length = raw
        k1, b = BM25_K1, BM25_B
        norm = length.astype(np.float64)
        norm *= b
        norm /= self.avgdl
        norm += 1 - b
        norm *= k1
        norm += tf
        score = tf.astype(np.float64)
        score *= self.weights[term]
        score *= k1 + 1
        score /= norm
        return seq, score

    def scored(self, term: str) -> _Arrays:
        """A list read whole, scored."""
        if term not in self._scored:
            self._scored[term] = self._score(term, self.whole[term])
        return self._scored[term]

    def _fetch(self, terms: Sequence[str], seqs: npt.NDArray[np.int64] | None) -> dict[str, _Raw]:
        """The terms' postings row by row: all of them (through the filter), or only those
        of `seqs`."""
        sql = (
            f"SELECT p.term, {_AGGREGATES} FROM postings p"
            " WHERE p.bank_id = %s AND p.term = ANY(%s)"
        )
        params: list[Any] = [self.bank_id, list(terms)]
        if seqs is not None:
            sql += " AND p.seq = ANY(%s)"
            params.append(seqs.tolist())
        elif self.filter_sql:
            sql += (
                " AND p.seq IN (SELECT m.seq FROM memories m WHERE m.bank_id = %s"
                f" AND {self.filter_sql})"
            )
            params += [self.bank_id, *self.filter_params]
        out = dict.fromkeys(terms, _NONE)
        for term, *packed in self.conn.execute(sql + " GROUP BY p.term", params, binary=True):
            out[str(term)] = _unpack(*packed)
        return out

    def _unpacked(self, terms: Sequence[str]) -> dict[str, _Raw]:
        """Whole lists of common terms: each pack with the postings newer than it; packs
        missing or out of date are built (or, where the database refuses the write, the
        postings read row by row). A pack the cache holds at its current version is not
        sent again."""
        held = self.cache.held(self.bank_id, terms) if self.cache is not None else {}
        out: dict[str, _Raw] = {}
        unless = "CASE WHEN k.version = c.version THEN NULL ELSE k.{} END"
        rows = self.conn.execute(
            "SELECT k.term, k.version, k.df, t.n,"
            f" {unless.format('seqs')}, {unless.format('tfs')}, {unless.format('lengths')},"
            " t.seqs, t.tfs, t.lengths"
            " FROM unnest(%s::text[], %s::int8[]) AS c(term, version)"
            " JOIN posting_packs k ON k.bank_id = %s AND k.term = c.term"
            " CROSS JOIN LATERAL (SELECT count(*),"
            f" {_AGGREGATES} FROM postings p WHERE p.bank_id = k.bank_id"
            " AND p.term = k.term AND p.seq > k.upto_seq) t(n, seqs, tfs, lengths)",
            (list(terms), [held[t][0] if t in held else -1 for t in terms], self.bank_id),
            binary=True,
        )
        for term, version, count, newer, *packed in rows:
            term, count, newer = str(term), int(count), int(newer)
            if count + newer != self.df[term] or newer > max(PACK_TAIL, count // 8):
                continue  # out of date (or a retain is committing right now): rebuilt
            if packed[0] is None:  # the cached copy is the current one
                raw = held[term][1]
            else:
                raw = _decode(count, *packed[:3])
                if self.cache is not None:
                    self.cache.put(self.bank_id, term, int(version), raw)
            if newer:  # the postings newer than the pack, after it
                tail = _unpack(*packed[3:])
                raw = (
                    np.concatenate([raw[0], tail[0]]),
                    np.concatenate([raw[1], tail[1]]),
                    np.concatenate([raw[2], tail[2]]),
                )
            out[term] = raw
        missing = [t for t in terms if t not in out]
        if missing:
            try:
                out.update(self._pack(missing))
            except psycopg.Error:
                out.update(self._fetch(missing, None))  # e.g. a read-only standby
        return out

    def _pack(self, terms: Sequence[str]) -> dict[str, _Raw]:
        """Build the terms' packs from their postings, and return them."""
        out = dict.fromkeys(terms, _NONE)
        with self.conn.transaction():
            # Every writer holds the bank's row FOR UPDATE: with it shared here, no write to
            # this bank's postings is half done while the packs are read and stored.
            self.conn.execute("SELECT 1 FROM banks WHERE id = %s FOR SHARE", (self.bank_id,))
            rows = self.conn.execute(
                f"SELECT p.term, max(p.seq), count(*), {_AGGREGATES} FROM postings p"
                " WHERE p.bank_id = %s AND p.term = ANY(%s) GROUP BY p.term",
                (self.bank_id, list(terms)),
                binary=True,
            ).fetchall()
            built = {str(r[0]): _unpack(*r[3:]) for r in rows}
            columns: list[Sequence[Any]] = [
                list(built),
                [int(r[1]) for r in rows],
                [int(r[2]) for r in rows],
                *(
                    zip(*[_encode(raw) for raw in built.values()], strict=True)
                    if rows
                    else [[]] * 3
                ),
            ]
            versions = dict(
                self.conn.execute(
                    "INSERT INTO posting_packs (bank_id, term, upto_seq, df, seqs, tfs, lengths)"
                    " SELECT %s, * FROM unnest(%s::text[], %s::int8[], %s::int8[],"
                    " %s::bytea[], %s::bytea[], %s::bytea[])"
                    " ON CONFLICT (bank_id, term) DO UPDATE SET upto_seq = excluded.upto_seq,"
                    " df = excluded.df, seqs = excluded.seqs, tfs = excluded.tfs,"
                    " lengths = excluded.lengths, version = nextval('posting_pack_versions')"
                    " RETURNING term, version",
                    (self.bank_id, *[list(c) for c in columns]),
                    binary=True,
                ).fetchall()
            )
        for term, raw in built.items():
            if self.cache is not None:
                self.cache.put(self.bank_id, term, int(versions[term]), raw)
            out[term] = raw
        return out

    def read(self, terms: Sequence[str]) -> None:
        todo = [t for t in terms if t not in self.whole]
        if not todo:
            return
        self.cost += sum(self.read_cost(t) for t in todo)
        packed = [t for t in todo if t in self.packed]
        plain = [t for t in todo if t not in self.packed]
        raw = self._unpacked(packed) if packed else {}
        if plain:
            raw.update(self._fetch(plain, None))
        for term in todo:
            self.whole[term] = raw[term]

    def _kept(self, seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]) -> _Arrays:
        """(seqs, scores) without the excluded memories."""
        if self.excluded is None or not len(gone := _positions(seqs, self.excluded)):
            return seqs, scores
        keep = np.ones(len(seqs), dtype=bool)
        keep[gone] = False
        return seqs[keep], scores[keep]

    def union(self, terms: Sequence[str]) -> _Arrays:
        """Every memory holding one of `terms` (read whole), with their summed scores, in seq
        order."""
        if len(terms) == 1:
            return self._kept(*self.scored(terms[0]))
        seqs = np.concatenate([self.whole[t][0] for t in terms])
        scores = np.concatenate([self.scored(t)[1] for t in terms])
        if len(seqs) == 0:
            return seqs.astype(np.int64), scores.astype(np.float64)
        low, high = int(seqs.min()), int(seqs.max())
        if high - low < 4 * len(seqs) + 1_000_000:
            # Counting into a dense range is much faster than sorting a long list, and
            # adds in the same order. Every contribution is > 0, so a sum of 0 is absence.
            summed = np.bincount(seqs - low, weights=scores, minlength=high - low + 1)
            at = np.flatnonzero(summed)
            return self._kept((at + low).astype(np.int64), summed[at].astype(np.float64))
        unique, inverse = np.unique(seqs, return_inverse=True)
        total = np.bincount(inverse, weights=scores, minlength=len(unique))
        return self._kept(unique.astype(np.int64), total.astype(np.float64))

    def top(
        self, order: Sequence[str], seeds: Sequence[str], depth: int, bound: dict[str, float]
    ) -> list[tuple[int, float]]:
        """The exact `depth` best of the memories holding one of `order`'s terms (rarest
        first, every list read whole), summed on an array over the seq range, without
        scoring every posting where that is provably useless.

        The best memories by the `seeds` terms (which hold at least `depth` between them)
        are scored in full: their k-th score is a lower bound ("cut") of the true k-th. The
        commonest terms whose bounds (weight x (k1 + 1)) sum below the cut cannot lift a
        memory holding none of the others to the top, so only the others are summed, and
        the memories the commonest terms could still lift past the cut are looked up in
        them, unless adding them all costs less than those lookups."""
        held = [t for t in order if len(self.whole[t][0])]
        if not held:
            return []
        low = min(int(self.whole[t][0][0]) for t in held)
        span = max(int(self.whole[t][0][-1]) for t in held) - low + 1
        if span > 4 * sum(len(self.whole[t][0]) for t in held) + 1_000_000:
            seqs, scores = self.union(order)  # too sparse a range for one array
            best = _best(seqs, scores, depth)
            return [(int(seqs[i]), float(scores[i])) for i in best]
        cut = float(np.finfo(np.float64).tiny)
        seeded, partial = self.union(seeds)
        if len(seeded) >= depth:
            probe = np.sort(seeded[_best(seeded, partial, SHORTLIST * depth)])
            full = self.added(order, probe)
            cut = max(cut, float(np.partition(full, len(full) - depth)[-depth]))
        k, reach = len(order), 0.0
        while k > 1 and reach + bound[order[k - 1]] < cut:
            k -= 1
            reach += bound[order[k]]
        finding, adding = order[:k], order[k:]
        total = np.zeros(span)
        for term in finding:
            at, score = self.scored(term)
            total[at - low] += score  # a term holds a memory once: no collisions
        excluded = None
        if self.excluded is not None:  # their sums go back to 0: absent
            inside = self.excluded[(self.excluded >= low) & (self.excluded < low + span)]
            excluded = inside - low
            total[excluded] = 0
        # The slack covers rounding in `cut - reach`: a few more candidates, never fewer.
        at = np.flatnonzero(total >= (cut - reach) * (1 - 1e-9))
        if adding and len(at) * len(adding) * LOOKUP_COST > sum(
            len(self.whole[t][0]) for t in adding
        ):
            for term in adding:  # cheaper than looking up every candidate
                added, score = self.scored(term)
                total[added - low] += score
            if excluded is not None:
                total[excluded] = 0
            at = np.flatnonzero(total >= cut)
            adding = []
        seqs, scores = at + low, total[at]
        if adding:
            scores = self.added(adding, seqs, scores)
        best = _best(seqs, scores, depth)
        return [(int(seqs[i]), float(scores[i])) for i in best]

    def added(
        self,
        terms: Sequence[str],
        seqs: npt.NDArray[np.int64],
        scores: npt.NDArray[np.float64] | None = None,
    ) -> npt.NDArray[np.float64]:
        """`scores` (0 when None) for `seqs` (sorted) with each term's scores added, in the
        order of `terms` (the order decides the last bits of a sum)."""
        found = self.lookup(terms, seqs)
        total = np.zeros(len(seqs)) if scores is None else scores
        for term in terms:
            total = total + found[term]
        return total

    def lookup(
        self, terms: Sequence[str], seqs: npt.NDArray[np.int64]
    ) -> dict[str, npt.NDArray[np.float64]]:
        """Each term's scores for `seqs` (sorted), 0 where it does not occur: from the lists
        read whole, the packs this process holds, and for the other terms one query."""
        rest = [t for t in terms if t not in self.whole]
        # Looking into a pack held here costs next to nothing; a pack read from the database
        # is worth it when cheaper than the lookups (and is held afterwards).
        held = [
            t
            for t in rest
            if t in self.packed and (self._held(t) or self.read_cost(t) <= PROBE_COST * len(seqs))
        ]
        raw = self._unpacked(held) if held else {}
        probe = [t for t in rest if t not in raw]
        if probe:
            raw.update(self._fetch(probe, seqs))
            self.cost += PROBE_COST * len(seqs) * len(probe)
        out: dict[str, npt.NDArray[np.float64]] = {}
        for term in terms:
            if term in self._scored and len(seqs) * 8 > len(self._scored[term][0]):
                out[term] = _align(self._scored[term], seqs)
            else:
                postings = self.whole[term] if term in self.whole else raw[term]
                out[term] = _align(self._score(term, _restrict(postings, seqs)), seqs)
        return out


def _positive(seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]) -> dict[int, float]:
    """{seq: score} of the memories that score."""
    return {int(q): float(v) for q, v in zip(seqs, scores, strict=True) if v > 0}


def _restrict(raw: _Raw, seqs: npt.NDArray[np.int64]) -> _Raw:
    """The postings of `seqs` (sorted) only."""
    at = _positions(raw[0], seqs)
    return raw[0][at], raw[1][at], raw[2][at]


def _best(
    seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], count: int
) -> npt.NDArray[np.intp]:
    """Positions of the `count` best by score (ties: lower seq first), best first; `seqs`
    must be ascending. Selects before sorting: the arrays can hold a million entries."""
    if count <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.intp)
    chosen = np.arange(len(scores))
    if len(scores) > count:
        cut = float(np.partition(scores, len(scores) - count)[len(scores) - count])
        above = np.flatnonzero(scores > cut)
        ties = np.flatnonzero(scores == cut)[: count - len(above)]
        chosen = np.concatenate([above, ties])
    return chosen[np.lexsort((seqs[chosen], -scores[chosen]))]


def _positions(seqs: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """Where the members of `wanted` (ascending) are in `seqs` (ascending). Searches the
    shorter in the longer: `seqs` can be a common term's million entries, `wanted` the few
    hundred memories of one session."""
    if len(seqs) == 0 or len(wanted) == 0:
        return np.zeros(0, dtype=np.intp)
    at = np.searchsorted(seqs, wanted)
    inside = at < len(seqs)
    at, wanted = at[inside], wanted[inside]
    found: npt.NDArray[np.intp] = at[seqs[at] == wanted]
    return found


def _align(
    postings: _Arrays,
    seqs: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """A term's (seq, score) arrays (seq ascending) laid over `seqs` (sorted): 0 where it
    does not occur. Searches the longer of the two: a common term's list can hold a million
    entries, the candidates a few hundred."""
    have, score = postings
    out = np.zeros(len(seqs))
    if len(have) == 0 or len(seqs) == 0:
        return out
    if len(have) > len(seqs):
        where = np.minimum(np.searchsorted(have, seqs), len(have) - 1)
        hit = have[where] == seqs
        out[hit] = score[where[hit]]
        return out
    at = np.searchsorted(seqs, have)
    inside = at < len(seqs)
    inside[inside] = seqs[at[inside]] == have[inside]
    out[at[inside]] = score[inside]
    return out


_HNSW_SETTINGS: weakref.WeakKeyDictionary[psycopg.Connection[Any], int] = (
    weakref.WeakKeyDictionary()
)
"""The hnsw.ef_search each pooled connection was given."""


class PostgresSearch:
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
    @staticmethod
    def _filter_sql(bank_id: int, where: SearchFilter) -> tuple[str, list[Any]]:
        """SQL conditions on `memories m` for a filter ("" when it lets everything through)."""
        parts: list[str] = []
        params: list[Any] = []
        if where.documents is not None:
            parts.append(
                "m.document_id IN (SELECT id FROM documents WHERE bank_id = %s AND name = ANY(%s))"
            )
            params += [bank_id, sorted(where.documents)]
        if where.tags:
            parts.append("m.tags && %s::text[]")
            params.append(sorted(where.tags))
        if where.kinds is not None:
            parts.append("m.kind = ANY(%s)")
            params.append(sorted(where.kinds))
        if where.since is not None:
            parts.append("m.t >= %s")
            params.append(where.since)
        if where.until is not None:
            parts.append("m.t <= %s")
            params.append(where.until)
        for document, cutoff in sorted(where.exclude.items()):
            said = "coalesce(m.said_at, m.t)"
            condition = "TRUE" if cutoff is None else f"({said} IS NULL OR {said} >= %s)"
            parts.append(
                "NOT (m.document_id IN (SELECT id FROM documents WHERE bank_id = %s"
                f" AND name = %s) AND {condition})"
            )
            params += [bank_id, document] + ([cutoff] if cutoff is not None else [])
        return " AND ".join(parts), params

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
            # The condition of _filter_sql, the other way round.
            said = "coalesce(m.said_at, m.t)"
            condition = "" if cutoff is None else f" AND ({said} IS NULL OR {said} >= %s)"
            parts.append(
                "SELECT m.seq FROM memories m WHERE m.document_id ="
                f" (SELECT id FROM documents WHERE bank_id = %s AND name = %s){condition}"
            )
            params += [bank_id, document] + ([cutoff] if cutoff is not None else [])
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
            sql, params = self._filter_sql(info[0], where)
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
            # what is read, so common terms still come from their packs.
            excluded = self._excluded(conn, bank_id, where)
            filter_sql, filter_params = (
                ("", []) if excluded is not None else self._filter_sql(bank_id, where)
            )
            lists = _Postings(
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
                    best = _best(seqs, scores, shortlist + 1)
                    left_out = float(scores[best[shortlist]])
                    keep = np.sort(best[:shortlist])
                    seqs, scores = seqs[keep], scores[keep]
                # Read whole where that is cheaper than looking up each candidate.
                lists.read([t for t in adding if lists.read_cost(t) <= PROBE_COST * len(seqs)])
                scores = lists.added(adding, seqs, scores)
                top = _best(seqs, scores, depth)
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
    """Memory for packs kept between searches (PackCache): a search then asks the database
    only whether they are still current. 0 keeps none."""

    def _pack_cache(self) -> PackCache[_Raw] | None:
        if self.lexical_pack_cache_bytes <= 0:
            return None
        cache = self.__dict__.get("_packs")
        if cache is None or cache.max_bytes != self.lexical_pack_cache_bytes:
            cache = self.__dict__["_packs"] = pack_cache(self.lexical_pack_cache_bytes)
        return cache

    lexical_pack_min: int | None = PACK_MIN
    """Terms held by at least this many memories are read from their pack (a row of packed
    arrays, `posting_packs`, built on first use and kept up to date by every write) rather
    than row by row; None reads every term row by row."""

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
            lists: _Postings = last[3]  # its lists hold the memories its filter leaves out
            if time.monotonic() - last[2] < RECENT_SECONDS:
                return _positive(wanted, lists.added(sorted(lists.weights), wanted))
        with self._conn() as conn:
            stats = self._bank_terms(conn, bank, terms)
            if stats is None or stats[0][1] == 0:
                return {}
            (bank_id, n, total), df = stats
            weights = self._weights(n, terms, df)
            if not weights:
                return {}
            lists = _Postings(
                conn, bank_id, total / n if total else 1.0, weights, "", (), df,
                self.lexical_pack_min, None, self._pack_cache(),
            )  # fmt: skip
            return _positive(wanted, lists.added(sorted(weights), wanted))

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
    def bulk_load(self, bank: str, build_memory: str | None = None) -> Iterator[None]:
        """Load many memories into a bank faster: its HNSW indexes are dropped for the load
        and built once after it, in parallel, with `build_memory` (default: what the index
        needs, see `index_build_memory`; `lamina copy` uses this)."""
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
            for dim, count in dims.items():
                memory = build_memory or index_build_memory(count, dim)
                self.ensure_vector_index(bank, dim, build_memory=memory)

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
            filter_sql, filter_params = self._filter_sql(bank_id, where)
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
                ef_search = max(depth, 100)
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
    def time_search(
        self,
        bank: str,
        start: datetime,
        end: datetime,
        reach: float,
        depth: int,
        where: SearchFilter,
    ) -> list[tuple[int, float]]:
        with self._conn() as conn:
            info = self._bank(conn, bank)
            if info is None or depth <= 0:
                return []
            bank_id = info[0]
            filter_sql, filter_params = self._filter_sql(bank_id, where)
            extra = f" AND {filter_sql}" if filter_sql else ""
            # Unordered, so that at most depth + 1 rows of the range are read however many it
            # holds (ordered by seq, a month of a million memories was read whole).
            inside = conn.execute(
                "SELECT m.seq, extract(epoch FROM m.t) FROM memories m"
                f" WHERE m.bank_id = %s AND m.t >= %s AND m.t < %s{extra} LIMIT %s",
                [bank_id, start, end, *filter_params, depth + 1],
            ).fetchall()
            if len(inside) > depth:
                return []  # more than it can propose: which of them matter, the others say
            out = sorted((int(s), float(t)) for s, t in inside)
            need = depth - len(out)
            if need > 0 and reach > 0:
                # The nearest on each side (an index range read from the range's edge), `need`
                # of each at most, then the nearest of both.
                before, after = start - timedelta(seconds=reach), end + timedelta(seconds=reach)
                near = conn.execute(
                    "SELECT m.seq, extract(epoch FROM m.t) FROM memories m"
                    f" WHERE m.bank_id = %s AND m.t < %s AND m.t >= %s{extra}"
                    " ORDER BY m.t DESC, m.seq LIMIT %s",
                    [bank_id, start, before, *filter_params, need],
                ).fetchall()
                near += conn.execute(
                    "SELECT m.seq, extract(epoch FROM m.t) FROM memories m"
                    f" WHERE m.bank_id = %s AND m.t >= %s AND m.t < %s{extra}"
                    " ORDER BY m.t, m.seq LIMIT %s",
                    [bank_id, end, after, *filter_params, need],
                ).fetchall()
                low, high = start.timestamp(), end.timestamp()
                timed = [(int(s), float(t)) for s, t in near]
                timed.sort(key=lambda st: (max(low - st[1], st[1] - high), st[0]))
                out += timed[:need]
        return out

    # -- fetching --------------------------------------------------------------------------
    def dense_scores(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        seqs: Sequence[int],
        embedder: str | None = None,
    ) -> dict[int, float]:
        if not seqs:
            return {}
        dim = int(vector.shape[0])
        condition = " AND m.embedder = %s" if embedder is not None else ""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.seq, -(m.embedding <#> %s) FROM memories m"
                " WHERE m.bank_id = (SELECT id FROM banks WHERE name = %s) AND m.seq = ANY(%s)"
                f" AND vector_dims(m.embedding) = {dim}{condition}",
                [np.asarray(vector, dtype=np.float32), bank, list(seqs)]
                + ([embedder] if embedder is not None else []),
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
