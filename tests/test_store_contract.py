"""The Store protocol's contract, run against every store implementation.

A new store (PostgreSQL) adds a factory to STORES and must pass the same tests unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from lamina.errors import StoreError
from lamina.memories import Cursor, Memory
from lamina.messages import (
    Block,
    ImageBlock,
    Kind,
    Message,
    Role,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)
from lamina.store.base import RetainBatch, Store, StoredPin, StoredSummary
from lamina.store.sqlite import SQLiteStore


def _postgres(request: pytest.FixtureRequest) -> Store:
    from lamina.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_url"))


STORES: dict[str, Callable[[pytest.FixtureRequest], Store]] = {
    "sqlite": lambda request: SQLiteStore(request.getfixturevalue("tmp_path") / "lamina.db"),
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    s = STORES[request.param](request)
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


def test_vectors_filled_after_the_text_land_only_on_unchanged_memories(store: Store) -> None:
    """Retain's second step: a vector is written only onto a memory still without one and
    still holding the content it was made from."""
    store.apply_retain(batch(0, ["r1"], [memory("m1", vec=None), memory("m2", vec=None)]))
    store.apply_retain(batch(1, ["r2"], [memory("m2", "rewritten", vec=None)]))
    store.apply_retain(batch(2, ["r3"], [memory("m3")]))
    vectors = {mid: np.ones(4, dtype=np.float32) for mid in ("m1", "m2", "m3")}
    hashes = {mid: f"h-{mid}-text" for mid in vectors}
    assert store.set_embeddings("b", vectors, "test@1", hashes=hashes) == 1
    m1, m2, m3 = store.get_memories("b", ["m1", "m2", "m3"])
    assert m1.embedding is not None and m1.embedder == "test@1"
    assert m2.embedding is None and m2.text == "rewritten"  # a vector of the old text: dropped
    assert m3.embedding is not None and float(m3.embedding[0]) == 0.5  # had one: kept
    stats = store.bank_stats("b")
    assert (stats.memories, stats.embedded) == (3, 2)


def test_banks_are_isolated(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1")]))
    other = RetainBatch("c", "d1", 0, Cursor(), ["r1"], [memory("m1", "other bank")])
    assert store.apply_retain(other).committed
    (mine,) = store.get_memories("b", ["m1"])
    (theirs,) = store.get_memories("c", ["m1"])
    assert mine.text == "text" and theirs.text == "other bank"
    store.delete_bank("c")
    assert store.get_memories("b", ["m1"])


def test_vectors_round_trip_bit_for_bit(store: Store) -> None:
    rng = np.random.default_rng(3)
    vector = rng.standard_normal(384).astype(np.float32)
    store.apply_retain(batch(0, ["r1"], [replace(memory("m1"), embedding=vector)]))
    (got,) = store.get_memories("b", ["m1"])
    assert got.embedding is not None and got.embedding.dtype == np.float32
    assert np.array_equal(got.embedding, vector)
    (row,) = list(store.iter_memories("b"))
    assert row.memory.embedding is not None and np.array_equal(row.memory.embedding, vector)


def test_text_and_metadata_keep_every_character(store: Store) -> None:
    text = "naïve café — 日本語 🙂 \u2028 tabs\tand\nnewlines"
    store.apply_retain(
        batch(0, ["r1"], [memory("m1", text)], metadata={"path": "/tmp/é", "nested": {"n": [1]}})
    )
    (got,) = store.get_memories("b", ["m1"])
    assert got.text == text
    doc = store.get_document("b", "d1")
    assert doc is not None and doc.metadata == {"path": "/tmp/é", "nested": {"n": [1]}}


def test_document_metadata_merges_and_tags_accumulate(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [], metadata={"a": 1}, tags=["x"]))
    store.apply_retain(batch(1, ["r2"], [], metadata={"b": 2}, tags=["y", "x"]))
    doc = store.get_document("b", "d1")
    assert doc is not None and doc.metadata == {"a": 1, "b": 2} and doc.tags == ("x", "y")
    assert doc.updated_at >= doc.created_at


def test_stale_memories_are_deleted_in_the_same_batch(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1"), memory("m2")]))
    before = store.generation("b")
    outcome = store.apply_retain(batch(1, ["r2"], [memory("m3")], delete_memories=["m1"]))
    assert outcome.deleted == 1 and outcome.inserted == 1
    assert [m.id for m in store.get_memories("b", ["m1", "m2", "m3"])] == ["m2", "m3"]
    assert store.generation("b")[1] > before[1]


def test_api_keys_are_unique_by_name_and_found_by_hash(store: Store) -> None:
    store.create_api_key("ci", "hash-1", ["alpha", "beta"])
    store.create_api_key("admin", "hash-2", ["*"])
    with pytest.raises(StoreError, match="'ci' already exists"):
        store.create_api_key("ci", "hash-3", [])
    assert store.find_api_key("hash-1") == ("ci", ["alpha", "beta"])
    assert store.find_api_key("nope") is None
    listed = store.list_api_keys()
    assert [(n, b) for n, b, _ in listed] == [("admin", ["*"]), ("ci", ["alpha", "beta"])]
    assert all(datetime.fromisoformat(created) for _, _, created in listed)
    assert store.count_api_keys() == 2
    assert store.delete_api_key("ci") and not store.delete_api_key("ci")
    assert store.count_api_keys() == 1


def test_operations_are_saved_and_updated(store: Store) -> None:
    store.save_operation("op1", "retain", "b", "running")
    store.save_operation("op1", "retain", "b", "done", result={"memories": 3})
    op = store.get_operation("op1")
    assert op is not None and op["status"] == "done" and op["result"] == {"memories": 3}
    assert op["error"] is None and datetime.fromisoformat(op["created_at"])
    store.save_operation("op2", "retain", "b", "failed", error="boom")
    failed = store.get_operation("op2")
    assert failed is not None and failed["error"] == "boom" and failed["result"] is None
    assert store.get_operation("missing") is None


def test_migrate_twice_applies_nothing_new(store: Store) -> None:
    assert store.migrate() == []
    assert store.list_banks() == []


def test_racing_retains_of_one_cursor_commit_exactly_once(store: Store) -> None:
    """Many threads compute a batch from the same cursor; exactly one may land."""
    store.apply_retain(batch(0, ["r0"], [memory("m0")]))
    barrier = threading.Barrier(6)

    def attempt(n: int) -> bool:
        barrier.wait()
        return store.apply_retain(batch(1, [f"r{n}", "r0"], [memory(f"x{n}")])).committed

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(attempt, range(1, 7)))
    assert outcomes.count(True) == 1
    assert store.count_records("b") == 2
    assert store.get_cursor("b", "d1").version == 2
    assert store.bank_stats("b").memories == 2


def test_size_is_reported(store: Store) -> None:
    store.apply_retain(batch(0, ["r1"], [memory("m1")]))
    size = store.size_bytes()
    assert size is not None and size > 0


# -- context logs ------------------------------------------------------------------------------


def log_message(n: int, text: str | None = None) -> Message:
    """A message with every kind of block and field set, so a round trip misses nothing."""
    blocks: tuple[Block, ...] = (
        TextBlock(text if text is not None else f"message {n} \x00 ünï 🙂"),
        ThinkingBlock("hmm", "sig"),
        ToolUseBlock(f"t{n}", "Bash", {"command": "ls", "n": [1, 2.5, None, True]}),
        ToolResultBlock(f"t{n}", (TextBlock("out"), ImageBlock("image/png", {"data": "x"}))),
        UnknownBlock("text", {"type": "text", "text": 3}),
    )
    return Message(
        id=f"m{n}",
        role=Role.USER if n % 2 == 0 else Role.ASSISTANT,
        blocks=blocks,
        kind=Kind.PROMPT if n % 2 == 0 else Kind.REPLY,
        timestamp=datetime(2026, 3, 1, 10, n % 60, tzinfo=UTC),
        source=Source(path="s.jsonl", index=n, line=n + 1, end_line=n + 2, offset=10 * n),
        record_type="user",
        session_id="sess",
        is_meta=n == 3,
        tool_use_result={"stdout": "out"},
        model="claude-sonnet-4-5",
        records=({"uuid": f"u{n}", "message": {"content": [{"type": "text", "text": "x"}]}},),
    )


def summary(sid: str, level: int = 1, start: int = 0, end: int = 2) -> StoredSummary:
    children = ("a", "b") if level > 1 else ()
    return StoredSummary(
        sid, level, start, end, children, f"summary {sid} ünï", 7, "extractive@1", "h1", "complete"
    )


def test_log_messages_are_appended_once_in_order_and_come_back_equal(store: Store) -> None:
    messages = [log_message(n) for n in range(5)]
    assert store.append_log_messages("b", "log", messages[:3]) == 3
    # Appending again (the same messages, and a prefix of them with new ones) stores each once.
    assert store.append_log_messages("b", "log", messages[:3]) == 0
    assert store.append_log_messages("b", "log", messages[1:]) == 2
    assert store.read_log("b", "log") == messages
    assert store.read_log("b", "log", start=3) == messages[3:]
    assert store.read_log("b", "log", start=9) == []
    assert store.read_log("b", "log", start=1, end=3) == messages[1:3]
    assert store.read_log("b", "other") == []
    ids = [m.id for m in messages]
    assert store.held_log_ids("b", "log", [ids[0], ids[4], "never-appended"]) == {ids[0], ids[4]}
    assert store.held_log_ids("b", "other", ids) == set()
    [info] = store.list_logs("b")
    assert (info.bank, info.id, info.messages, info.summaries) == ("b", "log", 5, 0)


def test_a_log_can_be_created_empty_and_deleted(store: Store) -> None:
    assert store.append_log_messages("b", "empty", []) == 0
    assert [i.id for i in store.list_logs("b")] == ["empty"]
    assert store.get_bank("b") is not None
    assert store.delete_log("b", "empty") and not store.delete_log("b", "empty")
    assert store.list_logs("b") == []


def test_summaries_are_written_once(store: Store) -> None:
    """A second save of the same id is a no-op that returns False: the first write stands."""
    store.append_log_messages("b", "log", [log_message(0), log_message(1)])
    first = summary("L1-0-2")
    assert store.save_summary("b", "log", first)
    assert not store.save_summary("b", "log", replace(first, text="something else"))
    merged = summary("L2-0-2", level=2)
    assert store.save_summary("b", "log", merged)
    assert store.load_summaries("b", "log") == [first, merged]
    assert store.list_logs("b")[0].summaries == 2
    with pytest.raises(StoreError):
        store.save_summary("b", "no such log", first)


def test_the_last_frontier_round_trips_and_is_replaced(store: Store) -> None:
    store.append_log_messages("b", "log", [log_message(0)])
    assert store.load_frontier("b", "log") is None
    state = {"version": 1, "items": [["raw", 0, 4], ["summary", "L1-4-9"]], "tokens": 812}
    store.save_frontier("b", "log", state)
    assert store.load_frontier("b", "log") == state
    store.save_frontier("b", "log", {"version": 1, "items": []})
    assert store.load_frontier("b", "log") == {"version": 1, "items": []}
    with pytest.raises(StoreError):
        store.save_frontier("b", "no such log", state)


def test_logs_are_isolated_by_bank_and_id(store: Store) -> None:
    store.append_log_messages("b", "one", [log_message(0), log_message(1)])
    store.append_log_messages("b", "two", [log_message(1, "other text")])
    store.append_log_messages("c", "one", [log_message(5)])
    store.save_summary("b", "one", summary("S"))
    store.save_frontier("b", "one", {"version": 1})
    assert [m.id for m in store.read_log("b", "one")] == ["m0", "m1"]
    assert [m.text for m in store.read_log("b", "two")] == ["other text"]
    assert [m.id for m in store.read_log("c", "one")] == ["m5"]
    assert store.load_summaries("b", "two") == store.load_summaries("c", "one") == []
    assert store.load_frontier("c", "one") is None
    assert [i.id for i in store.list_logs("b")] == ["one", "two"]
    store.delete_log("b", "one")
    assert store.read_log("b", "one") == [] and store.load_summaries("b", "one") == []
    assert len(store.read_log("b", "two")) == 1 and len(store.read_log("c", "one")) == 1


def test_deleting_a_bank_removes_its_logs(store: Store) -> None:
    store.append_log_messages("b", "log", [log_message(0)])
    store.save_summary("b", "log", summary("S"))
    store.save_frontier("b", "log", {"version": 1})
    store.append_log_messages("c", "log", [log_message(0)])
    assert store.delete_bank("b")
    assert store.list_logs("b") == [] and store.read_log("b", "log") == []
    assert store.load_summaries("b", "log") == [] and store.load_frontier("b", "log") is None
    # Recreated, the bank starts with no logs; the other bank kept its own.
    store.append_log_messages("b", "log", [])
    assert store.read_log("b", "log") == []
    assert [m.id for m in store.read_log("c", "log")] == ["m0"]


def test_racing_appends_of_one_log_store_each_message_once(store: Store) -> None:
    messages = [log_message(n) for n in range(40)]
    start = threading.Barrier(4)

    def append(offset: int) -> int:
        start.wait()
        return sum(
            store.append_log_messages("b", "log", messages[n : n + 5]) for n in range(offset, 40, 5)
        )

    with ThreadPoolExecutor(4) as pool:
        added = list(pool.map(append, [0, 0, 5, 10]))
    assert sum(added) == 40
    assert sorted(m.id for m in store.read_log("b", "log")) == sorted(m.id for m in messages)


def test_pins_are_kept_per_log_replaced_by_name_and_deleted_with_the_log(store: Store) -> None:
    with pytest.raises(StoreError, match="no context log"):
        store.save_pin("b", "log", StoredPin("spec", "raw", 0, 2, 5, None))
    store.append_log_messages("b", "log", [log_message(0)])
    store.append_log_messages("b", "other", [log_message(0)])
    spec = StoredPin("spec", "raw", 0, 2, 5, None)
    readme = StoredPin("readme", "max", 1, None, None, "README.md")
    store.save_pin("b", "log", spec)
    store.save_pin("b", "log", readme)
    assert store.load_pins("b", "log") == [spec, readme]
    assert store.load_pins("b", "other") == [] and store.load_pins("c", "log") == []
    # Replacing a pin keeps its place in the order.
    exact = StoredPin("spec", "exact", 2, 2, 9, None)
    store.save_pin("b", "log", exact)
    assert store.load_pins("b", "log") == [exact, readme]
    assert store.delete_pin("b", "log", "spec") and not store.delete_pin("b", "log", "spec")
    assert store.load_pins("b", "log") == [readme]
    store.delete_log("b", "log")
    store.append_log_messages("b", "log", [])
    assert store.load_pins("b", "log") == []


def test_spending_is_summed_per_summariser_over_a_window(store: Store) -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    store.record_spend("anthropic:haiku", now - timedelta(hours=3), 1_000, 200)
    store.record_spend("anthropic:haiku", now - timedelta(minutes=30), 500, 100)
    store.record_spend("openai:mini", now - timedelta(minutes=5), 7, 3)
    assert store.spent_since("anthropic:haiku", now - timedelta(hours=1)) == 600
    assert store.spent_since("anthropic:haiku", now - timedelta(days=1)) == 1_800
    assert store.spent_since("openai:mini", now - timedelta(days=1)) == 10
    assert store.spent_since("nobody", now - timedelta(days=1)) == 0
    # Entries older than two days go when new ones come.
    store.record_spend("openai:mini", now + timedelta(days=2, hours=1), 1, 1)
    assert store.spent_since("anthropic:haiku", now - timedelta(days=30)) == 0


def test_a_spend_ledger_in_the_store_is_shared_by_every_user_of_the_database(
    store: Store,
) -> None:
    from lamina.llm.spend import SpendLedger
    from lamina.store.ledger import StoreSpendLedger

    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()
    first: SpendLedger = StoreSpendLedger(store)
    second: SpendLedger = StoreSpendLedger(store)
    first.record("anthropic:haiku", 900, 100, now - 7200)
    second.record("anthropic:haiku", 40, 10, now - 60)
    assert first.spent("anthropic:haiku", now - 3600) == 50
    assert second.spent("anthropic:haiku", now - 86_400) == 1_050


def test_log_token_counts_are_kept_per_key_and_read_up_to_the_first_gap(store: Store) -> None:
    store.save_log_counts("b", "log", "k/1", 0, [(1, 1, 1)])  # no log yet: nothing kept
    store.append_log_messages("b", "log", [log_message(n) for n in range(4)])
    assert store.load_log_counts("b", "log", "k/1") == []
    store.save_log_counts("b", "log", "k/1", 0, [(10, 8, 2), (20, 15, 3)])
    store.save_log_counts("b", "log", "k/1", 3, [(40, 30, 5)])  # position 2 missing
    assert store.load_log_counts("b", "log", "k/1") == [(10, 8, 2), (20, 15, 3)]
    store.save_log_counts("b", "log", "k/1", 1, [(99, 99, 99), (30, 25, 4)])  # 1 stays
    assert store.load_log_counts("b", "log", "k/1") == [
        (10, 8, 2), (20, 15, 3), (30, 25, 4), (40, 30, 5)
    ]  # fmt: skip
    assert store.load_log_counts("b", "log", "k/2") == []
    store.delete_log("b", "log")
    store.append_log_messages("b", "log", [])
    assert store.load_log_counts("b", "log", "k/1") == []


def test_bank_sizes_are_kept_right_through_every_write(store: Store) -> None:
    # Sizes are counters kept at each write (so listing banks never scans a bank): they
    # must agree with what is really there after retains, replacements and deletions.
    store.apply_retain(batch(0, ["r1", "r2", "r3"], [memory("m1"), memory("m2", vec=None)]))
    store.apply_retain(
        batch(0, ["s1", "s2"], [memory("m3", doc="d2"), memory("m4", doc="d2")], doc="d2")
    )
    store.apply_retain(batch(1, ["r3", "r4"], [memory("m1", text="again")]))  # m1 replaced
    store.delete_memory("b", "m4")
    store.set_embeddings("b", {"m2": np.ones(4, dtype=np.float32)}, "other@1")
    stats = store.bank_stats("b")
    live = [row.memory for row in store.iter_memories("b")]
    assert stats.memories == len(live) == 3
    assert stats.embedded == sum(m.embedding is not None for m in live) == 3
    assert stats.embedders == {"test@1": 2, "other@1": 1}
    assert stats.records == store.count_records("b") == 6
    assert stats.documents == 2
    store.delete_document("b", "d2")
    stats = store.bank_stats("b")
    assert (stats.memories, stats.records, stats.embedded) == (2, 4, 2)
    assert stats.embedders == {"test@1": 1, "other@1": 1}
    assert stats.first_time == datetime(2026, 3, 1, 10, tzinfo=UTC)


def test_forgetting_memories_older_than_a_time_keeps_counts_and_search_right(
    store: Store,
) -> None:
    from .parity import START, check_lexical_search_is_exact_bm25, make_memories

    memories = make_memories(300)  # five hours apart from START
    undated = replace(memory("undated", text="w1 w2 w3"), occurred_at=None, said_at=None)
    store.apply_retain(
        RetainBatch("b", "d", 0, Cursor(), [m.record_ids[0] for m in memories], memories)
    )
    store.apply_retain(RetainBatch("b", "u", 0, Cursor(), ["u1"], [undated], format="x"))
    before = store.generation("b")
    cutoff = START + timedelta(hours=5 * 100)  # memories m0 .. m99 are older
    assert store.forget_before("b", cutoff) == 100
    assert store.generation("b")[1] > before[1]
    live = {row.memory.id for row in store.iter_memories("b")}
    assert live == {f"m{i}" for i in range(100, 300)} | {"undated"}
    stats = store.bank_stats("b")
    assert stats.memories == 201 and stats.first_time == START + timedelta(hours=500)
    check_lexical_search_is_exact_bm25(store)  # type: ignore[arg-type]
    assert store.forget_before("b", cutoff) == 0  # nothing that old is left
    assert store.forget_before("no-such-bank", cutoff) == 0
    # A time without a zone is taken as UTC.
    assert store.forget_before("b", (cutoff + timedelta(hours=5)).replace(tzinfo=None)) == 1


def test_corrections_are_kept_by_memory_id_and_outlive_a_rewrite(store: Store) -> None:
    from lamina.memories import Correction

    store.apply_retain(batch(0, ["r1"], [memory("m1"), memory("m2"), memory("m3")]))
    with pytest.raises(StoreError):
        store.save_correction("absent", Correction("m1", "wrong"))
    assert store.load_corrections("b") == {}
    store.save_correction("b", Correction("m1", "wrong", note="a guess"))
    store.save_correction("b", Correction("m2", "superseded", "m3"))
    marks = store.load_corrections("b")
    assert set(marks) == {"m1", "m2"}
    assert marks["m1"].state == "wrong" and marks["m1"].note == "a guess"
    assert marks["m2"].replacement == "m3" and marks["m2"].at is not None
    assert set(store.load_corrections("b", ["m2", "m3"])) == {"m2"}
    assert store.load_corrections("b", []) == {}
    # A retain that rewrites the memory keeps its mark; a new mark replaces the old one.
    store.apply_retain(batch(1, ["r2"], [memory("m1", text="rewritten")]))
    store.save_correction("b", Correction("m2", "wrong"))
    marks = store.load_corrections("b")
    assert marks["m1"].state == "wrong" and marks["m2"] == replace(marks["m2"], state="wrong")
    assert marks["m2"].replacement is None
    # Undone one at a time; gone with the bank; other banks untouched.
    assert store.delete_correction("b", "m1") and not store.delete_correction("b", "m1")
    store.ensure_bank("other")
    store.save_correction("other", Correction("m9", "wrong"))
    assert set(store.load_corrections("b")) == {"m2"}
    store.delete_bank("b")
    assert store.load_corrections("b") == {} and set(store.load_corrections("other")) == {"m9"}
