"""Vector files: a bank's vectors from one embedder, beside the SQLite database, for dense
search without loading the bank.

The database stays the truth (`memories.embedding`); a vector file is a cache of it that any
process may extend or rebuild. It holds the vectors in storage (seq) order, one contiguous
matrix that a search maps into memory (`VectorFile.mapped`, read-only, shared with the page
cache) and scores with one matrix-vector product: nothing decoded or copied, no Python object
per memory, and a process keeps its mapping between searches, so a warm recall pays for the
product only. A file is mapped only when lamina.owned trusts it (this user's, writable by no
one else, a regular file); one it does not is rebuilt.

Layout of `<bank id>-<embedder key>.vec`:

    header (HEADER_BYTES)   magic, version, dim, capacity, count, last seq, vector epoch,
                            the bank's key, a CRC of the rest
    seqs                    capacity x int64 (the first `count` are used)
    vectors                 capacity x dim x float32

Writers append under an exclusive lock (`flock` on a `.lock` file beside it): rows first, the
header last, so a reader, which never locks, sees `count` rows that are all written. A file is
never shortened in place (it is made at its full capacity), so a mapping of it stays valid. A crash
between the two leaves rows past `count` that the next writer overwrites. When the file is
full, or the bank's vectors changed in place (`banks.vector_epoch`), or the bank was deleted and
its id reused (the key differs), the file is rebuilt into a new one that replaces it
atomically; a reader holding the old one finishes with it.

Rows of memories deleted or replaced since stay in the file until its next rebuild (dense
search checks its candidates against the database); a rebuild keeps live rows only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import mmap
import os
import sqlite3
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..owned import owned_problem, private_dir

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

__all__ = ["CHUNK_ROWS", "Mapped", "VectorFile", "VectorHeader", "products", "vector_dir"]

MAGIC = b"LMNAVEC1"
VERSION = 1
HEADER_BYTES = 4096
_HEADER = struct.Struct("<8sIIQQQQ16s")
CHUNK_ROWS = 8192
"""Rows scored at a time: 12 MB of a 384-dimension model's vectors."""
MIN_CAPACITY = 1024
_POPULATE_READ = 22
"""MADV_POPULATE_READ (Linux 5.14 and later; refused, harmlessly, elsewhere)."""
DEAD_SHARE = 0.25
"""A file whose rows are more than this share dead (deleted or replaced memories) is rebuilt."""


def vector_dir(database: str) -> Path:
    """Where the vector files of a database live: `<database>.vectors/`."""
    path = Path(database)
    return path.with_name(path.name + ".vectors")


@dataclass(frozen=True, slots=True)
class VectorHeader:
    dim: int
    capacity: int
    count: int
    last_seq: int
    epoch: int
    key: bytes

    def pack(self) -> bytes:
        body = _HEADER.pack(
            MAGIC, VERSION, self.dim, self.capacity, self.count, self.last_seq, self.epoch,
            self.key,
        )  # fmt: skip
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def unpack(cls, data: bytes) -> VectorHeader | None:
        size = _HEADER.size
        if len(data) < size + 4:
            return None
        body = data[:size]
        (crc,) = struct.unpack("<I", data[size : size + 4])
        if zlib.crc32(body) != crc:
            return None
        magic, version, dim, capacity, count, last_seq, epoch, key = _HEADER.unpack(body)
        if magic != MAGIC or version != VERSION or count > capacity or dim <= 0:
            return None
        return cls(dim, capacity, count, last_seq, epoch, key)

    @property
    def vectors_at(self) -> int:
        return HEADER_BYTES + 8 * self.capacity

    @property
    def size(self) -> int:
        """The file's length: its header, seqs and vectors at full capacity."""
        return self.vectors_at + 4 * self.capacity * self.dim


@dataclass(frozen=True, slots=True)
class Mapped:
    """A vector file mapped read-only into the process (see VectorFile.mapped): the page
    cache's copy scanned in place, no copy made, no Python object per memory. The mapping
    covers the file's whole capacity, so the rows writers append later (up to the header's
    `count`) are seen through it; a rebuilt file is a new one (another inode) and needs a new
    mapping."""

    inode: int
    layout: tuple[bytes, int, int, int]
    """The bank's key, vector epoch, dimension and capacity of the mapped file."""
    seqs: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    count: int

    def scores(
        self, query: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The seqs of the file's rows and their vectors' dot products with `query` (None
        when the dimensions differ), in one pass over the rows (see `products`)."""
        if query.shape[0] != self.matrix.shape[1]:
            return None
        return self.seqs[: self.count], products(self.matrix[: self.count], query)


def products(
    matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each row's dot product with `query`, the same to the bit for a row wherever it stands
    (a whole file's scan, a few rows gathered from it, rows read from the database), so
    equal vectors tie and the lower seq wins. numpy's einsum sums each row in one fixed
    order; OpenBLAS's matrix-vector product gives a row's last bit by its place in a block of
    four, and here costs twice the CPU (49 against 21 ms over 300,000 rows of 384)."""
    found: npt.NDArray[np.float32] = np.einsum(
        "ij,j->i", matrix, np.ascontiguousarray(query, dtype=np.float32)
    )
    return found


def bank_key(bank_id: int, created_at: str) -> bytes:
    """Tells a bank from a later one that got the same id."""
    return hashlib.blake2b(f"{bank_id}\0{created_at}".encode(), digest_size=16).digest()


class VectorFile:
    """The vector file of one bank and one embedder."""

    def __init__(self, directory: Path, bank_id: int, embedder: str) -> None:
        tag = hashlib.blake2b(embedder.encode(), digest_size=6).hexdigest()
        self.directory = directory
        self.path = directory / f"{bank_id}-{tag}.vec"
        self.bank_id = bank_id
        self.embedder = embedder

    # -- reading ---------------------------------------------------------------------------
    def header(self) -> VectorHeader | None:
        try:
            with self.path.open("rb") as handle:
                return VectorHeader.unpack(handle.read(_HEADER.size + 4))
        except OSError:
            return None

    def mapped(self, held: Mapped | None = None) -> Mapped | None:
        """The file mapped into memory, `held` again when it maps the same file (with the
        rows appended since counted in); None when the file is missing, damaged, shorter than
        its header says, or not to be trusted (not this user's, writable by others, not a
        regular file, a symbolic link: see lamina.owned)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if owned_problem(info) is not None or not stat.S_ISREG(info.st_mode):
                return None
            header = VectorHeader.unpack(os.pread(fd, _HEADER.size + 4, 0))
            if header is None:
                return None
            layout = (header.key, header.epoch, header.dim, header.capacity)
            if (
                held is not None
                and held.inode == info.st_ino
                and held.layout == layout
                and held.count <= header.count
            ):
                return Mapped(held.inode, layout, held.seqs, held.matrix, header.count)
            if info.st_size < header.size:
                return None
            region = mmap.mmap(fd, header.size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        # The rows in use mapped at once (from the page cache, or read ahead from the disk):
        # one call instead of a page fault every few pages during the first scan.
        with contextlib.suppress(OSError, ValueError):
            region.madvise(_POPULATE_READ, 0, header.vectors_at + 4 * header.count * header.dim)
        seqs = np.frombuffer(region, dtype=np.int64, count=header.capacity, offset=HEADER_BYTES)
        matrix = np.frombuffer(
            region,
            dtype=np.float32,
            count=header.capacity * header.dim,
            offset=header.vectors_at,
        ).reshape(header.capacity, header.dim)
        return Mapped(info.st_ino, layout, seqs, matrix, header.count)

    def sound(self, header: VectorHeader | None) -> bool:
        """Whether the file (when present) may be mapped: lamina.owned trusts it, and it is
        as long as `header` (its header, when it has one) says. One that is not is rebuilt
        rather than read."""
        try:
            info = os.lstat(self.path)
        except OSError:
            return True
        if owned_problem(info) is not None or not stat.S_ISREG(info.st_mode):
            return False
        return header is None or info.st_size >= header.size

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.directory)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def sync(
        self,
        conn: sqlite3.Connection,
        key: bytes,
        epoch: int,
        live: int,
        *,
        rebuild: bool = False,
    ) -> VectorHeader | None:
        """Bring the file up to date with the database: append the vectors stored since, or
        rebuild it (when asked, full, stale, or more than DEAD_SHARE dead given `live`, the
        bank's memories with a vector from this embedder). None when the bank has no vector
        from this embedder."""
        with self._locked():
            header = self.header()
            if header is not None and (header.key != key or header.epoch != epoch):
                header = None
            if header is not None and not rebuild:
                dead = header.count - live
                if dead > MIN_CAPACITY and dead > DEAD_SHARE * header.count:
                    header = None
            if header is None or rebuild:
                return self._rebuild(conn, key, epoch, live)
            new_seqs, new_vectors = self._read_rows(conn, header.last_seq, header.dim)
            if not new_seqs.size:
                return header
            if header.count + len(new_seqs) > header.capacity:
                return self._rebuild(conn, key, epoch, live)
            with self.path.open("r+b") as handle:
                fd = handle.fileno()
                os.pwrite(fd, new_seqs.tobytes(), HEADER_BYTES + 8 * header.count)
                os.pwrite(
                    fd, new_vectors.tobytes(), header.vectors_at + header.count * header.dim * 4
                )
                updated = VectorHeader(
                    header.dim, header.capacity, header.count + len(new_seqs),
                    int(new_seqs[-1]), epoch, key,
                )  # fmt: skip
                os.pwrite(fd, updated.pack(), 0)
            return updated

    def _read_rows(
        self, conn: sqlite3.Connection, after: int, dim: int | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Seqs and vectors stored after `after`, of dimension `dim` (None: the first one's)."""
        rows = conn.execute(
            "SELECT seq, embedding FROM memories WHERE bank_id = ? AND embedder = ?"
            " AND seq > ? AND embedding IS NOT NULL ORDER BY seq",
            (self.bank_id, self.embedder, after),
        )
        seqs: list[int] = []
        blobs: list[bytes] = []
        width = None if dim is None else 4 * dim
        for seq, blob in rows:
            if width is None:
                width = len(blob)
            if len(blob) == width:
                seqs.append(seq)
                blobs.append(blob)
        if width is None or not seqs:
            return np.empty(0, dtype=np.int64), np.empty((0, dim or 1), dtype=np.float32)
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), width // 4)
        return np.array(seqs, dtype=np.int64), vectors

    def _rebuild(
        self, conn: sqlite3.Connection, key: bytes, epoch: int, live: int
    ) -> VectorHeader | None:
        """Write the bank's live vectors into a new file, a chunk at a time, and put it in
        place of the old one."""
        rows = conn.execute(
            "SELECT seq, embedding FROM memories WHERE bank_id = ? AND embedder = ?"
            " AND embedding IS NOT NULL ORDER BY seq",
            (self.bank_id, self.embedder),
        )
        first = rows.fetchone()
        if first is None:
            self.delete()
            return None
        width = len(first[1])
        dim = width // 4
        capacity = max(MIN_CAPACITY, 2 * live + 1)
        vectors_at = HEADER_BYTES + 8 * capacity
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        count, last = 0, 0
        try:
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "r+b") as handle:
                handle.truncate(vectors_at + capacity * width)
                batch: list[tuple[int, bytes]] = [first, *rows.fetchmany(CHUNK_ROWS - 1)]
                while batch and count < capacity:
                    kept = [(s, b) for s, b in batch if len(b) == width]
                    kept = kept[: capacity - count]
                    if kept:
                        seqs = np.array([s for s, _b in kept], dtype=np.int64)
                        os.pwrite(fd, seqs.tobytes(), HEADER_BYTES + 8 * count)
                        os.pwrite(fd, b"".join(b for _s, b in kept), vectors_at + count * width)
                        count += len(kept)
                        last = int(seqs[-1])
                    batch = rows.fetchmany(CHUNK_ROWS)
                header = VectorHeader(dim, capacity, count, last, epoch, key)
                os.pwrite(fd, header.pack(), 0)
            temporary.chmod(0o600)
            temporary.replace(self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
        return header

    def delete(self) -> None:
        for path in (self.path, self.path.with_suffix(".lock")):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
