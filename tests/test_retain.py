"""Retain: incremental, idempotent, crash-safe, concurrent; memory blocks and secrets never
stored."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.retain import RetainOptions
from lamina.embed import HashEmbedder
from lamina.readers import read_transcript
from lamina.store import open_store
from lamina.text.redact import Redactor

from .conftest import CC, CLAUDE_CODE, EXAMPLE, needs_shared


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts):  # type: ignore[no-untyped-def,override]
        self.texts.extend(texts)
        return super().embed_documents(texts)


@pytest.fixture
def bank(database: str) -> MemoryBank:
    return MemoryBank(open_store(database), CountingEmbedder())


def session_lines(turns: int) -> list[str]:
    cc = CC()
    for n in range(turns):
        cc.user(f"question {n} about the parser")
        cc.assistant(f"Looking at it {n}.", msg_id=f"m{n}")
        cc.tool_use(f"t{n}", "Read", msg_id=f"m{n}", file_path=f"src/mod{n}.py")
        cc.tool_result(f"t{n}", f"contents {n}")
        cc.assistant(f"Answer {n}: use a cache.")
    return cc.lines()


def per_turn(lines: list[str]) -> list[int]:
    """Line counts at which each turn (and its reply) is complete."""
    return [i for i in range(1, len(lines) + 1) if i % 5 == 0]


def test_growing_transcript_retained_after_every_turn_stores_each_record_once(
    bank: MemoryBank, tmp_path: Path
) -> None:
    lines = session_lines(50)
    path = tmp_path / "s.jsonl"
    for cut in per_turn(lines):
        path.write_text("\n".join(lines[:cut]) + "\n")
        report = bank.retain_file(path, "proj")
        assert report.status == "retained"
        assert bank.retain_file(path, "proj").status == "unchanged"
    messages = read_transcript(str(path)).messages
    assert bank.store.count_records("proj", "sess-1") == len(messages)
    lines = [m for m in bank.memories("proj") if m.kind == "line"]
    assert len(lines) == 100  # each turn: the prompt, and the assistant's messages
    windows = [m for m in bank.memories("proj") if m.kind == "window"]
    assert len(windows) == 97  # every 4 consecutive lines, once
    prompts = [m.text for m in lines if m.speakers == ("user",)]
    assert sorted(prompts) == sorted(f"user: question {n} about the parser" for n in range(50))
    embedder = bank.embedder
    assert isinstance(embedder, CountingEmbedder)
    assert len(embedder.texts) == 100  # each line embedded once; windows derive theirs


def test_a_turn_continued_after_the_cursor_is_completed_not_duplicated(
    bank: MemoryBank, tmp_path: Path
) -> None:
    lines = session_lines(2)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines[:7]) + "\n")  # stops inside turn 1's response
    bank.retain_file(path, "proj")
    path.write_text("\n".join(lines) + "\n")
    report = bank.retain_file(path, "proj")
    assert report.memories_updated == 2 and report.memories_added == 0  # the answer, its window
    memories = sorted(
        (m for m in bank.memories("proj") if m.kind == "line"), key=lambda m: m.first_line or 0
    )
    assert len(memories) == 4
    assert "Answer 1: use a cache." in memories[3].text
    assert bank.store.count_records("proj") == len(read_transcript(str(path)).messages)


def test_a_partly_written_last_line_is_left_for_the_next_retain(
    bank: MemoryBank, tmp_path: Path
) -> None:
    lines = session_lines(2)
    path = tmp_path / "s.jsonl"
    half = lines[5][: len(lines[5]) // 2]
    path.write_text("\n".join(lines[:5]) + "\n" + half)
    first = bank.retain_file(path, "proj")
    assert first.pending_partial_line and first.warnings == []
    assert bank.retain_file(path, "proj").status == "unchanged"
    path.write_text("\n".join(lines) + "\n")
    bank.retain_file(path, "proj")
    assert bank.store.count_records("proj") == len(read_transcript(str(path)).messages)
    assert len([m for m in bank.memories("proj") if m.speakers == ("user",)]) == 2


def test_a_transcript_rewritten_in_place_is_reread_without_loss_or_duplicates(
    bank: MemoryBank, tmp_path: Path
) -> None:
    lines = session_lines(6)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    bank.retain_file(path, "proj")
    # Compacted in place: the first two turns dropped, a new turn appended.
    extra = session_lines(7)[30:]
    path.write_text("\n".join(lines[10:] + extra) + "\n")
    report = bank.retain_file(path, "proj")
    assert report.status == "reread"
    texts = sorted(m.text for m in bank.memories("proj") if m.speakers == ("user",))
    assert texts == sorted(f"user: question {n} about the parser" for n in range(7))


def test_unchanged_file_costs_almost_nothing(bank: MemoryBank, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(session_lines(30)) + "\n")
    bank.retain_file(path, "proj")
    report = bank.retain_file(path, "proj")
    assert report.status == "unchanged" and report.new_records == 0


def test_memory_blocks_and_secrets_are_never_stored(bank: MemoryBank, tmp_path: Path) -> None:
    cc = CC()
    cc.user(
        "<lamina_memories>\n- [2026-01-01] the deploy key is in vault\n</lamina_memories>\n"
        "connect with postgres://admin:hunter2secret@db.internal/app and key sk-ant-api03-"
        + "a"
        * 40
    )
    cc.assistant("Use OPENAI_API_KEY=sk-proj-" + "b" * 30 + " from the environment.")
    path = cc.write(tmp_path / "s.jsonl")
    report = bank.retain_file(path, "proj")
    assert report.redactions == 3  # the URL's password and two keys, redacted once a turn
    memory = next(m for m in bank.memories("proj") if m.kind == "window")  # the whole turn
    assert "vault" not in memory.text and "lamina_memories" not in memory.text
    assert "hunter2secret" not in memory.text and "aaaa" not in memory.text
    assert "bbbb" not in memory.text
    assert "[REDACTED:url-password]" in memory.text and "db.internal" in memory.text
    plain = MemoryBank(
        bank.store, HashEmbedder(), retain_options=RetainOptions(redactor=Redactor(enabled=False))
    )
    plain.retain_file(path, "raw")
    raw = next(m for m in plain.memories("raw") if m.kind == "window")
    assert "hunter2secret" in raw.text


def test_tool_activity_is_condensed_into_action_lines(bank: MemoryBank, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(session_lines(1)) + "\n")
    bank.retain_file(path, "proj")
    (memory,) = [m for m in bank.memories("proj") if m.kind == "window"]  # the whole turn
    assert memory.text.splitlines() == [
        "user: question 0 about the parser",
        "assistant: Looking at it 0.",
        "assistant: Answer 0: use a cache.",
        "actions: Read: src/mod0.py",
    ]
    assert memory.speakers == ("user", "assistant")
    assert memory.first_line == 1 and memory.last_line == 5


@needs_shared
def test_every_shared_transcript_retains_each_record_once(bank: MemoryBank) -> None:
    for path in sorted(CLAUDE_CODE.glob("*.jsonl")):
        report = bank.retain_file(path, "shared")
        assert report.status == "retained"
        again = bank.retain_file(path, "shared")
        assert again.status == "unchanged"
    total = sum(len(read_transcript(str(p)).messages) for p in CLAUDE_CODE.glob("*.jsonl"))
    assert bank.store.count_records("shared") == total
    docs = {d.id for d in bank.documents("shared")}
    assert "258c7280-ae70-4798-800f-63464d01a85d" in docs
    assert "258c7280-ae70-4798-800f-63464d01a85d/a881341" in docs


RETAIN_SCRIPT = """
import sys
from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.store import open_store
bank = MemoryBank(open_store(sys.argv[1]), HashEmbedder())
for path in sys.argv[3:]:
    bank.retain_file(path, sys.argv[2])
print("done", flush=True)
"""


def test_two_processes_retaining_into_one_bank_at_once(tmp_path: Path, database: str) -> None:
    files = []
    for n in range(6):
        cc = CC(session=f"s{n}")
        for t in range(40):
            cc.user(f"session {n} question {t}")
            cc.assistant(f"session {n} answer {t}")
        files.append(str(cc.write(tmp_path / f"s{n}.jsonl")))
    db = database
    # Both processes retain every file (same documents!), in different orders.
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RETAIN_SCRIPT, db, "proj", *order],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for order in (files, list(reversed(files)))
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    store = open_store(db)
    assert store.count_records("proj") == 6 * 80
    assert store.bank_stats("proj").memories == 6 * (80 + 77)  # lines and 4-line windows


def test_a_retain_killed_at_random_points_leaves_the_bank_consistent(
    tmp_path: Path, database: str
) -> None:
    cc = CC()
    for t in range(2000):
        cc.user(f"question {t} " + "word " * 40)
        cc.assistant(f"answer {t} " + "text " * 40)
    path = str(cc.write(tmp_path / "big.jsonl"))
    db = database
    expected_records = len(read_transcript(path).messages)
    # How long a whole retain takes here, so the kills land inside it.
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", RETAIN_SCRIPT, db, "timing", path],
        check=True,
        capture_output=True,
        timeout=300,
    )
    duration = time.monotonic() - started
    rng = random.Random(11)
    killed = 0
    for trial in range(8):
        if trial >= 4 and killed:
            break
        proc = subprocess.Popen(
            [sys.executable, "-c", RETAIN_SCRIPT, db, "proj", path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # On a loaded machine a retain may run faster than the timing run did: later trials
        # kill sooner, until one lands inside a retain.
        time.sleep(rng.uniform(0.4, 0.95) * duration / (1 if trial < 4 else 2 ** (trial - 3)))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        store = open_store(db)
        records = store.count_records("proj")
        memories = store.bank_stats("proj").memories
        store.close()
        # All or nothing: a retain either fully landed or left no trace.
        assert (records, memories) in ((0, 0), (expected_records, 4000 + 3997))
    assert killed >= 1
    done = subprocess.run(
        [sys.executable, "-c", RETAIN_SCRIPT, db, "proj", path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    store = open_store(db)
    assert store.count_records("proj") == expected_records
    assert store.bank_stats("proj").memories == 4000 + 3997


def test_retain_from_code_is_idempotent(bank: MemoryBank) -> None:
    if not EXAMPLE.exists():
        pytest.skip("example missing")
    messages = read_transcript(str(EXAMPLE)).messages
    first = bank.retain_messages(messages, "proj", "example")
    assert first.status == "retained" and first.new_records == len(messages)
    again = bank.retain_messages(messages, "proj", "example")
    assert again.status == "unchanged"
    more = bank.retain_messages(messages[:-3], "proj", "example")
    assert more.new_records == 0 and more.memories_added == 0
    assert json.dumps(first.as_dict())


class FailingEmbedder(HashEmbedder):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def,override]
        raise RuntimeError("the model crashed")


def test_a_model_failing_after_the_text_is_stored_leaves_its_vectors_to_the_next_retain(
    database: str, tmp_path: Path
) -> None:
    """Retain commits the text before it embeds: when the model fails, the caller hears it,
    the memories are there and recalled by their words, the bank says how many await
    vectors, and the next retain embeds exactly those (nothing stored twice), with the
    vectors a retain that never failed made."""
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(session_lines(80)) + "\n")
    failing = MemoryBank(open_store(database), FailingEmbedder())
    with pytest.raises(RuntimeError, match="the model crashed"):
        failing.retain_file(str(path), "proj")
    stored = failing.stats("proj")
    assert stored.memories > 160 and stored.embedded == 0
    assert failing.awaiting_vectors("proj") == stored.memories
    found = failing.recall("question 7 about the parser", "proj", dense=False)
    assert found.hits and found.awaiting_vectors == stored.memories
    assert found.as_dict()["awaiting_vectors"] == stored.memories

    working = MemoryBank(open_store(database), CountingEmbedder())
    report = working.retain_file(str(path), "proj")
    elsewhere = working.retain_file(str(path), "never-failed")
    assert report.status == "unchanged" and report.embedded == stored.memories
    assert working.stats("proj").memories == elsewhere.memories_added == stored.memories
    assert working.awaiting_vectors("proj") == 0
    mine = {m.id: m.embedding for m in working.memories("proj")}
    theirs = {m.id: m.embedding for m in working.memories("never-failed")}
    assert mine.keys() == theirs.keys()
    assert all(bytes(mine[k]) == bytes(theirs[k]) for k in mine)  # type: ignore[arg-type]


def test_memories_awaiting_vectors_are_told_and_embedded_by_the_next_retain(
    tmp_path: Path,
) -> None:
    """Memories stored without vectors are counted by `status` and recall's JSON (recall
    finds them by their words), and the next retain into the bank embeds them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env.update(LAMINA_HOME=str(tmp_path / "home"), LAMINA_EMBEDDER="hash")
    example = Path(__file__).parents[1] / "examples" / "session.jsonl"

    def run(*args: str) -> dict[str, object]:
        done = subprocess.run([sys.executable, "-m", "lamina", *args, "--json"],
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        found: dict[str, object] = json.loads(done.stdout)
        return found

    run("retain", str(example), "--bank", "ex", "--no-embed")
    (bank,) = run("status")["banks"]  # type: ignore[misc]
    assert bank["awaiting_vectors"] == bank["memories"] > 0 and bank["embedded"] == 0
    assert any("await vectors" in w for w in run("status")["warnings"])  # type: ignore[attr-defined]
    recalled = run("recall", "which database did we choose?", "--bank", "ex")
    assert recalled["results"] and recalled["awaiting_vectors"] == bank["memories"]
    run("retain", str(example), "--bank", "ex")
    (bank,) = run("status")["banks"]  # type: ignore[misc]
    assert bank["awaiting_vectors"] == 0 and bank["embedded"] == bank["memories"]
    assert run("recall", "which database did we choose?", "--bank", "ex")["awaiting_vectors"] == 0


@needs_shared
def test_several_files_commit_all_their_text_first_and_get_the_vectors_each_gets_alone(
    tmp_path: Path,
) -> None:
    """A retain of several files (`vectors_later`, as `lamina retain` does) commits every
    file's text, recalled by its words, before it embeds any; then fills each file's
    vectors, bit for bit those a retain of that file alone stores, with the real model."""
    from lamina.embed.bundled import MiniLML6Embedder
    from lamina.store.sqlite import SQLiteStore

    names = ("drmaciver-python-to-rust-port.jsonl", "spotter-258c7280.subagent-a881341.jsonl")
    files = [str(CLAUDE_CODE / name) for name in names]
    later = MemoryBank(SQLiteStore(tmp_path / "later.db"), MiniLML6Embedder())
    reports = [later.retain_file(path, "proj", vectors_later=True) for path in files]
    stored = later.stats("proj").memories
    assert stored == sum(r.memories_added for r in reports) > 0
    assert later.awaiting_vectors("proj") == stored
    assert later.recall("rust port", "proj", dense=False).hits
    assert later.fill_vectors(reports, "proj") == stored
    assert later.awaiting_vectors("proj") == 0
    assert [r.embedded for r in reports] == [r.memories_added for r in reports]

    alone = MemoryBank(SQLiteStore(tmp_path / "alone.db"), MiniLML6Embedder())
    for path in files:
        alone.retain_file(path, "proj")
    mine = {m.id: m.embedding for m in later.memories("proj")}
    theirs = {m.id: m.embedding for m in alone.memories("proj")}
    assert mine.keys() == theirs.keys()
    assert all(bytes(mine[k]) == bytes(theirs[k]) for k in mine)  # type: ignore[arg-type]


@needs_shared
def test_the_cli_retains_several_files_and_embeds_every_memory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env.update(LAMINA_HOME=str(tmp_path / "home"), LAMINA_EMBEDDER="hash")
    names = ("drmaciver-python-to-rust-port.jsonl", "spotter-258c7280.subagent-a881341.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "lamina", "retain", *(str(CLAUDE_CODE / n) for n in names),
         "--bank", "proj", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["files"]
    assert [f["status"] for f in files] == ["retained", "retained"]
    assert all(f["embedded"] == f["memories_added"] > 0 for f in files)
    status = subprocess.run(
        [sys.executable, "-m", "lamina", "status", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    (bank,) = json.loads(status.stdout)["banks"]
    assert bank["awaiting_vectors"] == 0 and bank["embedded"] == bank["memories"]
