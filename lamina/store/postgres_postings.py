"""PostgreSQL's BM25 postings, read for one lexical search (see lamina.store.postgres_search).

Postings are rows of `postings` (bank, term, seq, tf, the memory's length); a bank's common
terms are also kept packed, one row per term (`posting_packs`, in the codec of
lamina.store.packs), built on first use by the reader and kept current by every write
(checked against `term_counts` at each read). A store keeps the packs it has read in memory
(PackCache), asking the database each time only whether they are still current.

`PostgresPostings` reads a query's lists whole (from packs where they are common) or only for
given candidates, and ranks them: summed on one array over the bank's seq range (`top`), with
the commonest terms only looked up for the memories they could still lift into the top k.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from .packs import PackCache, Raw, decode, encode, raw_bytes
from .ranking import align, best, contributions, positions, summed

__all__ = ["PostgresPostings", "pack_cache", "positive"]

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
IN_MEMORY_COST = 150_000
"""When reading every query term whole costs at most this much (about 1.5 million postings
sent from packs, or 15 million of packs held in memory), lexical search reads them all and
ranks in memory (`_Postings.top`): exact, and faster than proving which memories cannot
matter with lookups in the database."""
PACK_TAIL = 1_000
"""A pack is rebuilt once more than this many (and an eighth of its size) newer postings
have to be read beside it."""

_Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
_AGGREGATES = (
    "string_agg(int8send(p.seq), '' ORDER BY p.seq),"
    " string_agg(int4send(p.tf), '' ORDER BY p.seq),"
    " string_agg(int4send(p.terms), '' ORDER BY p.seq)"
)
"""A term's postings packed big-endian (int8send/int4send), so that they arrive as three
byte strings rather than as many Python objects."""


_NONE: Raw = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))


def _unpack(seqs: bytes | None, tfs: bytes | None, lengths: bytes | None) -> Raw:
    return (
        np.frombuffer(seqs or b"", dtype=">i8").astype(np.int64),
        np.frombuffer(tfs or b"", dtype=">i4").astype(np.int32),
        np.frombuffer(lengths or b"", dtype=">i4").astype(np.int32),
    )


def pack_cache(max_bytes: int) -> PackCache[Raw]:
    """A PackCache of this store's decoded packs."""
    return PackCache(max_bytes, raw_bytes)


class PostgresPostings:
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
        cache: PackCache[Raw] | None = None,
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
        self.whole: dict[str, Raw] = {}
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

    def _score(self, term: str, raw: Raw) -> _Arrays:
        """Each posting's contribution (lamina.store.ranking.contributions)."""
        seq, tf, length = raw
        return seq, contributions(tf, length, self.weights[term], self.avgdl)

    def scored(self, term: str) -> _Arrays:
        """A list read whole, scored."""
        if term not in self._scored:
            self._scored[term] = self._score(term, self.whole[term])
        return self._scored[term]

    def _fetch(self, terms: Sequence[str], seqs: npt.NDArray[np.int64] | None) -> dict[str, Raw]:
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

    def _unpacked(self, terms: Sequence[str]) -> dict[str, Raw]:
        """Whole lists of common terms: each pack with the postings newer than it; packs
        missing or out of date are built (or, where the database refuses the write, the
        postings read row by row). A pack the cache holds at its current version is not
        sent again."""
        held = self.cache.held(self.bank_id, terms) if self.cache is not None else {}
        out: dict[str, Raw] = {}
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
                raw = decode(count, *packed[:3])
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

    def _pack(self, terms: Sequence[str]) -> dict[str, Raw]:
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
                *(zip(*[encode(raw) for raw in built.values()], strict=True) if rows else [[]] * 3),
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
        if self.excluded is None or not len(gone := positions(seqs, self.excluded)):
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
        return self._kept(*summed(seqs, scores))

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
            return [(int(seqs[i]), float(scores[i])) for i in best(seqs, scores, depth)]
        cut = float(np.finfo(np.float64).tiny)
        seeded, partial = self.union(seeds)
        if len(seeded) >= depth:
            probe = np.sort(seeded[best(seeded, partial, SHORTLIST * depth)])
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
        return [(int(seqs[i]), float(scores[i])) for i in best(seqs, scores, depth)]

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
                out[term] = align(self._scored[term], seqs)
            else:
                postings = self.whole[term] if term in self.whole else raw[term]
                out[term] = align(self._score(term, _restrict(postings, seqs)), seqs)
        return out


def positive(seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]) -> dict[int, float]:
    """{seq: score} of the memories that score."""
    return {int(q): float(v) for q, v in zip(seqs, scores, strict=True) if v > 0}


def _restrict(raw: Raw, seqs: npt.NDArray[np.int64]) -> Raw:
    """The postings of `seqs` (sorted) only."""
    at = positions(raw[0], seqs)
    return raw[0][at], raw[1][at], raw[2][at]
