"""The posting packs a process keeps between searches, for either store.

A pack (a common term's postings packed into one row) carries a version that is new with
every build; a search asks the database only for the versions of the packs it needs and
reads again only those whose version it does not hold. Values are whatever a store decodes a
pack into; the cache only needs their size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["PackCache"]

T = TypeVar("T")


class PackCache(Generic[T]):
    """Packs this process has read, decoded, kept between searches by (bank, term) with the
    version they were read at; least recently used first out past `max_bytes`.

    Never trusted blindly: a search compares the versions the database holds with these,
    and a write that changes a term's postings drops its pack, the next build getting a new
    version, so a kept copy is never read out of date, whichever process or host wrote."""

    def __init__(self, max_bytes: int, size: Callable[[T], int]) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._size = size
        self._packs: OrderedDict[tuple[int, str], tuple[int, T]] = OrderedDict()
        self._lock = threading.Lock()

    def held(self, bank_id: int, terms: Sequence[str]) -> dict[str, tuple[int, T]]:
        """The (version, pack) held for each of `terms` of the bank."""
        out: dict[str, tuple[int, T]] = {}
        with self._lock:
            for term in terms:
                pack = self._packs.get((bank_id, term))
                if pack is not None:
                    self._packs.move_to_end((bank_id, term))
                    out[term] = pack
        return out

    def holds(self, bank_id: int, term: str) -> bool:
        return (bank_id, term) in self._packs

    def put(self, bank_id: int, term: str, version: int, pack: T) -> None:
        size = self._size(pack)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._packs.pop((bank_id, term), None)
            if old is not None:
                self.bytes -= self._size(old[1])
            self._packs[(bank_id, term)] = (version, pack)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _key, (_version, gone) = self._packs.popitem(last=False)
                self.bytes -= self._size(gone)
