"""Giving freed memory back to the system.

glibc's malloc keeps what a process frees for its next allocations; after a burst (loading
and optimising a model, reading a long transcript) much of it stays resident, and a later
burst adds to it instead of reusing it. `give_back` asks malloc to return the free pages at
the top of its heaps and inside them (`malloc_trim`). Elsewhere (musl, macOS, Windows) it
does nothing.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

__all__ = ["give_back"]


@cache
def _trim() -> Any:
    """glibc's `malloc_trim`, or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def give_back() -> None:
    """Return the memory this process has freed to the system, where malloc allows it
    (a millisecond or two of CPU; no effect on what the process holds)."""
    trim = _trim()
    if trim is not None:
        trim(0)
