"""Moving between stores: `lamina migrate`, `lamina copy`, schema pins, and the same recall
results whichever store holds the bank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lamina.access import hash_key
from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.readers.locomo import read_locomo_samples
from lamina.store import open_store, postgres_migrations, sqlite_migrations
from lamina.store.copy import copy_banks
from lamina.store.postgres import PostgresStore
from lamina.store.search import SearchFilter
from lamina.store.sqlite import SQLiteStore

from .conftest import CLAUDE_CODE, EXAMPLE, LOCOMO, needs_shared

PINS = Path(__file__).parent / "schema"
SPOTTER = CLAUDE_CODE / "spotter-258c7280.jsonl"

PG_MIGRATIONS = [name for name, _sql in postgres_migrations.MIGRATIONS]
SQLITE_MIGRATIONS = [name for name, _sql in sqlite_migrations.MIGRATIONS]


def lamina(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_fresh_database_has_the_pinned_schema(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store: SQLiteStore | PostgresStore
    if kind == "sqlite":
        store = SQLiteStore(tmp_path / "lamina.db")
    else:
        store = PostgresStore(request.getfixturevalue("pg_url"))
    store.migrate()
    schema = "\n".join(store.schema()) + "\n"
    store.close()
    pinned = (PINS / f"{kind}.txt").read_text()
    assert schema == pinned, (
        f"the {kind} schema changed: add a migration (never edit a released one), then"
        f" update tests/schema/{kind}.txt"
    )


def test_migrate_reports_what_it_applied_then_nothing(tmp_path: Path, pg_url: str) -> None:
    first = lamina("--database-url", pg_url, "migrate", "--json", home=tmp_path)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["applied"] == PG_MIGRATIONS
    assert pg_url.rsplit("@", 1)[1] in report["database"]
    again = lamina("--database-url", pg_url, "migrate", home=tmp_path)
    assert again.returncode == 0 and "up to date" in again.stdout
    sqlite = lamina("migrate", "--json", home=tmp_path)
    assert json.loads(sqlite.stdout)["applied"] == SQLITE_MIGRATIONS


def test_processes_migrating_one_database_at_once_apply_each_migration_once(pg_url: str) -> None:
    script = (
        "import sys; from lamina.store import open_store; print(open_store(sys.argv[1]).migrate())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out.decode().strip())
    assert sorted(outputs).count(str(PG_MIGRATIONS)) == 1
    assert sorted(outputs).count("[]") == 3


def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    done = lamina(
        "--database-url", "postgresql://nobody:secret@127.0.0.1:9/none", "banks", home=tmp_path
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect" in lines[0]
    assert "secret" not in done.stderr and "***" in lines[0]


def test_an_unknown_database_scheme_is_refused(tmp_path: Path) -> None:
    done = lamina("--database-url", "mysql://x@y/z", "banks", home=tmp_path)
    assert done.returncode != 0 and "unknown database scheme 'mysql'" in done.stderr


@needs_shared
def test_copy_sqlite_to_postgres_and_back_loses_nothing(tmp_path: Path, pg_url: str) -> None:
    source = MemoryBank(SQLiteStore(tmp_path / "a.db"), HashEmbedder())
    source.retain_file(EXAMPLE, "example")
    source.retain_file(SPOTTER, "spotter", tags=["shared"])
    source.store.create_api_key("ci", hash_key("k-123"), ["example"])
    source.close()

    first = lamina(
        "copy", "--from", str(tmp_path / "a.db"), "--to", pg_url, "--json", home=tmp_path
    )
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert {b["bank"]: b["skipped"] for b in report["banks"]} == {"example": 0, "spotter": 0}
    assert report["api_keys"] == {"copied": 1, "skipped": 0}

    back = tmp_path / "b.db"
    assert lamina("copy", "--from", pg_url, "--to", str(back), home=tmp_path).returncode == 0
    a, p, b = SQLiteStore(tmp_path / "a.db"), PostgresStore(pg_url), SQLiteStore(back)
    for bank in ("example", "spotter"):
        want = {r.memory.id: r.memory for r in a.iter_memories(bank)}
        for other in (p, b):
            got = {r.memory.id: r.memory for r in other.iter_memories(bank)}
            assert got.keys() == want.keys()
            for memory_id, memory in want.items():
                copy = got[memory_id]
                assert (copy.text, copy.record_ids, copy.said_at, copy.tags) == (
                    memory.text,
                    memory.record_ids,
                    memory.said_at,
                    memory.tags,
                )
                assert memory.embedding is not None and copy.embedding is not None
                assert np.array_equal(copy.embedding, memory.embedding)
            for document in a.list_documents(bank):
                assert other.record_ids(bank, document.id) == a.record_ids(bank, document.id)
                assert other.get_cursor(bank, document.id).fingerprint == (
                    a.get_cursor(bank, document.id).fingerprint
                )
    assert p.find_api_key(hash_key("k-123")) == ("ci", ["example"])
    # The copied bank is live: retaining the same files again finds nothing new.
    moved = MemoryBank(p, HashEmbedder())
    assert moved.retain_file(SPOTTER, "spotter").status == "unchanged"
    moved.close()
    a.close()
    b.close()


def test_an_interrupted_copy_resumes_and_a_finished_one_changes_nothing(
    tmp_path: Path, pg_url: str
) -> None:
    source = MemoryBank(SQLiteStore(tmp_path / "a.db"), HashEmbedder())
    for n in range(3):
        source.retain_messages(
            read_example()[: 6 + n], "proj", f"doc-{n}", metadata={"n": n}, tags=[f"t{n}"]
        )
    target = PostgresStore(pg_url)
    first = copy_banks(source.store, target)
    assert first.banks[0].copied == 3
    # As if the copy had stopped before doc-1, with doc-2 half-changed in the target.
    target.delete_document("proj", "doc-1")
    stray = next(r.memory for r in target.iter_memories("proj") if r.memory.document == "doc-2")
    target.delete_memory("proj", stray.id)
    again = copy_banks(source.store, target)
    assert (again.banks[0].copied, again.banks[0].skipped) == (2, 1)
    done = copy_banks(source.store, target)
    assert (done.banks[0].copied, done.banks[0].skipped) == (0, 3)
    assert target.bank_stats("proj").memories == source.store.bank_stats("proj").memories
    doc = target.get_document("proj", "doc-1")
    assert doc is not None and doc.metadata == {"n": 1} and doc.tags == ("t1",)
    target.close()
    source.close()


def test_context_logs_copy_to_postgres_and_back_equal_and_resumably(
    tmp_path: Path, pg_url: str
) -> None:
    from lamina.context import CompileOptions, ExtractiveSummariser, StoredLog, enters_log
    from lamina.context.pins import Pin
    from lamina.errors import StoreError

    options = CompileOptions(budget=4_000, reserve=500)
    messages = [m for m in read_example() if enters_log(m)]
    source = SQLiteStore(tmp_path / "a.db")
    live = StoredLog.open(source, "proj", "sess", ExtractiveSummariser())
    for message in messages:
        if live.append([message]) and message.role == "assistant":
            last = live.compile(options)
    StoredLog.open(source, "other", "notes", ExtractiveSummariser()).append(messages[:5])
    live.pin(Pin("opening", "raw", start=0, end=3))
    live.pin(Pin("readme", "max", 1, document="README.md"))
    logged = source.read_log("proj", "sess")
    assert source.load_summaries("proj", "sess") and source.load_frontier("proj", "sess")

    middle = PostgresStore(pg_url)
    # As if an earlier copy had stopped a third of the way into the log.
    middle.append_log_messages("proj", "sess", logged[:20])
    first = copy_banks(source, middle)
    copied = {b.bank: b.as_dict()["logs"] for b in first.banks}
    summaries = len(source.load_summaries("proj", "sess"))
    assert copied == {
        "other": {"logs": 1, "messages": 5, "summaries": 0, "pins": 0},
        "proj": {"logs": 1, "messages": len(logged) - 20, "summaries": summaries, "pins": 2},
    }
    again = copy_banks(source, middle)
    assert [(b.log_messages, b.summaries, b.pins) for b in again.banks] == [(0, 0, 0)] * 2

    back = SQLiteStore(tmp_path / "b.db")
    copy_banks(middle, back)
    for store in (middle, back):
        for bank, log in (("proj", "sess"), ("other", "notes")):
            assert store.read_log(bank, log) == source.read_log(bank, log)
            assert store.load_summaries(bank, log) == source.load_summaries(bank, log)
            assert store.load_frontier(bank, log) == source.load_frontier(bank, log)
            assert store.load_pins(bank, log) == source.load_pins(bank, log)
    assert [p.name for p in back.load_pins("proj", "sess")] == ["opening", "readme"]
    # The copied log is live: it compiles the same request without summarising again.
    moved = StoredLog.open(back, "proj", "sess", ExtractiveSummariser())
    result = moved.compile(options)
    assert result.report["summaries_written"] == 0 and result.request == last.request

    # A log that went another way in the target is not overwritten.
    back.delete_log("other", "notes")
    back.append_log_messages("other", "notes", messages[5:6])
    with pytest.raises(StoreError, match="differs"):
        copy_banks(source, back, ["other"])
    for store in (source, middle, back):
        store.close()


def read_example() -> list:  # type: ignore[type-arg]
    from lamina.readers import read_transcript

    return list(read_transcript(str(EXAMPLE)).messages)


@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo is not beside the checkout")
def test_recall_is_the_same_on_sqlite_and_postgres(tmp_path: Path, pg_url: str) -> None:
    sample = read_locomo_samples(str(LOCOMO))[0]
    banks = [
        MemoryBank(open_store(str(tmp_path / "lamina.db")), HashEmbedder()),
        MemoryBank(open_store(pg_url), HashEmbedder()),
    ]
    for bank in banks:
        bank.retain_messages(sample.messages, "locomo", sample.sample_id)
    questions = [q.question for q in sample.questions][:60]
    assert len(questions) >= 30
    for question in questions:
        sqlite_ids, pg_ids = (
            [h.memory.id for h in bank.recall(question, "locomo").hits[:10]] for bank in banks
        )
        assert sqlite_ids == pg_ids, question
    for bank in banks:
        bank.close()


def test_the_cli_retains_and_recalls_on_postgres(tmp_path: Path, pg_url: str) -> None:
    env_url = ("--database-url", pg_url)
    retained = lamina(*env_url, "retain", str(EXAMPLE), "--bank", "ex", "--json", home=tmp_path)
    assert retained.returncode == 0, retained.stderr
    assert json.loads(retained.stdout)["files"][0]["status"] == "retained"
    found = lamina(
        *env_url, "recall", "which database did we choose, and why?", "--bank", "ex", "--json",
        home=tmp_path,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results and "SQLite" in results[0]["text"]
    # Nothing went to the data directory's SQLite file.
    assert not (tmp_path / "lamina.db").exists()
    banks = lamina(*env_url, "banks", "--json", home=tmp_path)
    assert [b["bank"] for b in json.loads(banks.stdout)["banks"]] == ["ex"]


@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo is not beside the checkout")
def test_a_copy_into_postgres_builds_the_vector_index_once_after_the_load(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina.store import postgres_search

    source = MemoryBank(SQLiteStore(tmp_path / "a.db"), HashEmbedder())
    for sample in read_locomo_samples(str(LOCOMO))[:2]:
        source.retain_messages(sample.messages, "big", sample.sample_id)
    monkeypatch.setattr(postgres_search, "EXACT_LIMIT", 10)  # "big" enough for its own HNSW
    target = PostgresStore(pg_url)
    built: list[str] = []
    original = PostgresStore.ensure_vector_index

    def spy(self: PostgresStore, bank: str, dim: int, **kw: object) -> bool:
        made = original(self, bank, dim, **kw)  # type: ignore[arg-type]
        if made:
            built.append(bank)
        return made

    monkeypatch.setattr(PostgresStore, "ensure_vector_index", spy)
    notes: list[tuple[str, str]] = []
    report = copy_banks(source.store, target, note=lambda bank, text: notes.append((bank, text)))
    # Not once per document during the load: once, after it.
    assert built == ["big"]
    # The build's memory comes from the bank's vectors, and the copy says what it chose.
    count = target.count_memories("big", SearchFilter())
    need = postgres_search.index_build_need(count, HashEmbedder().dim)
    assert need < postgres_search.BUILD_MEMORY_MIN
    [plan] = report.banks[0].index_builds
    assert plan["vectors"] == count and plan["maintenance_work_mem"] == "64MB"
    assert notes == [
        (
            "big",
            f"building the HNSW index of {count:,} vectors of 256 dimensions with"
            f" maintenance_work_mem 64MB (the least a build is given; {need >> 20} MB needed)",
        )
    ]
    with target.pool.connection() as conn:
        bank_id = conn.execute("SELECT id FROM banks WHERE name = 'big'").fetchone()[0]
    assert target.vector_index_exists(bank_id, HashEmbedder().dim)
    query = HashEmbedder().embed_query("when did she go to the support group?")
    approximate = [s for s, _ in target.dense_search("big", query, 5, SearchFilter())]
    exact = [s for s, _ in target.dense_search("big", query, 5, SearchFilter(), exact=True)]
    assert len(set(approximate) & set(exact)) >= 4
    target.close()
    source.close()


def test_an_index_build_gets_what_it_needs_within_what_the_server_and_machine_allow(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million vectors of 384 dimensions (a 2.05 GB HNSW index) are given what they need
    to build in memory, unless the server's maximum, half of the memory this machine has
    available (the server runs here) or the shared memory a parallel build takes from
    /dev/shm is less; the choice names what decided it."""
    from lamina.store import postgres_search

    alone = postgres_search.plan_index_build(1_000_000, 384)
    assert 2_050 << 20 < alone.chosen == alone.needed < 3 << 30
    assert alone.bound == f"what the index needs, {alone.needed >> 20} MB"
    huge = postgres_search.plan_index_build(5_000_000, 384)
    assert huge.chosen == postgres_search.BUILD_MEMORY_CAP
    assert huge.bound.endswith("bounded by Lamina's cap for one build")
    monkeypatch.setattr(postgres_search, "_available_memory", lambda: 2 << 30)
    monkeypatch.setattr(postgres_search, "_shared_memory_free", lambda: 10 << 30)
    store = PostgresStore(pg_url)
    with store.pool.connection() as conn:
        limits = postgres_search.build_memory_limits(conn)
    store.close()
    reasons = {why: limit for limit, why in limits}
    assert reasons["half of this machine's available memory"] == 1 << 30
    assert reasons["the server's maximum maintenance_work_mem"] >= 1 << 40
    assert reasons["the shared memory free in /dev/shm"] == 9 << 30
    short = postgres_search.plan_index_build(1_000_000, 384, limits)
    assert (short.chosen, short.setting) == (1 << 30, "1024MB")
    assert short.bound.endswith("bounded by half of this machine's available memory")
