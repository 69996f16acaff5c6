"""Keeping full garbage collections off the request path of a long-lived process.

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
"""

from __future__ import annotations

import gc
import threading

__all__ = ["settle", "settle_soon"]

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
