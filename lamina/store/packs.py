"""Posting packs, for either store: their one codec, and the cache a process keeps them in.

A pack is a common term's postings in one row: three byte strings (`encode`), the first seq
then the gaps between seqs, the term frequencies and the memories' lengths, each in the
narrowest width that holds them (about 5 bytes a posting, where three plain arrays take 16).

A pack carries a version that is new with every build; a search asks the database only for
the versions of the packs it needs and reads again only those whose version it does not
hold (`PackCache`). Values are whatever a store decodes a pack into; the cache only needs
their size.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

__all__ = ["PackCache", "Raw", "concatenated", "decode", "decode_blocks", "encode", "raw_bytes"]

T = TypeVar("T")

Raw = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int32]", "npt.NDArray[np.int32]"]
"""A term's postings: seqs (ascending), term frequencies, memory lengths."""


def _narrowest(values: npt.NDArray[np.int64], widths: Sequence[str]) -> bytes:
    """`values` (>= 0) as little-endian unsigned integers of the narrowest of `widths`
    that holds them all (the reader tells the width from the byte count)."""
    top = int(values.max()) if len(values) else 0
    for width in widths:
        if top <= np.iinfo(np.dtype(width)).max:
            return values.astype(width).tobytes()
    raise ValueError(f"{top} does not fit in {widths[-1]}")


def encode(raw: Raw) -> tuple[bytes, bytes, bytes]:
    """A pack's three columns: the first seq as 8 bytes then the gaps between seqs
    (2, 4 or 8 bytes each), the term frequencies (1, 2 or 4 bytes) and the memories' lengths
    (2 or 4 bytes)."""
    seqs, tfs, lengths = raw
    first = np.asarray(seqs[:1], dtype="<i8").tobytes()
    return (
        first + _narrowest(np.diff(seqs), ("<u2", "<u4", "<u8")),
        _narrowest(tfs.astype(np.int64), ("u1", "<u2", "<u4")),
        _narrowest(lengths.astype(np.int64), ("<u2", "<u4")),
    )


def decode(count: int, seqs: bytes, tfs: bytes, lengths: bytes) -> Raw:
    """The postings of a pack holding `count` of them (see `encode`)."""
    if count == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
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


def decode_blocks(blocks: Sequence[tuple[int, bytes, bytes, bytes]]) -> Raw:
    """The postings of consecutive packs (`count`, seqs, tfs, lengths), in order, as one list:
    each column of all the packs decoded together, not pack by pack (a common term's list is
    hundreds of them), in one call where the packs share a width (nearly always)."""
    if len(blocks) == 1:
        return decode(*blocks[0])
    blocks = [b for b in blocks if b[0]]
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
    counts = np.fromiter((b[0] for b in blocks), dtype=np.int64, count=len(blocks))
    total = int(counts.sum())
    firsts = np.frombuffer(b"".join([b[1][:8] for b in blocks]), dtype="<i8")
    many = [b for b in blocks if b[0] > 1]
    gaps = _joined([memoryview(b[1])[8:] for b in many], [b[0] - 1 for b in many])
    tfs = _joined([b[2] for b in blocks], [b[0] for b in blocks])
    lengths = _joined([b[3] for b in blocks], [b[0] for b in blocks])
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    # Each pack's gaps summed from its own first seq: one running sum over all of them, with
    # 0 at each pack's start, less the sum reached at that start, plus its first seq.
    steps = np.zeros(total, dtype=np.int64)
    inner = np.ones(total, dtype=bool)
    inner[starts] = False
    steps[inner] = gaps
    np.cumsum(steps, out=steps)
    steps += np.repeat(firsts - steps[starts], counts)
    return steps, tfs.astype(np.int32), lengths.astype(np.int32)


def _joined(
    parts: Sequence[bytes | memoryview], counts: Sequence[int]
) -> npt.NDArray[np.unsignedinteger]:
    """Columns of `counts` values each, little-endian unsigned of whatever width each holds
    (its bytes over its count), as one array."""
    if not parts:
        return np.zeros(0, dtype=np.uint64)
    widths = {len(p) // c for p, c in zip(parts, counts, strict=True)}
    if len(widths) == 1:
        return np.frombuffer(b"".join(parts), dtype=f"<u{widths.pop()}")
    return np.concatenate(
        [
            np.frombuffer(p, dtype=f"<u{len(p) // c}").astype(np.uint64)
            for p, c in zip(parts, counts, strict=True)
        ]
    )


def concatenated(parts: Sequence[Raw]) -> Raw:
    """Lists one after the other, as one."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )


def raw_bytes(raw: Raw) -> int:
    return sum(a.nbytes for a in raw)


IDLE_SECONDS = 600.0
"""A bank whose packs no search has used for this long gives them up first (see PackCache)."""
RESERVED = 0.25
"""The share of a PackCache's bytes set aside for every bank holding packs, in equal parts.
Measured with `lamina bench term-cache`: at 0.5 the small banks beside a big one read half as
many lists again as under one LRU order, but a bank searched for 40 questions at a time read
18% more than under one LRU order; at 0.25, a third fewer and 2% more."""


class PackCache(Generic[T]):
    """Packs this process has read, decoded, kept between searches by (bank, term) with the
    version they were read at, in at most `max_bytes` shared by every bank.

    Past `max_bytes` the least recently used pack goes, with two exceptions. A bank idle for
    IDLE_SECONDS gives its packs first (the longest idle first). And each bank holding packs
    keeps a reserve, an equal part of RESERVED of the bytes: a pack is taken from a bank that
    holds no more than its reserve only when every bank is within its own. So the bank being
    searched may use most of the budget for the lists its searches read again and again,
    while every other bank keeps its most recently used lists for its next turn,
    where one least-recently-used order over every bank lets a big bank's searches push all
    the others' lists out, and a server answering banks in turn reads each bank's common
    terms from the database again at every turn.

    Never trusted blindly: a search compares the versions the database holds with these,
    and a write that changes a term's postings drops its pack, the next build getting a new
    version, so a kept copy is never read out of date, whichever process or host wrote."""

    def __init__(
        self,
        max_bytes: int,
        size: Callable[[T], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._size = size
        self._clock = clock
        self._banks: dict[int, OrderedDict[str, tuple[int, T, int]]] = {}
        """Per bank: term -> (version, pack, when last used), least recently used first."""
        self._bank_bytes: dict[int, int] = {}
        self._used: OrderedDict[int, float] = OrderedDict()
        """When each bank holding packs was last searched, least recent first."""
        self._tick = 0
        self._lock = threading.Lock()

    def _touch(self, bank_id: int) -> None:
        self._used[bank_id] = self._clock()
        self._used.move_to_end(bank_id)

    def held(self, bank_id: int, terms: Sequence[str]) -> dict[str, tuple[int, T]]:
        """The (version, pack) held for each of `terms` of the bank."""
        out: dict[str, tuple[int, T]] = {}
        with self._lock:
            packs = self._banks.get(bank_id)
            if packs is None:
                return out
            self._touch(bank_id)
            for term in terms:
                entry = packs.get(term)
                if entry is not None:
                    self._tick += 1
                    packs[term] = (entry[0], entry[1], self._tick)
                    packs.move_to_end(term)
                    out[term] = entry[:2]
        return out

    def holds(self, bank_id: int, term: str) -> bool:
        packs = self._banks.get(bank_id)
        return packs is not None and term in packs

    def bank_bytes(self, bank_id: int) -> int:
        """The bytes of the bank's packs held."""
        return self._bank_bytes.get(bank_id, 0)

    def put(self, bank_id: int, term: str, version: int, pack: T) -> None:
        size = self._size(pack)
        if size > self.max_bytes:
            return
        with self._lock:
            packs = self._banks.setdefault(bank_id, OrderedDict())
            old = packs.pop(term, None)
            if old is not None:
                self._drop(bank_id, self._size(old[1]))
                packs = self._banks.setdefault(bank_id, packs)
            self._tick += 1
            packs[term] = (version, pack, self._tick)
            self._bank_bytes[bank_id] = self._bank_bytes.get(bank_id, 0) + size
            self.bytes += size
            self._touch(bank_id)
            while self.bytes > self.max_bytes:
                victim = self._victim(bank_id)
                _term, (_version, gone, _when) = self._banks[victim].popitem(last=False)
                self._drop(victim, self._size(gone))

    def _drop(self, bank_id: int, size: int) -> None:
        self.bytes -= size
        self._bank_bytes[bank_id] -= size
        if not self._banks[bank_id]:
            del self._banks[bank_id], self._bank_bytes[bank_id], self._used[bank_id]

    def _victim(self, putting: int) -> int:
        """The bank to give up its least recently used pack (never the pack just put)."""
        oldest = next(iter(self._used))
        if oldest != putting and self._clock() - self._used[oldest] >= IDLE_SECONDS:
            return oldest
        banks = [b for b in self._used if b != putting or len(self._banks[b]) > 1]
        reserve = self.max_bytes * RESERVED / len(self._banks)
        over = [b for b in banks if self._bank_bytes[b] > reserve]
        return min(over or banks, key=lambda b: next(iter(self._banks[b].values()))[2])
