"""Search inside the database: what recall asks of a store (`SearchStore`), and what both
stores' searches share (`DatabaseSearch`, `FilterSQL`).

Each store answers recall's questions itself, so a process never loads a whole bank: the first
recall of a hook process on a million memories costs a few queries, not a minute of loading.

The rankings are the ones an in-process index over the whole bank computes (tests/oracle.py):
the same BM25 (same tokens, same k1 and b; lamina.store.ranking) and the same dot product for
the dense channel, so recall gives the same results on both stores. The dense ranking may come
from an approximate index (HNSW); its scores are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..memories import Memory

__all__ = ["DatabaseSearch", "FilterSQL", "SearchFilter", "SearchStore"]


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
    """Documents left out: wholly (None), or only what was said at or after a time (the part
    of a live session still in the model's context; what was compacted away stays)."""

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


SAID = "coalesce(m.said_at, m.t)"
"""When a memory was said (SearchFilter.exclude's cutoff applies to it)."""


@dataclass(frozen=True, slots=True)
class FilterSQL:
    """How one engine writes a SearchFilter as conditions on `memories m`: its parameter
    mark, a column among a list parameter, tags sharing one of a list, and how it passes
    lists and times."""

    mark: str
    among: str
    """"{column} IN ..." with one list parameter, `column` left to format."""
    tagged: str
    values: Callable[[list[str]], Any]
    time: Callable[[datetime], Any]

    def conditions(self, bank_id: int, where: SearchFilter) -> tuple[str, list[Any]]:
        """The filter's conditions ("" when it lets everything through) and parameters."""
        mark, parts, params = self.mark, [], []
        document = f"m.document_id IN (SELECT id FROM documents WHERE bank_id = {mark} AND "
        if where.documents is not None:
            parts.append(document + self.among.format("name") + ")")
            params += [bank_id, self.values(sorted(where.documents))]
        if where.tags:
            parts.append(self.tagged)
            params.append(self.values(sorted(where.tags)))
        if where.kinds is not None:
            parts.append(self.among.format("m.kind"))
            params.append(self.values(sorted(where.kinds)))
        if where.since is not None:
            parts.append(f"m.t >= {mark}")
            params.append(self.time(where.since))
        if where.until is not None:
            parts.append(f"m.t <= {mark}")
            params.append(self.time(where.until))
        for name, cutoff in sorted(where.exclude.items()):
            condition, extra = self.said_since(cutoff)
            parts.append(f"NOT ({document}name = {mark}){condition})")
            params += [bank_id, name, *extra]
        return " AND ".join(parts), params

    def said_since(self, cutoff: datetime | None) -> tuple[str, list[Any]]:
        """The exclusion's condition on when a memory was said (see SearchFilter.exclude):
        all of the document, or what was said at or after the cutoff (or is undated)."""
        if cutoff is None:
            return "", []
        return f" AND ({SAID} IS NULL OR {SAID} >= {self.mark})", [self.time(cutoff)]


Dated = Callable[[datetime, datetime, str, int], list[tuple[int, float]]]
"""Reads up to a number of the filtered memories dated in [low, high), in an order ("" for
any, "DESC" or "ASC" by date then seq): (seq, POSIX time) each."""


class DatabaseSearch:
    """The `SearchStore` methods both stores share, over what each reads its own way."""

    def _dated(self, bank: str, where: SearchFilter) -> AbstractContextManager[Dated | None]:
        """A reader of the bank's dated memories that pass `where` (None: no such bank)."""
        raise NotImplementedError

    def time_search(
        self,
        bank: str,
        start: datetime,
        end: datetime,
        reach: float,
        depth: int,
        where: SearchFilter,
    ) -> list[tuple[int, float]]:
        with self._dated(bank, where) as dated:
            if dated is None or depth <= 0:
                return []
            # Unordered, so that at most depth + 1 rows of the range are read however many it
            # holds (ordered by seq, a month of a million memories was read whole).
            inside = dated(start, end, "", depth + 1)
            if len(inside) > depth:
                return []  # more than it can propose: which of them matter, the others say
            out = sorted(inside)
            need = depth - len(out)
            if need <= 0 or reach <= 0:
                return out
            # The nearest on each side (an index range read from the range's edge), `need` of
            # each at most, then the nearest of both.
            before, after = start - timedelta(seconds=reach), end + timedelta(seconds=reach)
            near = dated(before, start, "DESC", need) + dated(end, after, "ASC", need)
        low, high = start.timestamp(), end.timestamp()
        near.sort(key=lambda st: (max(low - st[1], st[1] - high), st[0]))
        return out + near[:need]

    def _products(
        self, bank: str, query: npt.NDArray[np.float32], seqs: list[int], embedder: str | None
    ) -> dict[int, float]:
        """Dot products of `query` with the vectors of `seqs` (sorted, distinct)."""
        raise NotImplementedError

    def dense_scores(
        self,
        bank: str,
        vector: npt.NDArray[np.float32],
        seqs: Sequence[int],
        embedder: str | None = None,
    ) -> dict[int, float]:
        if not seqs:
            return {}
        query = np.asarray(vector, dtype=np.float32)
        return self._products(bank, query, sorted({int(s) for s in seqs}), embedder)


def rows_dated(
    read: Callable[[str, list[Any]], list[tuple[Any, Any]]],
    select: str,
    bank_id: int,
    condition: str,
    params: list[Any],
    time: Callable[[datetime], Any],
    epoch: Callable[[Any], float],
    mark: str,
) -> Dated:
    """A `Dated` reader over SQL: `select` names the seq and the time of `memories m`,
    `condition` (with `params`) applies the filter, `read` runs a query."""

    def dated(low: datetime, high: datetime, order: str, limit: int) -> list[tuple[int, float]]:
        ordered = f" ORDER BY m.t {order}, m.seq" if order else ""
        rows = read(
            f"SELECT m.seq, {select} FROM memories m WHERE m.bank_id = {mark}"
            f" AND m.t >= {mark} AND m.t < {mark}{condition}{ordered} LIMIT {mark}",
            [bank_id, time(low), time(high), *params, limit],
        )
        return [(int(seq), epoch(t)) for seq, t in rows]

    return dated
