"""Search inside the database, for stores that can: what recall asks of them.

The SQLite store answers recall from an in-process index (lamina.bank.index) loaded from the
store. A store that implements `SearchStore` (PostgreSQL) answers the same questions itself,
so a process never loads a whole bank: the first recall of a hook process on a million
memories costs a few queries, not a minute of loading.

The rankings are the ones the in-process index computes: the same BM25 (same tokens, same
k1 and b; see lamina.bank.lexical) and the same dot product for the dense channel, so recall
gives the same results on both stores. The dense ranking may come from an approximate index
(HNSW); its scores are exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..memories import Memory

__all__ = ["BM25_B", "BM25_K1", "SearchFilter", "SearchStore"]

BM25_K1 = 1.2
BM25_B = 0.75


def excluded(memory: Memory, exclude: Mapping[str, datetime | None]) -> bool:
    """Whether `exclude` (document -> cutoff; None: the whole document) leaves `memory` out:
    what was said in an excluded document from its cutoff on."""
    if memory.document not in exclude:
        return False
    cutoff = exclude[memory.document]
    said = memory.said_at or memory.time
    return cutoff is None or said is None or said >= cutoff


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which memories a search may return (the fields of RecallOptions that filter)."""

    documents: frozenset[str] | None = None
    tags: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude: Mapping[str, datetime | None] = field(default_factory=dict)

    def admits(self, memory: Memory) -> bool:
        """Whether `memory` passes the filter, as the searches apply it (for a memory recall
        did not search for, such as the replacement of a superseded one)."""
        if self.documents is not None and memory.document not in self.documents:
            return False
        if self.kinds is not None and memory.kind not in self.kinds:
            return False
        if self.tags and not self.tags.intersection(memory.tags):
            return False
        if self.since is not None or self.until is not None:
            when = memory.time
            if when is None:
                return False
            if (self.since is not None and when < self.since) or (
                self.until is not None and when > self.until
            ):
                return False
        return not excluded(memory, self.exclude)

    @property
    def empty(self) -> bool:
        return (
            self.documents is None
            and not self.tags
            and self.kinds is None
            and self.since is None
            and self.until is None
            and not self.exclude
        )


@runtime_checkable
class SearchStore(Protocol):
    """A store that searches its own memories. Results are (seq, score), best first; ties go
    to the lower seq, as in the in-process index. Recall calls these methods from several
    threads at once (one search per channel)."""

    def searchable(self, bank: str) -> bool:
        """Whether this bank is searched in the database (else recall loads an index)."""
        ...

    def lexical_search(
        self, bank: str, terms: Sequence[str], depth: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The `depth` best memories by BM25 for the query's terms (repeats count)."""
        ...

    def lexical_scores(
        self, bank: str, terms: Sequence[str], seqs: Sequence[int]
    ) -> dict[int, float]:
        """BM25 of the given memories (absent: 0)."""
        ...

    def term_counts(self, bank: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """The bank's live memories and, for each of `terms` some memory holds, how many
        do."""
        ...

    def dense_search(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        depth: int,
        where: SearchFilter,
        embedder: str | None = None,
    ) -> list[tuple[int, float]]:
        """The `depth` memories whose vectors (from `embedder`, when given) have the largest
        dot product with `vector`."""
        ...

    def dense_scores(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        seqs: Sequence[int],
        embedder: str | None = None,
    ) -> dict[int, float]:
        """Dot products of the given memories' vectors with `vector` (absent: no vector)."""
        ...

    def count_memories(self, bank: str, where: SearchFilter) -> int:
        """Live memories that pass the filter."""
        ...

    def time_search(
        self,
        bank: str,
        start: datetime,
        end: datetime,
        reach: float,
        depth: int,
        where: SearchFilter,
    ) -> list[tuple[int, float]]:
        """Memories dated in [start, end) first (seq order), then those within `reach`
        seconds of it, nearest first, `depth` in all; none when more than `depth` are dated
        inside the range (all score the same there: which matter, the other channels say).
        The score is the date as a POSIX timestamp."""
        ...

    def memory_times(self, bank: str, seqs: Sequence[int]) -> dict[int, float]:
        """When the given memories happened (POSIX seconds; absent: undated)."""
        ...

    def memories_by_seq(
        self, bank: str, seqs: Sequence[int], *, with_embeddings: bool = True
    ) -> dict[int, Memory]:
        """The memories with these sequence numbers."""
        ...
