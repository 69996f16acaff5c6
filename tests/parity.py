"""Checks that recall answers the same from the in-process index and from a store's own
search, shared by the SQLite and PostgreSQL search suites (each brings its filled store)."""

from __future__ import annotations

from datetime import datetime

from lamina.bank.index import BankIndex
from lamina.bank.recall import RecallOptions, recall_from_index, recall_from_store
from lamina.embed import HashEmbedder
from lamina.store.base import Store


def check_only_the_time_text_drives_the_time_channel(store: Store, now: datetime) -> None:
    """A composed query quotes "last year" from an earlier turn; the prompt itself names no
    time, so no time channel, in the database as in the index. A prompt naming one keeps it."""
    index = BankIndex("b")
    index.refresh(store)
    query = "assistant: w3 was restored last year\nuser: w8 w3 w12"
    for time_text, timed in (("w8 w3 w12", False), ("w8 w3 w12 in 2025", True)):
        options = RecallOptions(budget=100_000, limit=15, now=now, time_text=time_text)
        want = recall_from_index(index, query, HashEmbedder(), options)
        got = recall_from_store(store, "b", query, HashEmbedder(), options)
        assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], time_text
        assert got.hits and any("time" in h.channels for h in got.hits) is timed
    whole = recall_from_store(store, "b", query, HashEmbedder(), RecallOptions(now=now, limit=15))
    assert any("time" in h.channels for h in whole.hits)  # without it the whole query counts
