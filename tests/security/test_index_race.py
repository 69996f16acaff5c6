"""Recall and retain from many threads on one bank, the bank retained by an earlier version
(not yet indexed for search in the database): no recall fails, and none poisons the next."""

from __future__ import annotations

import threading
from pathlib import Path

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.store.sqlite import SQLiteStore

from ..test_recall import FACTS, conversation


def test_mixed_retain_and_recall_threads_never_fail(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    bank = MemoryBank(store, HashEmbedder())
    bank.retain_messages(conversation("seed", FACTS), "proj", "seed")
    with store._write() as conn:  # as an earlier version left it: indexed by the first recall
        conn.execute("DELETE FROM postings")
        conn.execute("UPDATE memories SET terms = NULL")
        conn.execute("UPDATE banks SET search_ready = 0")
    errors: list[BaseException] = []
    recalls = [0]

    def retainer(n: int) -> None:
        try:
            for i in range(15):
                doc = f"d{n}-{i}"
                bank.retain_messages(conversation(doc, FACTS[i % 6 :]), "proj", doc)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(40):
                result = bank.recall("which database path variable?", "proj")
                assert result.hits
                recalls[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=retainer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    assert recalls[0] == 160
    # The postings after the storm rank as a fresh store's.
    fresh = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), HashEmbedder())
    query = "systemd unit on the VPS"
    assert [h.memory.id for h in bank.recall(query, "proj").hits] == [
        h.memory.id for h in fresh.recall(query, "proj").hits
    ]
