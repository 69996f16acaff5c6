"""The Store protocol's contract, run against every store implementation.

A new store (PostgreSQL) adds a factory to STORES and must pass the same tests unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from lamina.bank.model import Cursor, Memory
from lamina.store.base import RetainBatch, Store
from lamina.store.sqlite import SQLiteStore

STORES: dict[str, Callable[[Path], Store]] = {
    "sqlite": lambda tmp: SQLiteStore(tmp / "lamina.db"),
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = STORES[request.param](tmp_path)
    s.migrate()
    yield s
    s.close()


def memory(mid: str, text: str = "text", doc: str = "d1", vec: float | None = 1.0) -> Memory:
    embedding = None if vec is None else np.full(4, vec, dtype=np.float32) / 2
    return Memory(
        id=mid,
        bank="b",
        document=doc,
        kind="turn",
        text=text,
        record_ids=(f"{mid}-r1", f"{mid}-r2"),
        occurred_at=datetime(2026, 3, 1, 10, tzinfo=UTC),
        said_at=datetime(2026, 3, 1, 10, tzinfo=UTC),
        speakers=("user", "assistant"),
        tags=("t1",),
        content_hash=f"h-{mid}-{text}",
        embedding=embedding,
        embedder="test@1" if embedding is not None else None,
        first_line=1,
        last_line=4,
    )


def batch(
    version: int, records: list[str], memories: list[Memory], doc: str = "d1", **kw: object
) -> RetainBatch:
    return RetainBatch(
        bank="b",
        document=doc,
        expected_version=version,
        cursor=Cursor(offset=len(records), records=len(records), fingerprint=f"fp{version}"),
        records=records,
        memories=memories,
        **kw,  # type: ignore[arg-type]
    )


def test_banks_are_created_listed_and_deleted(store: Store) -> None:
    assert store.list_banks() == []
    first = store.ensure_bank("alpha")
    assert store.ensure_bank("alpha") == first
    store.ensure_bank("beta")
    assert [b.name for b in store.list_banks()] == ["alpha", "beta"]
    assert store.delete_bank("alpha") and not store.delete_bank("alpha")
    assert store.get_bank("alpha") is None


def test_retain_batch_writes_everything_and_bumps_the_cursor(store: Store) -> None:
    outcome = store.apply_retain(
        batch(
            0,
            ["r1", "r2", "r2"],
            [memory("m1"), memory("m2", vec=None)],
            tags=["t1"],
            metadata={"k": "v"},
            source="/x.jsonl",
            format="claude-code",
        )
    )
    assert outcome.committed and outcome.new_records == 2 and outcome.inserted == 2
    cursor = store.get_cursor("b", "d1")
    assert cursor.version == 1 and cursor.fingerprint == "fp0" and cursor.offset == 3
    doc = store.get_document("b", "d1")
    assert doc is not None and doc.tags == ("t1",) and doc.metadata == {"k": "v"}
    assert doc.source == "/x.jsonl" and doc.format == "claude-code"
    got = store.get_memories("b", ["m2", "m1", "nope"])
    assert [m.id for m in got] == ["m2", "m1"]
    m1 = got[1]
    assert m1.record_ids == ("m1-r1", "m1-r2") and m1.speakers == ("user", "assistant")
    assert m1.occurred_at == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert m1.embedding is not None and np.allclose(m1.embedding, 0.5)
    assert got[0].embedding is None and got[0].embedder is None
    stats = store.bank_stats("b")
    assert (stats.documents, stats.memories, stats.records, stats.embedded) == (1, 2, 2, 1)


def test_a_stale_cursor_version_commits_nothing(store: Store) -> None:
    assert store.apply_retain(batch(0, ["r1"], [memory("m1")])).committed
    stale = store.apply_retain(batch(0, ["r1", "r9"], [memory("m9")]))
    assert not stale.committed
    assert store.count_records("b") == 1
    assert store.get_memories("b", ["m9"]) == []
    assert store.get_cursor("b", "d1").version == 1


def test_records_are_stored_once_and_memories_replaced_by_id(store: Store) -> None:
    store.apply_retain(batch(0, ["r1", "r2"], [memory("m1", "old")]))
    outcome = store.apply_retain(batch(1, ["r2", "r3"], [memory("m1", "new")]))
    assert outcome.new_records == 1 and outcome.replaced == 1 and outcome.inserted == 0
    assert store.count_records("b", "d1") == 3
    (m1,) = store.get_memories("b", ["m1"])
    assert m1.text == "new"
    assert store.content_hashes("b", ["m1", "zz"]) == {"m1": "h-m1-new"}


def test_generation_tells_appends_from_deletions(store: Store) -> None:
    g0 = store.generation("b")
    store.apply_retain(batch(0, ["r1"], [memory("m1")]))
    g1 = store.generation("b")
    assert g1[0] > g0[0]
    store.apply_retain(batch(1, ["r2"], [memory("m2")]))
    g2 = store.generation("b")
    assert g2[0] > g1[0] and g2[1] == g1[1]
    assert store.delete_memory("b", "m1")
    g3 = store.generation("b")
    assert g3[1] > g2[1]


def test_iter_memories_in_storage_order_and_after_a_point(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1"), memory("m2")]))
    rows = list(store.iter_memories("b"))
    assert [r.memory.id for r in rows] == ["m1", "m2"]
    later = list(store.iter_memories("b", after_seq=rows[0].seq))
    assert [r.memory.id for r in later] == ["m2"]
    no_vectors = list(store.iter_memories("b", with_embeddings=False))
    assert all(r.memory.embedding is None for r in no_vectors)


def test_forgetting_a_document_removes_its_memories_records_and_cursor(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1")]))
    store.apply_retain(batch(0, ["x1"], [memory("m2", doc="d2")], doc="d2"))
    assert store.delete_document("b", "d1") == 1
    assert store.get_document("b", "d1") is None
    assert store.get_cursor("b", "d1") == Cursor()
    assert store.count_records("b") == 1
    assert [m.id for m in store.get_memories("b", ["m1", "m2"])] == ["m2"]
    assert [d.id for d in store.list_documents("b")] == ["d2"]


def test_set_embeddings_replaces_vectors_and_records_the_embedder(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1", vec=None)]))
    changed = store.set_embeddings("b", {"m1": np.ones(4, dtype=np.float32)}, "other@2")
    assert changed == 1
    (m1,) = store.get_memories("b", ["m1"])
    assert m1.embedder == "other@2" and m1.embedding is not None and m1.embedding.shape == (4,)


def test_banks_are_isolated(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1")]))
    other = RetainBatch("c", "d1", 0, Cursor(), ["r1"], [memory("m1", "other bank")])
    assert store.apply_retain(other).committed
    (mine,) = store.get_memories("b", ["m1"])
    (theirs,) = store.get_memories("c", ["m1"])
    assert mine.text == "text" and theirs.text == "other bank"
    store.delete_bank("c")
    assert store.get_memories("b", ["m1"])
