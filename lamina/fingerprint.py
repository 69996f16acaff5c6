"""Telling whether a file read before is still the file it was: what retain's and the context
compiler's cursors keep, so a later read resumes where the last stopped only when the bytes
before that point are unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_hash", "prefix_fingerprint"]

SAMPLE = 4096
"""Bytes read at each end of a prefix."""


def prefix_fingerprint(path: str, offset: int) -> str:
    """Identifies the first `offset` bytes of a file by their length, head and tail ("" for
    none)."""
    if offset <= 0:
        return ""
    with Path(path).open("rb") as handle:
        head = handle.read(min(SAMPLE, offset))
        handle.seek(max(0, offset - SAMPLE))
        tail = handle.read(min(SAMPLE, offset))
    return hashlib.sha256(f"{offset}:".encode() + head + b"\x00" + tail).hexdigest()[:32]


def file_hash(path: str) -> str:
    """A hash of the whole file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:32]
