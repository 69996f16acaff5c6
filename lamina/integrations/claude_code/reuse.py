"""The cold prompt hook recalls twice for one query: a lexical-only answer first (ready if the
model is late), then the full one with the dense channel. `ReusingStore` stands between those
recalls and the store and gives the second the answers the first already got: the lexical,
entity and time searches, the term and memory counts, the lexical scores, dates and memories
of the candidates (only the candidates the dense channel adds are asked for). What the store
answers depends only on the arguments, so the full answer is the one a fresh recall gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ...memories import Memory
    from ...store.search import SearchFilter, SearchStore

__all__ = ["ReusingStore"]

T = TypeVar("T")
V = TypeVar("V")


class ReusingStore:
    """A `SearchStore` over `store` that remembers its answers, for the recalls of one query
    in one process (not for longer: it never sees the bank change)."""

    def __init__(self, store: SearchStore) -> None:
        self.store = store
        self._answers: dict[tuple[object, ...], Any] = {}
        self._by_seq: dict[tuple[object, ...], tuple[set[int], dict[int, Any]]] = {}

    def _once(self, key: tuple[object, ...], answer: Callable[[], T]) -> T:
        if key not in self._answers:
            self._answers[key] = answer()
        found: T = self._answers[key]
        return found

    def _per_seq(
        self,
        key: tuple[object, ...],
        seqs: Sequence[int],
        answer: Callable[[list[int]], dict[int, V]],
    ) -> dict[int, V]:
        """An answer per memory: the store is asked only about memories not asked before."""
        asked, known = self._by_seq.setdefault(key, (set(), {}))
        new = [seq for seq in seqs if seq not in asked]
        if new:
            known.update(answer(new))
            asked.update(new)
        return {seq: known[seq] for seq in seqs if seq in known}

    def searchable(self, bank: str) -> bool:
        return self._once(("searchable", bank), lambda: self.store.searchable(bank))

    def lexical_search(
        self, bank: str, terms: Sequence[str], depth: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        key = ("lexical", bank, tuple(terms), depth, repr(where))
        return list(self._once(key, lambda: self.store.lexical_search(bank, terms, depth, where)))

    def lexical_scores(
        self, bank: str, terms: Sequence[str], seqs: Sequence[int]
    ) -> dict[int, float]:
        return self._per_seq(
            ("lexical_scores", bank, tuple(terms)),
            seqs,
            lambda new: self.store.lexical_scores(bank, terms, new),
        )

    def term_counts(self, bank: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        size, counts = self._once(
            ("term_counts", bank, tuple(terms)), lambda: self.store.term_counts(bank, terms)
        )
        return size, dict(counts)

    def dense_search(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        depth: int,
        where: SearchFilter,
        embedder: str | None = None,
    ) -> list[tuple[int, float]]:
        return self.store.dense_search(bank, vector, depth, where, embedder)

    def dense_scores(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        seqs: Sequence[int],
        embedder: str | None = None,
    ) -> dict[int, float]:
        return self.store.dense_scores(bank, vector, seqs, embedder)

    def count_memories(self, bank: str, where: SearchFilter) -> int:
        key = ("count", bank, repr(where))
        return self._once(key, lambda: self.store.count_memories(bank, where))

    def time_search(
        self,
        bank: str,
        start: datetime,
        end: datetime,
        reach: float,
        depth: int,
        where: SearchFilter,
    ) -> list[tuple[int, float]]:
        key = ("time", bank, start, end, reach, depth, repr(where))
        return list(
            self._once(key, lambda: self.store.time_search(bank, start, end, reach, depth, where))
        )

    def memory_times(self, bank: str, seqs: Sequence[int]) -> dict[int, float]:
        return self._per_seq(("times", bank), seqs, lambda new: self.store.memory_times(bank, new))

    def memories_by_seq(
        self, bank: str, seqs: Sequence[int], *, with_embeddings: bool = True
    ) -> dict[int, Memory]:
        return self._per_seq(
            ("memories", bank, with_embeddings),
            seqs,
            lambda new: self.store.memories_by_seq(bank, new, with_embeddings=with_embeddings),
        )
