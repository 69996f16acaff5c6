"""A recall plan: one query's searches, asked of the store once however often it is recalled.

The store ranks each channel (`SearchStore`: lexical, entities, time, dense); the fusion then
needs every channel's score for every memory any channel proposed, so the proposed memories are
scored here too. The channels' searches run at once (the lexical one in the calling thread,
the others on the search threads), and so do the scorings.

A plan keeps what the store answered, so recalling again (the prompt hook answers without the
dense channel first, then adds it when the query's vector is ready in time) asks only for what
is new: the dense ranking, and the scores, dates and memories of the candidates it adds. What
the store answers depends only on the arguments, so each recall is the one a fresh plan gives.
A plan is for one query in one process, not for longer: it never sees the bank change.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..embed import Embedder
else:
    from .._lazy import numpy as np

from ..memories import Memory, memory_tokens
from ..store.search import SearchFilter, SearchStore
from ..text.entities import entity_terms
from ..text.lexical import tokenize
from .assemble import assemble, judge_floor
from .recall import (
    FloorCheck,
    RecallOptions,
    RecallResult,
    distinctive,
    lexical_query,
    newest,
    query_entities,
    query_ranges,
    search_filter,
    time_reach,
    time_scores_of,
    weighs,
    without_common,
)

__all__ = ["RecallPlan", "Searched", "recall_from_store"]

_PAGE = 32
"""Memories fetched at a time, in fused order."""
_JUDGED = 8
"""Memories whose words `RecallPlan.judge` reads: the best of each channel (a recall fills a
block with about as many)."""
_WORKERS = 4
"""Threads running a recall's store searches at once (each on its own pooled connection)."""
_workers: tuple[int, ThreadPoolExecutor] | None = None
_workers_lock = threading.Lock()

T = TypeVar("T")
Ranking = list[tuple[int, float]]


def _executor() -> ThreadPoolExecutor:
    """The process's search threads (made again in a forked child, which has none)."""
    global _workers
    with _workers_lock:
        if _workers is None or _workers[0] != os.getpid():
            _workers = (os.getpid(), ThreadPoolExecutor(_WORKERS, "lamina-search"))
        return _workers[1]


class _Inline:
    """Runs each job at once, in the calling thread: for a store with one connection that
    threads cannot share (an SQLite `:memory:` database)."""

    @staticmethod
    def submit(job: Callable[..., T], *args: Any) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(job(*args))
        except Exception as error:  # raised where the result is asked for, as a thread's
            done.set_exception(error)
        return done


@dataclass(frozen=True, slots=True)
class Searched:
    """What the store's searches gave one recall: each channel's ranking of the candidates
    (slots: positions in `pool`, the candidates' seqs in order) and its score for every
    candidate, the memories passing the filter, and the candidates' memories on request."""

    pool: list[int]
    channels: dict[str, tuple[list[int], npt.NDArray[np.float32]]]
    considered: int
    memory_at: Callable[[int], Memory | None]
    tokens_at: Callable[[int], int]
    prefetch: Callable[[list[int]], None]


class RecallPlan:
    """One query's recall from `store` (see the module): `recall(None)` without the dense
    channel, `recall(embedder)` with it; `dense_text` is what the dense channel embeds (for
    a caller that embeds it ahead)."""

    def __init__(self, store: SearchStore, bank: str, query: str, options: RecallOptions) -> None:
        self.store, self.bank, self.query, self.options = store, bank, query, options
        self.where: SearchFilter = search_filter(options)
        self.ranges = query_ranges(query, options)
        self.entities = query_entities(query, options)
        self.counts: tuple[int, Mapping[str, int]] = (
            store.term_counts(bank, entity_terms(self.entities)) if self.entities else (0, {})
        )
        self.terms = tokenize(lexical_query(query, self.entities, self._df, self.counts[0]))
        self._workers = _executor() if getattr(store, "search_threads", True) else _Inline()
        self._found: dict[str, Ranking] | None = None
        self._named: list[str] = []
        self._considered = 0
        self._scores: dict[str, tuple[set[int], dict[int, float]]] = {}
        self._times: tuple[set[int], dict[int, float]] = (set(), {})
        self._memories: dict[int, Memory] = {}
        self._gone: set[int] = set()
        self._tokens: dict[int, int] = {}
        self._term_counts: dict[tuple[str, ...], tuple[int, Mapping[str, int]]] = {}
        self.pool: list[int] = []
        """The candidates (seqs) of the last search: what any channel proposed."""

    def _df(self, term: str) -> int:
        return self.counts[1].get(term, 0)

    @property
    def dense_text(self) -> str:
        """The text the dense channel embeds: the newest `dense_chars` of the query, the
        names most memories say as "they" (see `without_common`)."""
        text = newest(self.query, self.options.dense_chars)
        return without_common(text, self.entities, self._df, self.counts[0])

    def recall(self, embedder: Embedder | None) -> RecallResult:
        """The recall, with the dense channel when given an `embedder` (and it weighs)."""
        found = self.search(embedder)
        return assemble(
            self.query,
            found.channels,
            found.memory_at,
            found.tokens_at,
            found.considered,
            self.options,
            self.counts[0],
            self._counts,
            found.prefetch,
        )

    def judge(self, embedder: Embedder, among: Sequence[int]) -> FloorCheck | None:
        """How this plan's query measures against its floor (`RecallOptions.floor`; None
        without one) without scanning the bank by meaning: its vector's best score among the
        memories `among` (another plan's candidates) and its own best lexical matches, their
        best coverage of its terms, and whether its time words find a memory. The prompt hook
        judges a prompt alone this way beside the recall of the prompt with its last turns."""
        floor = self.options.floor
        if floor is None or floor.off:
            return None
        found = self._rankings()
        lexical = [seq for seq, _score in found.get("lexical", [])[:_PAGE]]
        seqs = sorted(set(among) | set(lexical))
        vector = embedder.embed_query(self.dense_text)
        dense = self.store.dense_scores(self.bank, vector, seqs, embedder.name)
        best = sorted(dense, key=lambda seq: -dense[seq])[:_JUDGED]
        read = self.store.memories_by_seq(
            self.bank, sorted(set(lexical[:_JUDGED]) | set(best)), with_embeddings=False
        )
        texts = [m.text for m in read.values()]
        dated = bool(found.get("time"))
        return judge_floor(self.query, texts, list(dense.values()), dated, floor, self._counts)

    def _counts(self, terms: Sequence[str]) -> tuple[int, Mapping[str, int]]:
        key = tuple(terms)
        if key not in self._term_counts:
            self._term_counts[key] = self.store.term_counts(self.bank, terms)
        return self._term_counts[key]

    def _embed_and_search(self, model: Embedder) -> tuple[npt.NDArray[np.float32], Ranking]:
        # The query is embedded on a search thread, while the calling one reads the postings.
        vector = model.embed_query(self.dense_text)
        depth, where = self.options.depth, self.where
        return vector, self.store.dense_search(self.bank, vector, depth, where, model.name)

    def _entity_search(self) -> tuple[list[str], Ranking]:
        """The entity channel: the query's distinctive entities (as terms) and their ranking."""
        named = entity_terms(distinctive(self.entities, self._df, self.counts[0]))
        if not named:
            return named, []
        return named, self.store.lexical_search(self.bank, named, self.options.depth, self.where)

    def _time_search(self) -> Ranking:
        near: dict[int, float] = {}
        for r in self.ranges:
            near.update(
                self.store.time_search(
                    self.bank, r.start, r.end, time_reach(r), self.options.depth, self.where
                )
            )
        return list(near.items())

    def _rankings(self) -> dict[str, Ranking]:
        """The lexical, entity and time rankings (searched on the first call only)."""
        if self._found is not None:
            return self._found
        store, bank, options, workers = self.store, self.bank, self.options, self._workers
        entity_job = workers.submit(self._entity_search) if self.entities else None
        time_job = workers.submit(self._time_search) if self.ranges else None
        count_job = workers.submit(store.count_memories, bank, self.where)
        found: dict[str, Ranking] = {}
        if weighs(options, "lexical"):
            found["lexical"] = store.lexical_search(bank, self.terms, options.depth, self.where)
        if entity_job is not None:
            self._named, ranking = entity_job.result()
            if ranking:
                found["entities"] = ranking
        if time_job is not None:
            found["time"] = time_job.result()
        self._considered = count_job.result()
        self._found = found
        return found

    def _scored(self, channel: str, terms: Sequence[str], seqs: Sequence[int]) -> dict[int, float]:
        """BM25 of `seqs` for `terms` (absent: 0); the store is asked about new seqs only."""
        asked, known = self._scores.setdefault(channel, (set(), {}))
        new = [seq for seq in seqs if seq not in asked]
        if new:
            known.update(self.store.lexical_scores(self.bank, terms, new))
            asked.update(new)
        return {seq: known[seq] for seq in seqs if seq in known}

    def _dates(self, seqs: Sequence[int]) -> dict[int, float]:
        asked, known = self._times
        new = [seq for seq in seqs if seq not in asked]
        if new:
            known.update(self.store.memory_times(self.bank, new))
            asked.update(new)
        return {seq: known[seq] for seq in seqs if seq in known}

    def search(self, embedder: Embedder | None) -> Searched:
        """Each channel's ranking of the candidates and its scores of all of them."""
        options, workers, depth = self.options, self._workers, self.options.depth
        dense_job = (
            workers.submit(self._embed_and_search, embedder)
            if weighs(options, "dense") and embedder is not None and self.query.strip()
            else None
        )
        found = dict(self._rankings())
        vector: npt.NDArray[np.float32] | None = None
        if dense_job is not None:
            vector, found["dense"] = dense_job.result()
        pool = sorted({seq for ranking in found.values() for seq, _score in ranking})
        self.pool = pool
        slot = {seq: i for i, seq in enumerate(pool)}

        # Each channel scores what it ranked; the pool's other members are scored on request.
        def rest(name: str) -> list[int]:
            known = {seq for seq, _score in found[name]}
            return [seq for seq in pool if seq not in known]

        scoring: dict[str, Future[dict[int, float]]] = {}
        if "entities" in found and (missing := rest("entities")):
            scoring["entities"] = workers.submit(self._scored, "entities", self._named, missing)
        if vector is not None and embedder is not None and (missing := rest("dense")):
            scoring["dense"] = workers.submit(
                self.store.dense_scores, self.bank, vector, missing, embedder.name
            )
        times_job = workers.submit(self._dates, pool) if self.ranges else None
        rescored: dict[str, dict[int, float]] = {}
        if "lexical" in found and (missing := rest("lexical")):
            rescored["lexical"] = self._scored("lexical", self.terms, missing)
        rescored.update({name: job.result() for name, job in scoring.items()})

        channels: dict[str, tuple[list[int], npt.NDArray[np.float32]]] = {}
        if times_job is not None:
            times = np.full(len(pool), np.nan, dtype=np.float64)
            for seq, t in times_job.result().items():
                times[slot[seq]] = t
            scores = time_scores_of(times, self.ranges)
            dated = [i for i in range(len(pool)) if scores[i] > 0]
            channels["time"] = (sorted(dated, key=lambda i: (-scores[i], i))[:depth], scores)
        for name in ("lexical", "entities", "dense"):
            if name not in found:
                continue
            scores = np.zeros(len(pool), dtype=np.float32)
            known = dict(found[name])
            known.update(rescored.get(name, {}))
            for seq, score in known.items():
                scores[slot[seq]] = score
            ranked = [slot[seq] for seq, _score in found[name]]
            if name == "dense":
                ranked.sort(key=lambda i: (-scores[i], i))
            channels[name] = (ranked, scores)
        order: list[int] = []
        fetched, gone = self._memories, self._gone

        def memory_at(i: int) -> Memory | None:
            seq = pool[i]
            if seq not in fetched and seq not in gone:
                # Fetched along the fused order, a page at a time: most recalls need one page.
                start = order.index(i)
                page = [pool[j] for j in order[start : start + _PAGE]]
                page = [s for s in page if s not in fetched and s not in gone]
                fetched.update(self.store.memories_by_seq(self.bank, page, with_embeddings=False))
                gone.update(s for s in page if s not in fetched)
            return None if seq in gone else fetched[seq]

        def tokens_at(i: int) -> int:
            seq = pool[i]
            if seq not in self._tokens:
                memory = memory_at(i)
                self._tokens[seq] = memory_tokens(memory) if memory is not None else 0
            return self._tokens[seq]

        return Searched(pool, channels, self._considered, memory_at, tokens_at, order.extend)


def recall_from_store(
    store: SearchStore, bank: str, query: str, embedder: Embedder | None, options: RecallOptions
) -> RecallResult:
    """One recall of `query` from `store` (`MemoryBank.recall` sets the options it implies:
    the bank's corrections and fusion model)."""
    return RecallPlan(store, bank, query, options).recall(embedder)
