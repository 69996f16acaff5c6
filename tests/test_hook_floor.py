"""Quiet when nothing fits: a prompt nothing in the bank answers gets no memories from the prompt
hook, a question about the project still does, and the hook log says why nothing was injected.
A real session in a real SQLite bank, the real `lamina hook` process, cold and warm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import Floor, RecallOptions
from lamina.integrations.claude_code.hook import HookSettings
from lamina.integrations.claude_code.prompt import PromptRequest, prompt_options

from .conftest import needs_shared, shared_transcripts

pytestmark = needs_shared

SESSION = "drmaciver-python-to-rust-port.jsonl"
OFF_TOPIC = "write a haiku about autumn"
ON_TOPIC = "Which error type does the Rust factorial return?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose bank `proj` holds one real Claude Code session."""
    (session,) = [p for p in shared_transcripts() if p.name == SESSION]
    base = tmp_path_factory.mktemp("floor") / "home"
    bank = MemoryBank.open(base)
    bank.retain_file(session, "proj", document="rust-port")
    bank.close()
    return base


def hook(
    home: Path, cwd: Path, prompt: str, transcript: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "another-session",
               "prompt": prompt, "cwd": str(cwd)}  # fmt: skip
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    # A generous limit: the answer is the full one (with the dense channel), not a race.
    environ.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj",
                    "LAMINA_CONFIG": str(cwd / "absent.toml"),
                    "LAMINA_HOOK_TIME_LIMIT": "60", **env})  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "lamina", "hook"],
        input=json.dumps(payload), capture_output=True, text=True, env=environ, timeout=120,
    )  # fmt: skip


def injected(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    if not result.stdout:
        return ""
    context: str = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    return context


def last_line(home: Path) -> tuple[str, dict[str, Any]]:
    lines = (home / "logs" / "hooks.log").read_text().splitlines()
    head, _mark, timings = lines[-1].partition(" | timings ")
    record: dict[str, Any] = json.loads(timings)
    return head, record


def test_an_off_topic_prompt_gets_no_memories_and_the_log_says_why(
    home: Path, tmp_path: Path
) -> None:
    assert injected(hook(home, tmp_path, OFF_TOPIC)) == ""
    head, record = last_line(home)
    assert "no memories: nothing reaches the floor" in head
    assert record["memories"] == 0 and not record["lexical_only"]
    floor = record["floor"]
    assert floor["passed"] is False and floor["held_back"] > 0
    assert floor["dense"] < floor["floor"]["dense"]
    assert floor["coverage"] < floor["floor"]["coverage"]
    # `lamina status --json` shows the line with the reason.
    status = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "status", "--json"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "LAMINA_CONFIG": str(tmp_path / "absent.toml")},
    )  # fmt: skip
    assert "nothing reaches the floor" in status.stdout


def test_a_question_about_the_session_still_gets_its_memories(home: Path, tmp_path: Path) -> None:
    context = injected(hook(home, tmp_path, ON_TOPIC))
    assert "<lamina_memories>" in context and "Error" in context
    head, record = last_line(home)
    assert head.split(" UserPromptSubmit ")[1].split(" ", 1)[1].startswith("injected")
    assert record["floor"]["passed"] is True


def test_mid_session_the_floor_judges_the_prompt_not_the_turns_before_it(
    home: Path, tmp_path: Path
) -> None:
    """Mid-session the query carries the last turns, which match the bank whatever the prompt
    asks: an off-topic prompt there must still get nothing, and a question still gets its
    memories."""
    (session,) = [p for p in shared_transcripts() if p.name == SESSION]
    lines = session.read_text(encoding="utf-8").splitlines()
    live = tmp_path / "live.jsonl"
    live.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    assert injected(hook(home, tmp_path, OFF_TOPIC, transcript=live)) == ""
    head, record = last_line(home)
    assert "no memories: nothing reaches the floor" in head and record["floor"]["held_back"] > 0
    # Judged on the query with its turns, the same prompt would have passed.
    assert "<lamina_memories>" in injected(
        hook(home, tmp_path, OFF_TOPIC + " " + lines_said(live), transcript=live)
    )
    context = injected(hook(home, tmp_path, ON_TOPIC, transcript=live))
    assert "<lamina_memories>" in context and "Error" in context


def lines_said(transcript: Path) -> str:
    """The words of the transcript's last turns, as the hook's query carries them."""
    from lamina.bank.query import QueryOptions, recall_query_for_file

    composed = recall_query_for_file(str(transcript), "", QueryOptions())
    return composed.query


def test_a_floor_of_0_turns_it_off(home: Path, tmp_path: Path) -> None:
    assert "<lamina_memories>" in injected(hook(home, tmp_path, OFF_TOPIC, LAMINA_HOOK_FLOOR="0"))
    _head, record = last_line(home)
    assert "floor" not in record
    # The config file's [hook] table does the same.
    config = tmp_path / "config.toml"
    config.write_text("[hook]\nfloor_coverage = 0\n")
    result = hook(home, tmp_path, OFF_TOPIC, LAMINA_CONFIG=str(config))
    assert "<lamina_memories>" in injected(result)


@pytest.fixture()
def warm(home: Path, tmp_path: Path) -> Iterator[Path]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    environ["LAMINA_CONFIG"] = str(tmp_path / "absent.toml")
    started = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "warm", "start", "--json"],
        capture_output=True, text=True, timeout=120, env=environ,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pid = int(json.loads(started.stdout)["pid"])
    try:
        yield home
    finally:
        os.kill(pid, signal.SIGKILL)


def test_the_warm_server_applies_the_same_floor(warm: Path, tmp_path: Path) -> None:
    assert injected(hook(warm, tmp_path, OFF_TOPIC)) == ""
    head, record = last_line(warm)
    assert record["path"] == "warm" and "nothing reaches the floor" in head
    assert "<lamina_memories>" in injected(hook(warm, tmp_path, ON_TOPIC))
    assert last_line(warm)[1]["path"] == "warm"
    # The hook process's own settings go with it: off for this prompt only.
    assert "<lamina_memories>" in injected(hook(warm, tmp_path, OFF_TOPIC, LAMINA_HOOK_FLOOR="0"))
    assert last_line(warm)[1]["path"] == "warm"


def test_library_recall_has_no_floor_unless_asked(home: Path) -> None:
    bank = MemoryBank.open(home)
    try:
        plain = bank.recall(OFF_TOPIC, "proj")
        assert plain.hits and plain.floor is None
        floored = bank.recall(OFF_TOPIC, "proj", RecallOptions(floor=Floor()))
        assert floored.hits == [] and floored.floor is not None
        assert floored.floor.held_back == len(plain.hits)
        assert "nothing reaches the floor" in floored.as_dict()["floor"]["reason"]
        # Without the dense channel the floor does not judge: coverage alone would silence
        # most questions about the project too.
        lexical = bank.recall(OFF_TOPIC, "proj", RecallOptions(floor=Floor()), dense=False)
        assert lexical.floor is not None and lexical.floor.dense is None
        assert len(lexical.hits) == len(bank.recall(OFF_TOPIC, "proj", dense=False).hits)
        # A time the query names that the session was said near lets its memories through.
        dated = bank.recall(
            f"haiku about what we did on {first_day(bank)}", "proj", RecallOptions(floor=Floor())
        )
        assert dated.hits and dated.floor is not None and dated.floor.dated
    finally:
        bank.close()


def first_day(bank: MemoryBank) -> str:
    times = [m.time for m in bank.memories("proj", with_embeddings=False) if m.time]
    return f"{min(times):%B %-d, %Y}"


def test_the_hook_default_is_the_floor_default_and_crosses_to_the_warm_server() -> None:
    settings = HookSettings()
    assert (settings.floor, settings.floor_coverage) == (Floor().dense, Floor().coverage)
    request = PromptRequest("p", "b", floor_dense=0.3, floor_coverage=0.6)
    again = PromptRequest.from_json(json.loads(json.dumps(request.as_json())))
    assert again == request and again.floor == Floor(0.3, 0.6)
    assert prompt_options(PromptRequest("p", "b"), "minilm-l6").floor is None
    with pytest.raises(ValueError, match="floor_dense"):
        PromptRequest.from_json({**request.as_json(), "floor_dense": "high"})
