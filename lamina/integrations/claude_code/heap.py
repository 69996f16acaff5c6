"""How a process that recalls allocates: large blocks kept for reuse (see keep_freed_memory)."""

from __future__ import annotations

import sys

__all__ = ["keep_freed_memory"]

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameters (malloc.h)."""
KEPT_ALLOCATION = 32 << 20
"""The largest block glibc may take from the heap rather than map on its own (its ceiling)."""


def keep_freed_memory() -> bool:
    """Let this process reuse the memory of its freed large blocks (Linux, glibc).

    A recall's arrays over a bank's postings or vectors hold about a megabyte each. glibc
    maps each such block on its own and unmaps it when freed, so the next prompt's arrays
    are new mappings that the kernel zero-fills page by page on first touch: on a virtual
    machine those page faults cost more than the arithmetic (a lexical search at 100k
    memories: 10 ms of CPU, 5 without them). Blocks up to KEPT_ALLOCATION are served from
    the heap instead, and freed memory is returned to the system only past 4 times that, so
    a server's prompts reuse the same pages, and so do the two recalls of a cold hook. False
    where mallopt is missing (not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    kept = int(mallopt(M_MMAP_THRESHOLD, KEPT_ALLOCATION)) == 1
    return int(mallopt(M_TRIM_THRESHOLD, 4 * KEPT_ALLOCATION)) == 1 and kept
