"""The in-process search of one bank, as recall once ran it: an oracle for the stores' search.

Every memory of the bank loaded into memory (vectors, a BM25 index over the texts, the fields
filters need), each channel ranked by scoring every memory; then the same fusion and budget as
recall's (lamina.bank.assemble). The tests check that the stores' searches, which read only
what a query needs, rank the same.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from lamina.bank.assemble import assemble
from lamina.bank.recall import (
    RecallOptions,
    RecallResult,
    distinctive,
    lexical_query,
    newest,
    query_entities,
    query_ranges,
    time_reach,
    time_scores_of,
    weighs,
    without_common,
)
from lamina.embed import Embedder
from lamina.memories import Memory, memory_tokens
from lamina.store.base import Store
from lamina.store.search import excluded
from lamina.text.entities import entity_terms
from lamina.text.lexical import BM25Index
from lamina.text.when import TimeRange


@dataclass
class BankIndex:
    bank: str
    dim: int | None = None
    ids: list[str] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)
    slot: dict[str, int] = field(default_factory=dict)
    lexical: BM25Index = field(default_factory=BM25Index)
    generation: tuple[int, int] = (-1, -1)
    last_seq: int = 0
    _alive: list[bool] = field(default_factory=list)
    _vector_rows: list[npt.NDArray[np.float32] | None] = field(default_factory=list)
    _matrix: npt.NDArray[np.float32] | None = None
    _has_vector: npt.NDArray[np.bool_] | None = None
    _times: npt.NDArray[np.float64] | None = None
    _alive_array: npt.NDArray[np.bool_] | None = None
    _embedders: set[str] = field(default_factory=set)
    _tokens: dict[int, int] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __len__(self) -> int:
        return len(self.ids)

    def refresh(self, store: Store) -> None:
        """Bring the index up to date with the store (a no-op when nothing changed)."""
        with self.lock:
            current = store.generation(self.bank)
            if current == self.generation:
                return
            try:
                if current[1] != self.generation[1]:
                    self._reset()
                for row in store.iter_memories(self.bank, after_seq=self.last_seq):
                    self._add(row.memory)
                    self.last_seq = max(self.last_seq, row.seq)
            except BaseException:
                self._reset()
                self.generation = (-1, -1)
                raise
            finally:
                self._matrix = None
            self.generation = current

    def _reset(self) -> None:
        self.dim = None
        self.ids.clear()
        self.memories.clear()
        self.slot.clear()
        self.lexical = BM25Index()
        self._alive.clear()
        self._vector_rows.clear()
        self._embedders.clear()
        self._tokens.clear()
        self.last_seq = 0
        self._matrix = None

    def _add(self, memory: Memory) -> None:
        old = self.slot.get(memory.id)
        if old is not None:
            self._alive[old] = False
        self.slot[memory.id] = len(self.ids)
        self.ids.append(memory.id)
        self.memories.append(memory)
        self._alive.append(True)
        vector = memory.embedding
        if vector is not None:
            if self.dim is None:
                self.dim = int(vector.shape[0])
            if vector.shape[0] != self.dim:
                vector = None  # a vector of another embedder: treated as missing
        self._vector_rows.append(vector)
        if vector is not None and memory.embedder:
            self._embedders.add(memory.embedder)
        self.lexical.add(memory.text, entity_terms(memory.entities))

    def _build(self) -> None:
        n = len(self.ids)
        dim = self.dim or 1
        matrix = np.zeros((n, dim), dtype=np.float32)
        has = np.zeros(n, dtype=bool)
        for i, row in enumerate(self._vector_rows):
            if row is not None:
                matrix[i] = row
                has[i] = True
        self._matrix = matrix
        self._has_vector = has
        self._alive_array = np.array(self._alive, dtype=bool)
        self._times = np.array(
            [m.time.timestamp() if m.time is not None else np.nan for m in self.memories],
            dtype=np.float64,
        )

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        if self._matrix is None:
            self._build()
        assert self._matrix is not None
        return self._matrix

    @property
    def has_vector(self) -> npt.NDArray[np.bool_]:
        if self._matrix is None:
            self._build()
        assert self._has_vector is not None
        return self._has_vector

    @property
    def times(self) -> npt.NDArray[np.float64]:
        if self._matrix is None:
            self._build()
        assert self._times is not None
        return self._times

    def alive(self) -> npt.NDArray[np.bool_]:
        if self._matrix is None:
            self._build()
        assert self._alive_array is not None
        return self._alive_array.copy()

    def embedders(self) -> set[str]:
        """The embedders whose vectors the index holds."""
        return set(self._embedders)

    def tokens(self, slot: int) -> int:
        """Tokens of a memory's text (counted once per process)."""
        count = self._tokens.get(slot)
        if count is None:
            memory = self.memories[slot]
            count = memory_tokens(memory)
            self._tokens[slot] = count
        return count

    def mask(
        self,
        documents: set[str] | None = None,
        tags: set[str] | None = None,
        kinds: set[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        exclude: Mapping[str, datetime | None] | None = None,
    ) -> npt.NDArray[np.bool_]:
        keep = self.alive()
        if exclude:
            keep &= np.array([not excluded(m, exclude) for m in self.memories], dtype=bool)
        if documents is not None:
            keep &= np.array([m.document in documents for m in self.memories], dtype=bool)
        if tags:
            keep &= np.array([bool(tags.intersection(m.tags)) for m in self.memories], dtype=bool)
        if kinds is not None:
            keep &= np.array([m.kind in kinds for m in self.memories], dtype=bool)
        if since is not None or until is not None:
            times = self.times
            ok = ~np.isnan(times)
            if since is not None:
                ok &= times >= since.timestamp()
            if until is not None:
                ok &= times <= until.timestamp()
            keep &= ok
        return keep


def _top(
    scores: npt.NDArray[np.floating[Any]], candidates: npt.NDArray[np.bool_], depth: int
) -> list[int]:
    """The best `depth` candidates by score, best first (ties: lower slot first)."""
    masked = np.where(candidates, scores, -np.inf)
    count = int(candidates.sum())
    if count == 0:
        return []
    depth = min(depth, count)
    if depth < len(masked):
        part = np.argpartition(-masked, depth - 1)[:depth]
    else:
        part = np.arange(len(masked))
    order = part[np.lexsort((part, -masked[part]))]
    return [int(i) for i in order if np.isfinite(masked[i])]


def channel_rankings(
    index: BankIndex,
    query: str,
    query_vector: npt.NDArray[np.float32] | None,
    keep: npt.NDArray[np.bool_],
    depth: int,
    ranges: Sequence[TimeRange] = (),
    entities: Sequence[str] = (),
    lexical_channel: bool = True,
) -> dict[str, tuple[list[int], npt.NDArray[np.float32]]]:
    """Each channel's ranking (slots, best first) and its raw scores; the entity channel only
    when the query names entities that some memory names too, the dense one only given a
    query vector, the lexical one unless `lexical_channel` is false."""
    out: dict[str, tuple[list[int], npt.NDArray[np.float32]]] = {}
    if lexical_channel:
        lexical = index.lexical.scores(query)
        out["lexical"] = (_top(lexical, keep & (lexical > 0), depth), lexical)
    if entities:
        named = index.lexical.scores(entity_terms(entities))
        ranking = _top(named, keep & (named > 0), depth)
        if ranking:
            out["entities"] = (ranking, named)
    if query_vector is not None and index.dim == query_vector.shape[0] and len(index):
        dense = index.matrix @ query_vector
        out["dense"] = (_top(dense, keep & index.has_vector, depth), dense)
    if ranges and len(index):
        # As the stores do it (`recall_from_store`): the time channel proposes memories,
        # then ranks every proposed memory it scores.
        scores = time_scores_of(index.times, ranges)
        proposed = time_proposals(index.times, keep, ranges, depth)
        proposed.update(slot for ranking, _scores in out.values() for slot in ranking)
        dated = sorted((s for s in proposed if scores[s] > 0), key=lambda s: (-scores[s], s))
        out = {"time": (dated[:depth], scores), **out}
    return out


def time_proposals(
    times: npt.NDArray[np.float64],
    keep: npt.NDArray[np.bool_],
    ranges: Sequence[TimeRange],
    depth: int,
) -> set[int]:
    """The memories the time channel adds to the candidates, as a store's `time_search` finds
    them: for each range, every memory inside it, then the nearest outside it (within
    `time_reach`) up to `depth` in all; nothing for a range holding more than `depth`. Inside
    a range every memory scores the same, so there the channel cannot say which few matter
    (taking the first `depth` in storage order left the rest of a long range out for no
    reason): the other channels' candidates inside it still get its score."""
    out: set[int] = set()
    known = ~np.isnan(times)
    for r in ranges:
        start, end = r.start.timestamp(), r.end.timestamp()
        with np.errstate(invalid="ignore"):
            inside = keep & known & (times >= start) & (times < end)
            count = int(inside.sum())
            if count > depth:
                continue
            out.update(int(s) for s in np.flatnonzero(inside))
            reach = time_reach(r)
            need = depth - count
            if need <= 0 or reach <= 0:
                continue
            before = keep & known & (times < start) & (times >= start - reach)
            after = keep & known & (times >= end) & (times < end + reach)
        near = np.flatnonzero(before | after)
        distance = np.maximum(start - times[near], times[near] - end)
        order = np.lexsort((near, distance))[:need]
        out.update(int(s) for s in near[order])
    return out


def recall_from_index(
    index: BankIndex,
    query: str,
    embedder: Embedder | None,
    options: RecallOptions,
) -> RecallResult:
    channels, considered = index_channels(index, query, embedder, options)
    return assemble(
        query,
        channels,
        index.memories.__getitem__,
        index.tokens,
        considered,
        options,
        len(index.lexical),
        lambda terms: (len(index.lexical), {t: index.lexical.df(t) for t in terms}),
    )


def index_channels(
    index: BankIndex,
    query: str,
    embedder: Embedder | None,
    options: RecallOptions,
) -> tuple[dict[str, tuple[list[int], npt.NDArray[np.float32]]], int]:
    """Each channel's ranking of the index's slots and its scores, and how many memories the
    filters keep."""
    keep = index.mask(
        documents=set(options.documents) if options.documents is not None else None,
        tags=set(options.tags) if options.tags else None,
        kinds=set(options.kinds) if options.kinds is not None else None,
        since=options.since,
        until=options.until,
        exclude=options.exclude,
    )
    found = query_entities(query, options)
    vector = None
    dense = weighs(options, "dense") and embedder is not None and index.dim is not None
    if embedder is not None and dense and query.strip():
        size = len(index.lexical)
        tail = newest(query, options.dense_chars)
        vector = embedder.embed_query(without_common(tail, found, index.lexical.df, size))
    ranges = query_ranges(query, options)
    entities = distinctive(found, index.lexical.df, len(index.lexical))
    lexical = lexical_query(query, found, index.lexical.df, len(index.lexical))
    channels = channel_rankings(
        index, lexical, vector, keep, options.depth, ranges, entities, weighs(options, "lexical")
    )
    return channels, int(keep.sum())
