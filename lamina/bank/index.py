"""The in-process search index of one bank: vectors, BM25 postings and the fields filters need.

Built from the store on first recall and kept up to date cheaply: the store's generation says
whether anything changed; new memories are appended (a memory stored again under the same id
replaces its old slot), and only deletions or in-place changes force a rebuild.

Threads share one index per bank: a reader holds `lock` from its refresh to its last read
(`MemoryBank.recall` does), so no reader sees a half-applied append, and a refresh that fails
part way empties the index, so the next refresh rebuilds it rather than building on the wreck.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..memories import Memory, memory_tokens
from ..store.base import Store
from ..store.search import excluded
from ..text.entities import entity_terms
from ..text.lexical import BM25Index

__all__ = ["BankIndex"]


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
