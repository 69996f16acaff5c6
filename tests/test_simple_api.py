"""The short Python API (`lamina.open`, `MemoryStore`, `BankHandle`) as a user meets it: the
documented example runs as written, plain message dicts retain once however often they are
sent, and reads of a bank that does not exist fail as the command line does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import lamina
from lamina.bank.bank import MemoryBank

from .conftest import EXAMPLE, ROOT

CHAT = [
    {"role": "user", "content": "Which port does the notes API listen on?"},
    {"role": "assistant", "content": "Port 8080; INKWELL_PORT changes it."},
]


def python_block(page: str, heading: str) -> str:
    """The first Python block under the `## heading` of a Markdown page."""
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", section, re.S)[0]


def clean_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    for key in ("LAMINA_DATABASE_URL", "LAMINA_CONFIG", "LAMINA_SUMMARISER"):
        env.pop(key, None)
    return env


def test_the_short_example_runs_as_documented(tmp_path: Path) -> None:
    code = python_block((ROOT / "docs" / "python.md").read_text(encoding="utf-8"), "In a few lines")
    readme = python_block((ROOT / "README.md").read_text(encoding="utf-8"), "From Python")
    assert readme == code, "the README's example is the docs' example"
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    home = tmp_path / "home"
    command = [sys.executable, str(script)]
    env = clean_env(home)
    runs = [
        subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        lines = run.stdout.splitlines()
        scores = [float(line.split(" ", 1)[0]) for line in lines]
        assert lines and "SQLite" in lines[0]  # the note answers the question, first
        assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert runs[0].stdout == runs[1].stdout
    # The second run stored nothing again: one note, one conversation of two messages.
    with lamina.open(home) as store:
        bank = store.bank("notes")
        assert {d.id for d in bank.documents()} == {"decisions", "conversation"}
        assert bank.stats().records == 3
        assert [b.name for b in store.banks()] == ["notes"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[lamina.MemoryStore]:
    with lamina.open(tmp_path / "home") as opened:
        yield opened


def test_plain_dicts_retain_once_and_a_growing_conversation_adds_only_what_is_new(
    store: lamina.MemoryStore,
) -> None:
    bank = store.bank("chat")
    first = bank.retain_messages(CHAT, document="chat-1")
    assert (first.status, first.new_records) == ("retained", 2)
    assert bank.retain_messages(CHAT, document="chat-1").new_records == 0
    grown = [*CHAT, {"role": "user", "content": "And the staging server is called ash."}]
    assert bank.retain_messages(grown, document="chat-1").new_records == 1
    # The Anthropic shape (content blocks) and a generator read the same way.
    anthropic = ({"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
                 for m in CHAT)  # fmt: skip
    assert bank.retain_messages(anthropic, document="chat-2").new_records == 2
    assert bank.stats().records == 5
    hits = list(bank.recall("what is the staging server called?"))
    assert "ash" in hits[0].text


def test_a_note_is_kept_once_and_forgotten_on_request(store: lamina.MemoryStore) -> None:
    bank = store.bank("notes")
    assert bank.retain_text("The cache goes in Redis.").status == "retained"
    again = bank.retain_text("The cache goes in Redis.")
    assert (again.status, again.new_records) == ("unchanged", 0)
    bank.retain_text("Deploys happen on Tuesdays.", document="ops", speaker="Ana")
    assert sorted(d.id for d in bank.documents()) == ["notes", "ops"]
    assert bank.forget("ops") == 1
    assert [d.id for d in bank.documents()] == ["notes"]
    memory = next(iter(bank.recall("where does the cache go?"))).memory.id
    assert bank.forget(memory=memory) == 1
    assert bank.forget(before=datetime.now(UTC)) == 0  # nothing left to forget
    # A forgotten memory stays forgotten: the same note again does not bring it back.
    assert bank.retain_text("The cache goes in Redis.").memories_added == 0
    bank.retain_text("Backups run nightly.")
    assert bank.forget(everything=True) == 1
    assert store.banks() == []


def test_reads_of_a_missing_bank_raise_not_found_and_writes_create_it(
    store: lamina.MemoryStore, tmp_path: Path
) -> None:
    missing = store.bank("nope")  # taking a handle reads nothing
    for read in (
        lambda: missing.recall("anything"),
        missing.documents,
        missing.stats,
        lambda: missing.forget("x"),
        lambda: missing.forget(everything=True),
    ):
        with pytest.raises(lamina.NotFoundError, match="no bank named 'nope'"):
            read()
    # As the command line: exit 2, the same message.
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "recall", "anything", "--bank", "nope"],
        env=clean_env(tmp_path / "home"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "no bank named 'nope'" in out.stderr
    missing.retain_text("Now it exists.")
    assert [b.name for b in store.banks()] == ["nope"]
    with pytest.raises(lamina.NotFoundError, match="no document 'other'"):
        missing.forget("other")
    with pytest.raises(lamina.NotFoundError, match="no memory 'm-0'"):
        missing.forget(memory="m-0")


def test_what_cannot_be_retained_is_an_input_error_and_stores_nothing(
    store: lamina.MemoryStore,
) -> None:
    bank = store.bank("strict")
    with pytest.raises(lamina.InputError, match="text is empty"):
        bank.retain_text("   ")
    with pytest.raises(lamina.InputError, match="no messages given"):
        bank.retain_messages([])
    with pytest.raises(lamina.InputError):
        bank.retain_messages([{"nothing": "here"}])
    with pytest.raises(lamina.InputError, match="not a valid bank name"):
        store.bank("a/b")
    with pytest.raises(lamina.InputError, match="one of document, memory"):
        bank.forget()
    assert store.banks() == []


def test_open_takes_a_directory_a_file_or_a_url(tmp_path: Path) -> None:
    with lamina.open(tmp_path / "dir") as store:
        store.bank("b").retain_file(EXAMPLE)
    assert (tmp_path / "dir" / "lamina.db").is_file()
    for where in (tmp_path / "dir" / "lamina.db", f"sqlite:///{tmp_path}/dir/lamina.db"):
        with lamina.open(where) as store:
            assert [b.name for b in store.banks()] == ["b"]
    with pytest.raises(lamina.ConfigError, match="unknown database scheme"):
        lamina.open("mysql://localhost/x")


def test_the_with_block_closes_the_store(tmp_path: Path) -> None:
    closed: list[bool] = []

    class Counted(MemoryBank):
        def close(self) -> None:
            closed.append(True)
            super().close()

    memory_bank = Counted.open(tmp_path / "home")
    with lamina.MemoryStore(memory_bank) as store:
        assert store.memory_bank is memory_bank
    assert closed == [True]
    with MemoryBank.open(tmp_path / "home") as bank:  # the full API closes the same way
        assert bank.banks() == []


def test_retaining_a_file_in_a_format_it_plainly_is_not_stores_nothing(tmp_path: Path) -> None:
    # The Python API refuses as the CLI does: a Claude Code session read as OpenAI messages
    # would give only warnings and leave an empty document behind.
    import lamina

    with lamina.open(tmp_path / "data") as store:
        bank = store.bank("notes")
        with pytest.raises(lamina.LaminaError, match="not in the openai format"):
            bank.retain_file(EXAMPLE, format="openai")
        assert store.banks() == []
