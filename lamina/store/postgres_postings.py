"""PostgreSQL's BM25 postings, read for one lexical search (see lamina.store.postgres_search).

Postings are kept in per-term blocks (`posting_blocks`, written by
lamina.store.postgres_blocks): a term's list is a range of the blocks' key. A store keeps the
lists of the common terms it has read in memory (PackCache), asking the database each time
only whether they are still current (term_counts.version) and, when not, for the blocks
written since.

`PostgresPostings` reads a query's lists whole (from memory where they are common and held)
or only for given candidates (the blocks that hold them), and ranks them: summed on one
array over the bank's seq range (`top`), with the commonest terms only looked up for the
memories they could still lift into the top k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from .packs import PackCache, Raw, concatenated, decode_blocks, raw_bytes
from .ranking import align, best, contributions, positions, summed

__all__ = ["Held", "PostgresPostings", "pack_cache", "positive"]

PROBE_COST = 10
"""Looking one candidate up in a term's postings costs about this many postings read whole."""
SHORTLIST = 4
"""Candidates scored in full, per result wanted, before proving the rest cannot matter."""
PACK_MIN = 2_000
"""Terms held by at least this many memories are read whole and kept in memory between
searches (their "pack", see PackCache)."""
PACK_COST = 0.1
"""A posting of such a term read from the database costs about this much of one looked up
for a candidate (the cost model of the row-per-posting layout, kept so rankings under the
work bound do not change)."""
CACHED_COST = 0.01
"""... and one of a list this process holds already (see PackCache), this much."""
LOOKUP_COST = 16
"""Looking a memory up in a list held in memory costs about as much as scoring and adding
this many of its postings."""
IN_MEMORY_COST = 150_000
"""When reading every query term whole costs at most this much (about 1.5 million postings
sent from packs, or 15 million of packs held in memory), lexical search reads them all and
ranks in memory (`_Postings.top`): exact, and faster than proving which memories cannot
matter with lookups in the database."""
_Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]


_NONE: Raw = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))


def pack_cache(max_bytes: int) -> PackCache[Held]:
    """A PackCache of the common terms' lists this store holds."""
    return PackCache(max_bytes, held_bytes)


class PostgresPostings:
    """The postings of a query's terms and their BM25 contributions, per term as arrays in
    seq order: whole lists read once (a common term's held in memory or sent), or only the
    entries of given candidates."""

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
        cache: PackCache[Held] | None = None,
    ) -> None:
        self.conn, self.bank_id, self.avgdl, self.weights = conn, bank_id, avgdl, weights
        self.cache = cache
        self.filter_sql, self.filter_params = filter_sql, filter_params
        self.excluded = excluded if excluded is not None and len(excluded) else None
        """Sorted seqs left out of every ranking (the filter's, when it only excludes)."""
        self.df = df or {}
        # Lists held in memory hold every memory: a filtered search reads the blocks and
        # keeps what the filter lets through.
        self.packed = (
            set()
            if filter_sql or pack_min is None
            else {t for t, n in self.df.items() if n >= pack_min}
        )
        self._passing: npt.NDArray[np.int64] | None = None
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

    def _allowed(self) -> npt.NDArray[np.int64]:
        """The sorted seqs the filter lets through (read once)."""
        if self._passing is None:
            row = self.conn.execute(
                "SELECT string_agg(int8send(m.seq), '' ORDER BY m.seq) FROM memories m"
                f" WHERE m.bank_id = %s AND {self.filter_sql}",
                [self.bank_id, *self.filter_params],
                binary=True,
            ).fetchone()
            data = bytes(row[0]) if row is not None and row[0] is not None else b""
            self._passing = np.frombuffer(data, dtype=">i8").astype(np.int64)
        return self._passing

    def _fetch(self, terms: Sequence[str], seqs: npt.NDArray[np.int64] | None) -> dict[str, Raw]:
        """The terms' postings from their blocks: all of them (through the filter), or only
        those of `seqs` (from the blocks whose range holds one of them)."""
        if seqs is None:
            rows = self.conn.execute(
                "SELECT term, n, seqs, tfs, lengths FROM posting_blocks"
                " WHERE bank_id = %s AND term = ANY(%s)",
                (self.bank_id, list(terms)),
                binary=True,
            )
        else:
            rows = self.conn.execute(
                "SELECT b.term, b.n, b.seqs, b.tfs, b.lengths FROM posting_blocks b"
                " JOIN (SELECT DISTINCT t.term, k.first_seq FROM unnest(%s::text[]) AS t(term)"
                "  CROSS JOIN unnest(%s::int8[]) AS s(seq) CROSS JOIN LATERAL (SELECT"
                "  k.first_seq, k.last_seq FROM posting_blocks k WHERE k.bank_id = %s"
                "  AND k.term = t.term AND k.first_seq <= s.seq ORDER BY k.first_seq DESC"
                "  LIMIT 1) k WHERE k.last_seq >= s.seq) w"
                " ON b.term = w.term AND b.first_seq = w.first_seq WHERE b.bank_id = %s",
                (list(terms), seqs.tolist(), self.bank_id, self.bank_id),
                binary=True,
            )
        found: dict[str, list[tuple[int, int, bytes, bytes, bytes]]] = {}
        for term, count, packed, tfs, lengths in rows:
            first = int.from_bytes(bytes(packed[:8]), "little", signed=True)
            found.setdefault(str(term), []).append(
                (first, int(count), bytes(packed), bytes(tfs), bytes(lengths))
            )
        out = dict.fromkeys(terms, _NONE)
        for term, blocks in found.items():
            blocks.sort()
            raw = decode_blocks([b[1:] for b in blocks])
            if seqs is not None:
                raw = _restrict(raw, seqs)
            elif self.filter_sql:
                raw = _restrict(raw, self._allowed())
            out[term] = raw
        return out

    def _unpacked(self, terms: Sequence[str]) -> dict[str, Raw]:
        """Whole lists of common terms, kept in this process's cache between searches. The
        database is asked only for each term's version (term_counts.version, newer than
        every block of the term) and, where the held copy is older, for the term's block
        keys and the blocks written since that copy was read: the list is the blocks held
        and the blocks sent, in key order."""
        held = self.cache.held(self.bank_id, terms) if self.cache is not None else {}
        rows = self.conn.execute(
            "SELECT c.term, c.version, b.first_seq, b.n,"
            " CASE WHEN b.version > q.version THEN b.seqs END,"
            " CASE WHEN b.version > q.version THEN b.tfs END,"
            " CASE WHEN b.version > q.version THEN b.lengths END"
            " FROM unnest(%s::text[], %s::int8[]) AS q(term, version)"
            " JOIN term_counts c ON c.bank_id = %s AND c.term = q.term"
            " LEFT JOIN LATERAL (SELECT k.first_seq, k.n, k.version, k.seqs, k.tfs, k.lengths"
            "  FROM posting_blocks k WHERE c.version <> q.version AND k.bank_id = c.bank_id"
            # OFFSET 0 keeps the subquery whole, so a term whose held copy is current is one
            # test, not a scan of its blocks.
            "  AND k.term = c.term OFFSET 0) b ON true",
            (list(terms), [held[t][0] if t in held else -1 for t in terms], self.bank_id),
            binary=True,
        )
        version: dict[str, int] = {}
        listed: dict[str, list[tuple[int, int, Any, Any, Any]]] = {}
        for term, current, first, count, *packed in rows:
            term = str(term)
            version[term] = int(current)
            if first is not None:
                listed.setdefault(term, []).append((int(first), int(count), *packed))
        out: dict[str, Raw] = {}
        stale: list[str] = []
        for term in terms:
            if term not in version:
                out[term] = _NONE
            elif term not in listed and term in held and held[term][0] == version[term]:
                out[term] = held[term][1].raw  # the copy held is current
            else:
                kept = held[term][1] if term in held else None
                made = _assembled(sorted(listed.get(term, [])), kept)
                if made is None:
                    stale.append(term)
                    continue
                out[term] = made.raw
                if self.cache is not None:
                    self.cache.put(self.bank_id, term, version[term], made)
        if stale:  # a block neither sent nor held (never expected): read whole
            out.update(self._fetch(stale, None))
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


@dataclass(frozen=True)
class Held:
    """A common term's whole list as this process holds it between searches: the postings,
    and where each of its blocks (by first seq) lies in them."""

    raw: Raw
    blocks: dict[int, tuple[int, int]]


def held_bytes(held: Held) -> int:
    return raw_bytes(held.raw) + 100 * len(held.blocks)


def _assembled(listed: Sequence[tuple[int, int, Any, Any, Any]], kept: Held | None) -> Held | None:
    """A list from its blocks' (first_seq, n, seqs, tfs, lengths) in key order, the columns
    None where the block is the one `kept` holds; None when a block is neither."""
    parts: list[Raw] = []
    blocks: dict[int, tuple[int, int]] = {}
    sent: list[tuple[int, bytes, bytes, bytes]] = []
    at = 0
    for first, count, seqs, tfs, lengths in listed:
        if seqs is None:
            if kept is None or first not in kept.blocks:
                return None
            if sent:
                parts.append(decode_blocks(sent))
                sent = []
            start, end = kept.blocks[first]
            if end - start != count:
                return None
            raw = kept.raw
            parts.append((raw[0][start:end], raw[1][start:end], raw[2][start:end]))
        else:
            sent.append((count, bytes(seqs), bytes(tfs), bytes(lengths)))
        blocks[first] = (at, at + count)
        at += count
    if sent:
        parts.append(decode_blocks(sent))
    return Held(concatenated(parts), blocks)


def _restrict(raw: Raw, seqs: npt.NDArray[np.int64]) -> Raw:
    """The postings of `seqs` (sorted) only."""
    at = positions(raw[0], seqs)
    return raw[0][at], raw[1][at], raw[2][at]
