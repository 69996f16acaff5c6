"""Audit and correction, as a user meets them: the real `lamina hook` process on a real session
in a real SQLite bank records each prompt's injection (`lamina injections`), and a memory marked
wrong or superseded (`lamina memory`) changes what the hook injects and what recall returns,
until it is unmarked. The store side runs on PostgreSQL too (tests/test_store_contract.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank

from .conftest import needs_shared, shared_transcripts

pytestmark = needs_shared

SESSION = "drmaciver-python-to-rust-port.jsonl"
ON_TOPIC = "Which error type does the Rust factorial return?"
OFF_TOPIC = "write a haiku about autumn"


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A data directory whose bank `proj` holds one real Claude Code session."""
    (session,) = [p for p in shared_transcripts() if p.name == SESSION]
    base = tmp_path / "home"
    bank = MemoryBank.open(base)
    bank.retain_file(session, "proj", document="rust-port")
    bank.close()
    return base


def environ(home: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj",
                "LAMINA_CONFIG": str(tmp_path / "absent.toml"),
                "LAMINA_HOOK_TIME_LIMIT": "60"})  # fmt: skip
    return env


def hook(home: Path, tmp_path: Path, prompt: str, session: str = "s-1") -> list[str]:
    """The ids of the memories the hook injected, best first, as its hook log lists them
    (checked against the block it printed: empty exactly when nothing was printed)."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": session,
               "prompt": prompt, "cwd": str(tmp_path)}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "lamina", "hook"], input=json.dumps(payload),
        capture_output=True, text=True, env=environ(home, tmp_path), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    last = (home / "logs" / "hooks.log").read_text().splitlines()[-1]
    ids: list[str] = json.loads(last.partition(" | timings ")[2])["ids"]
    printed = result.stdout.strip()
    assert bool(printed) == bool(ids)
    if printed:
        context = json.loads(printed)["hookSpecificOutput"]["additionalContext"]
        assert context.count("\n- ") + context.startswith("- ") >= len(ids) or context
    return ids


def lamina(home: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args], capture_output=True, text=True,
        env=environ(home, tmp_path), timeout=120,
    )  # fmt: skip


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # exactly one document, or this fails


def test_two_prompts_are_listed_with_the_memories_the_hook_injected(
    home: Path, tmp_path: Path
) -> None:
    first = hook(home, tmp_path, ON_TOPIC, session="s-1")
    assert first
    assert hook(home, tmp_path, OFF_TOPIC, session="s-2") == []
    listed = as_json(lamina(home, tmp_path, "injections", "--json"))["injections"]
    assert [e["session"] for e in listed] == ["s-1", "s-2"]
    on, off = listed
    assert on["injected"] and on["bank"] == "proj" and on["prompt"] == ON_TOPIC
    assert [m["id"] for m in on["memories"]] == first
    assert all(m["kind"] and m["tokens"] > 0 and "score" in m for m in on["memories"])
    assert on["tokens"] == sum(m["tokens"] for m in on["memories"])
    assert on["path"] in ("cold", "lexical-only") and on["ms"] > 0
    assert not off["injected"] and off["memories"] == []
    assert "floor" in off["reason"]
    # Filters, and the log is the owner's alone.
    only = as_json(lamina(home, tmp_path, "injections", "--session", "s-2", "--json"))
    assert [e["session"] for e in only["injections"]] == ["s-2"]
    last = as_json(lamina(home, tmp_path, "injections", "--last", "1", "--json"))
    assert [e["session"] for e in last["injections"]] == ["s-2"]
    log = home / "logs" / "injections.jsonl"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = lamina(home, tmp_path, "injections")
    assert text.returncode == 0 and ON_TOPIC in text.stdout and "nothing:" in text.stdout
    status = as_json(lamina(home, tmp_path, "status", "--json"))
    assert status["injections"]["prompts"] == 2 and status["injections"]["injected"] == 1


def test_a_secret_or_private_span_in_a_prompt_is_not_written_to_the_log(
    home: Path, tmp_path: Path
) -> None:
    secret = "ghp_" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7j"
    hook(home, tmp_path, f"why does the factorial fail with token {secret} <private>hidden"
                         " words</private> here?")  # fmt: skip
    raw = (home / "logs" / "injections.jsonl").read_text()
    assert secret not in raw and "hidden words" not in raw and "REDACTED" in raw


def test_a_memory_marked_wrong_is_not_injected_until_unmarked(home: Path, tmp_path: Path) -> None:
    before = hook(home, tmp_path, ON_TOPIC)
    assert before
    top = before[0]
    marked = as_json(lamina(home, tmp_path, "memory", "wrong", top, "--note", "a guess", "--json"))
    assert marked["mark"]["state"] == "wrong" and marked["mark"]["note"] == "a guess"
    after = hook(home, tmp_path, ON_TOPIC)
    assert top not in after
    # The injection log no longer lists it either.
    last = as_json(lamina(home, tmp_path, "injections", "--last", "1", "--json"))
    assert top not in {m["id"] for m in last["injections"][0]["memories"]}
    # Recall leaves it out; --show-wrong shows it last, with its mark.
    plain = as_json(lamina(home, tmp_path, "recall", ON_TOPIC, "--json"))
    assert top not in [r["id"] for r in plain["results"]]
    shown = as_json(
        lamina(home, tmp_path, "recall", ON_TOPIC, "--show-wrong", "--budget", "100000", "--json")
    )
    results = shown["results"]
    assert results[-1]["id"] == top and results[-1]["correction"]["state"] == "wrong"
    assert [r for r in results if "correction" in r] == results[-1:]
    listed = as_json(lamina(home, tmp_path, "memory", "marks", "--json"))["marks"]
    assert [m["memory"] for m in listed] == [top]
    assert lamina(home, tmp_path, "memory", "unmark", top).returncode == 0
    assert hook(home, tmp_path, ON_TOPIC) == before


def test_superseding_swaps_which_memory_is_injected(home: Path, tmp_path: Path) -> None:
    before = hook(home, tmp_path, ON_TOPIC)
    assert before
    old = before[0]
    bank = MemoryBank.open(home)
    try:
        # A memory the hook did not inject: only the correction brings it in.
        new = next(
            m.id
            for m in bank.memories("proj", with_embeddings=False)
            if m.id not in before and (m.tokens or 0) < 300
        )
    finally:
        bank.close()
    assert lamina(home, tmp_path, "memory", "supersede", old, new).returncode == 0
    after = hook(home, tmp_path, ON_TOPIC)
    assert old not in after and new in after
    last = as_json(lamina(home, tmp_path, "injections", "--last", "1", "--json"))
    replacing = [m for m in last["injections"][0]["memories"] if m["id"] == new]
    assert replacing and replacing[0]["replaces"] == [old]
    recalled = as_json(lamina(home, tmp_path, "recall", ON_TOPIC, "--json"))["results"]
    ids = [r["id"] for r in recalled]
    assert old not in ids and ids.count(new) == 1
    assert recalled[ids.index(new)]["correction"] == {"replaces": [old]}
    assert lamina(home, tmp_path, "memory", "unmark", old).returncode == 0
    assert hook(home, tmp_path, ON_TOPIC) == before


def test_marks_survive_reindex_and_export_import(home: Path, tmp_path: Path) -> None:
    ids = hook(home, tmp_path, ON_TOPIC)
    wrong, old, new = ids[0], ids[1], ids[2]
    assert lamina(home, tmp_path, "memory", "wrong", wrong).returncode == 0
    assert lamina(home, tmp_path, "memory", "supersede", old, new, "--note", "n").returncode == 0
    assert lamina(home, tmp_path, "reindex", "--force").returncode == 0
    marks = as_json(lamina(home, tmp_path, "memory", "marks", "--json"))["marks"]
    assert {(m["memory"], m["state"]) for m in marks} == {(wrong, "wrong"), (old, "superseded")}
    exported = tmp_path / "proj.jsonl"
    assert lamina(home, tmp_path, "export", "--output", str(exported)).returncode == 0
    other = tmp_path / "other"
    moved = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(other), "import", str(exported),
         "--bank", "copy"], capture_output=True, text=True, timeout=120,
        env={**environ(home, tmp_path), "LAMINA_HOME": str(other)},
    )  # fmt: skip
    assert moved.returncode == 0, moved.stderr
    bank = MemoryBank.open(other)
    try:
        copied = {m.memory: m for m in bank.corrections("copy")}
    finally:
        bank.close()
    assert copied[wrong].state == "wrong"
    assert copied[old].replacement == new and copied[old].note == "n"


def test_unknown_ids_fail_in_one_line_with_exit_2(home: Path, tmp_path: Path) -> None:
    for args in (
        ("memory", "wrong", "no-such-id"),
        ("memory", "supersede", "no-such-id", "another"),
        ("memory", "unmark", "no-such-id"),
        ("memory", "wrong", "no-such-id", "--json"),
    ):
        result = lamina(home, tmp_path, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "no-such-id" in result.stderr
        assert result.stdout == "" or "--json" in args
