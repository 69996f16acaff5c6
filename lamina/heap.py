"""The process heap: full garbage collections kept off the request path (`settle`), freed
memory given back to the system (`give_back`).

CPython's cyclic collector now and then walks every object the process holds (a generation-2
collection). A server holding a 20,000-message log holds a few hundred thousand of them, and
the walk (about 40 ms of CPU, several times that on a busy machine) lands inside whichever call
happens to allocate at that moment: one live compile in a few hundred took 40-250 ms while the
others took 2-3 ms.

`settle()`, run between requests, moves every object alive then into the collector's permanent
generation (`gc.freeze`), which later collections skip, so they walk only what was made since
and take a millisecond or so wherever they land. It first collects the young generations, so
the cycles the last request left are reclaimed, not frozen. Objects frozen that later become
cyclic garbage (a log closed and dropped) are reclaimed too: whenever the frozen heap has
doubled since it was last walked whole, `settle` unfreezes it and walks it whole once, which
keeps that work proportional to growth and the garbage held to at most the growth since.

    settle()        # between two requests: the HTTP API and the MCP server after a compile
    settle_soon()   # the same in a background thread, after the caller's response is on its way

Only an entry point should call these: freezing is a choice for the whole process.

glibc's malloc keeps what a process frees for its next allocations; after a burst (loading
and optimising a model, reading a long transcript) much of it stays resident, and a later
burst adds to it instead of reusing it. `give_back` asks malloc to return the free pages at
the top of its heaps and inside them (`malloc_trim`). Elsewhere (musl, macOS, Windows) it
does nothing. `keep_freed_memory` asks the opposite of a process that recalls again and
again: keep large freed blocks for reuse.
"""

from __future__ import annotations

import gc
import sys
import threading
from functools import cache
from typing import Any

__all__ = ["give_back", "keep_freed_memory", "settle", "settle_soon"]

_lock = threading.Lock()
_walked = 0
"""Objects frozen after the last whole walk."""
_pending = threading.Lock()
"""Held while a `settle_soon` thread is pending."""


def settle() -> bool:
    """Collect what was made since the last settle and freeze what is alive (see the module's
    doc); returns whether the whole heap was walked this time."""
    global _walked
    with _lock:
        # The young generations only: what was made since the last settle, most of it. A full
        # collection would also empty the interpreter's free lists, and the next request
        # would pay to allocate again (a compile 20% slower).
        gc.collect(1)
        gc.freeze()
        if gc.get_freeze_count() <= 2 * _walked:
            return False
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _walked = gc.get_freeze_count()
        return True


def settle_soon() -> None:
    """`settle` in a background thread; a call while one is pending adds nothing."""
    if not _pending.acquire(blocking=False):
        return

    def run() -> None:
        try:
            settle()
        finally:
            _pending.release()

    threading.Thread(target=run, name="lamina-settle", daemon=True).start()


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
