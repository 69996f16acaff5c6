"""A long-lived process that settles its heap between requests (`lamina.heap`) keeps the
garbage collector's full walks small, reclaims the cycles made since the last settle, and
reclaims cycles that died frozen once the heap has doubled; the servers' `ContextLogs` settles
after each compile. Real transcripts, a real SQLite store."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina import heap
from lamina.context import CompileOptions, ExtractiveSummariser
from lamina.context.logs import ContextLogs
from lamina.readers import read_transcript
from lamina.store import open_store

from .conftest import CLAUDE_CODE, needs_shared


class Node:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _fresh_heap() -> Iterator[None]:
    """Each test starts, and leaves the process, with nothing frozen."""
    gc.unfreeze()
    heap._walked = 0
    yield
    gc.unfreeze()
    heap._walked = 0


def test_a_settle_reclaims_the_cycles_made_since_and_freezes_what_lives() -> None:
    alive = [Node() for _ in range(100)]
    dead = Node()
    gone = weakref.ref(dead)
    del dead
    heap.settle()
    assert gone() is None
    walked = {id(o) for o in gc.get_objects()}  # what a full collection would walk now
    assert not walked & {id(n) for n in alive}
    assert gc.get_freeze_count() >= len(alive)


def test_a_cycle_that_died_frozen_is_reclaimed_once_the_heap_has_doubled() -> None:
    node = Node()
    gone = weakref.ref(node)
    assert heap.settle()  # the first settle walks the whole heap
    del node  # garbage now, but frozen
    assert not heap.settle()  # the heap has not grown: only what is new is walked
    assert gone() is not None
    grown = [[] for _ in range(2 * gc.get_freeze_count())]
    assert heap.settle()
    assert gone() is None
    assert len(grown) > 0


@needs_shared
def test_the_servers_logs_settle_after_a_compile_so_the_log_is_not_walked(
    tmp_path: Path,
) -> None:
    messages = read_transcript(str(CLAUDE_CODE / "spotter-258c7280.jsonl")).messages
    store = open_store(tmp_path / "lamina.db")
    try:
        logs = ContextLogs(store, ExtractiveSummariser(), settle=True)
        # No prefetch: its thread would still be writing when the store closes below.
        logs.compile("p", "s", messages, CompileOptions(budget=6_000, reserve=600), ahead=False)
        for thread in threading.enumerate():
            if thread.name == "lamina-settle":
                thread.join(timeout=60)
        with logs.use("p", "s") as stored:
            held = stored.log.messages
            assert len(held) > 100
            walked = {id(o) for o in gc.get_objects()}
            assert not walked & {id(m) for m in held}
    finally:
        store.close()
