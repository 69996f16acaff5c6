"""Recall and retain from many threads on one bank served by the in-process index (banks not
yet prepared for search in the database): no recall fails, and none poisons the next."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.store.sqlite import SQLiteStore
from lamina.text.lexical import BM25Index

from ..test_recall import FACTS, conversation


class UnpreparedStore(SQLiteStore):
    """A SQLite store whose banks never search in the database: recall uses BankIndex."""

    def searchable(self, bank: str) -> bool:
        return False

    def prepare_search(self, bank: str, progress: object = None, batch: int = 2000) -> int:
        return 0


def test_mixed_retain_and_recall_threads_never_fail(tmp_path: Path) -> None:
    bank = MemoryBank(UnpreparedStore(tmp_path / "lamina.db"), HashEmbedder())
    bank.retain_messages(conversation("seed", FACTS), "proj", "seed")
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
    # The index after the storm equals one built from scratch.
    fresh = MemoryBank(UnpreparedStore(tmp_path / "lamina.db"), HashEmbedder())
    query = "systemd unit on the VPS"
    assert [h.memory.id for h in bank.recall(query, "proj").hits] == [
        h.memory.id for h in fresh.recall(query, "proj").hits
    ]


def test_a_failed_refresh_does_not_poison_the_next_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bank = MemoryBank(UnpreparedStore(tmp_path / "lamina.db"), HashEmbedder())
    bank.retain_messages(conversation("a", FACTS[:3]), "proj", "a")
    bank.recall("database", "proj")
    bank.retain_messages(conversation("b", FACTS[3:]), "proj", "b")
    original = BM25Index.add
    calls = [0]

    def add_once_broken(self: BM25Index, text: str, extra: Iterable[str] = ()) -> int:
        calls[0] += 1
        if calls[0] == 2:  # half-way through appending: ids added, postings not
            raise BufferError("cannot resize an array that is exporting buffers")
        return original(self, text, extra)

    monkeypatch.setattr(BM25Index, "add", add_once_broken)
    with pytest.raises(BufferError):
        bank.recall("database", "proj")
    fresh = MemoryBank(UnpreparedStore(tmp_path / "lamina.db"), HashEmbedder())
    for query in ("database", "systemd unit on the VPS", "pagination limit"):
        assert [h.memory.id for h in bank.recall(query, "proj").hits] == [
            h.memory.id for h in fresh.recall(query, "proj").hits
        ]
