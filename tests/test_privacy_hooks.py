"""Pause, resume, exclude and retention as a user meets them: the real `lamina hook` process
(as Claude Code runs it) and the real `lamina` commands, on a real SQLite database."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lamina.integrations.claude_code.retain_worker import run_worker
from lamina.readers import read_transcript
from lamina.store.sqlite import SQLiteStore

from .conftest import EXAMPLE
from .test_hook import SESSION, hook, retain_example, wait_for_records

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")

PROMPT = "Remind me: which environment variable holds the database path?"


def lamina(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj", **env}
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )


def prompt(home: Path, tmp_path: Path, session: str = "another-session", **env: str) -> Any:
    result = hook(
        home,
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": session,
            "transcript_path": str(tmp_path / "new.jsonl"),
            "prompt": PROMPT,
            "cwd": str(tmp_path),
        },
        **env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else {}


def log_lines(home: Path) -> list[str]:
    return (home / "logs" / "hooks.log").read_text(encoding="utf-8").splitlines()


def test_a_paused_project_gets_no_memories_until_resumed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    paused = lamina(home, "pause", "--json")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["name"] == "proj"
    status = json.loads(lamina(home, "status", "--json").stdout)
    assert status["paused"]["this_project"] is True and "proj" in status["paused"]["banks"]

    output = prompt(home, tmp_path)
    assert "hookSpecificOutput" not in output  # nothing injected
    assert "paused" in output["systemMessage"] and "lamina resume" in output["systemMessage"]
    assert "skipped: memory paused for project bank proj" in log_lines(home)[-1]
    assert prompt(home, tmp_path) == {}  # the notice is shown once per session

    resumed = lamina(home, "resume", "--json")
    assert json.loads(resumed.stdout) == {"resumed": "bank", "name": "proj", "was_paused": True}
    context = prompt(home, tmp_path)["hookSpecificOutput"]["additionalContext"]
    assert "INKWELL_DB_PATH" in context
    again = lamina(home, "resume")
    assert again.returncode == 0 and "was not paused" in again.stdout


def wait_for_cursor(home: Path, offset: int, timeout: float = 120.0) -> int:
    """The session's cursor once it reached `offset` (a bounded wait for the worker)."""
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        if (home / "lamina.db").exists():
            store = SQLiteStore(home / "lamina.db")
            seen = store.get_cursor("proj", SESSION).offset
            store.close()
            if seen >= offset:
                return seen
        time.sleep(0.2)
    return seen


class LiveSession:
    """The bundled example as a live session: `stop_at(n)` writes its first `n` lines and runs
    the Stop hook; `before`, `during` and `after` are the messages up to the third reply, from
    there to the sixth, and the rest."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.home = tmp_path / "home"
        self.live = tmp_path / "live.jsonl"
        self.lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
        messages = read_transcript(str(EXAMPLE)).messages
        ends = [
            m.source.end_line for m in messages if m.kind.value == "reply" and m.source.end_line
        ]
        self.first, self.second = ends[2], ends[5]
        self.before = [m for m in messages if (m.source.end_line or 0) <= self.first]
        self.during = [m for m in messages if self.first < (m.source.line or 0) <= self.second]
        self.after = [m for m in messages if (m.source.line or 0) > self.second]

    def stop_at(self, cut: int) -> None:
        self.live.write_text("\n".join(self.lines[:cut]) + "\n", encoding="utf-8")
        stop = {"hook_event_name": "Stop", "session_id": SESSION,
                "transcript_path": str(self.live), "cwd": str(self.tmp_path)}  # fmt: skip
        assert hook(self.home, stop).returncode == 0


def test_what_was_said_while_paused_is_skipped_by_a_retain_already_running(
    tmp_path: Path,
) -> None:
    # A retain of the session holds its lock (a slow one, on a loaded machine) when memory is
    # paused and the turn ends: the paused Stop's skip cannot run then, and whichever retain
    # comes next, after a resume too, must skip what was said meanwhile before it reads on.
    session = LiveSession(tmp_path)
    home, before, after = session.home, session.before, session.after
    session.stop_at(session.first)
    assert wait_for_records(home, len(before)) == len(before)
    with (home / "locks" / f"{SESSION}.lock").open("a") as held:
        # Taken once the first retain has let go: a retain of this session is running.
        fcntl.flock(held, fcntl.LOCK_EX)
        assert lamina(home, "pause", "--session", SESSION).returncode == 0
        session.stop_at(session.second)
        deadline = time.monotonic() + 60
        while "left a mark" not in "\n".join(log_lines(home)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lamina(home, "resume", "--session", SESSION).returncode == 0
        session.stop_at(len(session.lines))  # its worker finds the lock held too
    # The lock is free again: the next retain skips first, then keeps what came after.
    session.stop_at(len(session.lines))
    assert wait_for_records(home, len(before) + len(after)) == len(before) + len(after)
    store = SQLiteStore(home / "lamina.db")
    assert set(store.record_ids("proj", SESSION)).isdisjoint(m.id for m in session.during)
    store.close()


def test_a_turn_after_resume_is_kept_when_the_paused_retain_is_still_running(
    tmp_path: Path,
) -> None:
    # The paused Stop's worker (a skip) still holds the session's lock when memory is resumed
    # and the next turn ends: that Stop leaves a mark for it. The skip must go only as far as
    # the file reached at the paused Stop, then serve the mark as a retain: what was said after
    # the resume is kept, what was said while paused is not.
    session = LiveSession(tmp_path)
    home, before, after = session.home, session.before, session.after
    session.stop_at(session.first)
    assert wait_for_records(home, len(before)) == len(before)
    with (home / "locks" / f"{SESSION}.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the skip that is about to run, still busy
        assert lamina(home, "pause", "--session", SESSION).returncode == 0
        session.stop_at(session.second)
        assert lamina(home, "resume", "--session", SESSION).returncode == 0
        session.stop_at(len(session.lines))  # leaves its mark for the running skip
        deadline = time.monotonic() + 60
        while "\n".join(log_lines(home)).count("left a mark") < 2:
            assert time.monotonic() < deadline, log_lines(home)
            time.sleep(0.1)
    # The skip goes on now, as the worker that held the lock would.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    assert run_worker(str(session.live), SESSION, "proj", home=home, skip=True, env=environ) == 0
    store = SQLiteStore(home / "lamina.db")
    kept = set(store.record_ids("proj", SESSION))
    assert kept.isdisjoint(m.id for m in session.during)
    assert {m.id for m in after} <= kept


def test_what_a_paused_session_said_is_never_retained_even_after_resume(tmp_path: Path) -> None:
    session = LiveSession(tmp_path)
    home, before, during, after = session.home, session.before, session.during, session.after
    session.stop_at(session.first)
    assert wait_for_records(home, len(before)) == len(before)

    assert lamina(home, "pause", "--session", SESSION).returncode == 0
    session.stop_at(session.second)
    size = session.live.stat().st_size
    assert wait_for_cursor(home, size) == size
    assert "skipped: memory paused for session" in "\n".join(log_lines(home))
    assert lamina(home, "resume", "--session", SESSION).returncode == 0

    session.stop_at(len(session.lines))
    assert wait_for_records(home, len(before) + len(after)) == len(before) + len(after)
    store = SQLiteStore(home / "lamina.db")
    kept = set(store.record_ids("proj", SESSION))
    assert kept.isdisjoint(m.id for m in during)
    said = [m.text for m in during if m.text.strip()]
    texts = "\n".join(r.memory.text for r in store.iter_memories("proj"))
    assert said and not [t for t in said if t[:60] in texts]


@pytest.mark.parametrize("pattern", ["{secret}", "*/clients/*"])
def test_the_hook_does_nothing_in_an_excluded_project(tmp_path: Path, pattern: str) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    secret = tmp_path / "clients" / "acme"
    secret.mkdir(parents=True)
    config = tmp_path / "config.toml"
    config.write_text(f"exclude = [{json.dumps(pattern.format(secret=secret))}]\n")
    env = {"LAMINA_CONFIG": str(config), "CLAUDE_PROJECT_DIR": str(secret)}
    asked = hook(
        home,
        {"hook_event_name": "UserPromptSubmit", "session_id": "s2", "prompt": PROMPT,
         "transcript_path": str(tmp_path / "new.jsonl"), "cwd": str(secret / "src")},
        **env,
    )  # fmt: skip
    assert asked.returncode == 0 and asked.stdout == "" and asked.stderr == ""
    transcript = tmp_path / "s2.jsonl"
    transcript.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    stopped = hook(
        home,
        {"hook_event_name": "Stop", "session_id": "s2", "transcript_path": str(transcript),
         "cwd": str(secret)},
        **env,
    )  # fmt: skip
    assert stopped.returncode == 0 and stopped.stdout == ""
    lines = log_lines(home)
    assert "skipped: excluded by the config file's exclude" in lines[-1]
    assert "skipped: excluded" in lines[-2]
    assert not (home / "sessions" / "s2.project").exists()
    assert not [line for line in lines if " s2 " in line and "skipped" not in line]
    # Outside the excluded directory the same configuration recalls as before.
    outside = prompt(home, tmp_path, LAMINA_CONFIG=str(config))
    assert "INKWELL_DB_PATH" in outside["hookSpecificOutput"]["additionalContext"]


def test_forget_older_than_and_retain_days(tmp_path: Path) -> None:
    home = tmp_path / "home"
    none = {"LAMINA_CONFIG": str(tmp_path / "none.toml")}
    retained = lamina(home, "retain", str(EXAMPLE), "--no-embed", "--json", **none)
    assert retained.returncode == 0, retained.stderr
    report = json.loads(retained.stdout)
    added = report["files"][0]["memories_added"]
    assert added > 0 and report["expired"] == 0

    bad = lamina(home, "forget", "--older-than", "banana", "--json", **none)
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["error"]["message"].startswith("--older-than: not an age")
    assert bad.stderr.strip().splitlines() == [
        "error: --older-than: not an age or a date: 'banana' (use 30d, 12w, 36h or 2026-01-31)"
    ]
    # The example session ran on 2026-03-14 from 09:12 on: half an hour in, some went.
    early = lamina(home, "forget", "--older-than", "2026-03-14T09:20:00Z", "--json", **none)
    first = json.loads(early.stdout)
    assert first["older_than"] == "2026-03-14T09:20:00+00:00"
    assert 0 < first["memories_forgotten"] < added
    store = SQLiteStore(home / "lamina.db")
    left = [r.memory for r in store.iter_memories("proj")]
    assert len(left) == added - first["memories_forgotten"]
    assert all(m.time is None or m.time.isoformat() >= "2026-03-14T09:20" for m in left)
    store.close()
    recalled = lamina(home, "recall", "database path", "--json", **none)
    assert recalled.returncode == 0, recalled.stderr

    config = tmp_path / "config.toml"
    config.write_text("retain_days = 30\n")
    again = lamina(home, "retain", str(EXAMPLE), "--no-embed", "--json", LAMINA_CONFIG=str(config))
    dated = sum(m.time is not None for m in left)
    assert json.loads(again.stdout)["expired"] == dated  # all older than 30 days
    everything = lamina(home, "forget", "--older-than", "0d", "--json", **none)
    assert json.loads(everything.stdout)["memories_forgotten"] == 0


def test_the_agent_pauses_and_resumes_memory_through_mcp(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    home = tmp_path / "home"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lamina", "mcp", "--bank", "proj"],
        env={**os.environ, "LAMINA_HOME": str(home)},
    )

    async def run() -> list[Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"pause_memory", "resume_memory"} <= names
            paused = await session.call_tool("pause_memory", {})
            status = json.loads(lamina(home, "status", "--json").stdout)["paused"]
            resumed = await session.call_tool("resume_memory", {})
            return [paused.structured_content, status, resumed.structured_content]

    paused, status, resumed = anyio.run(run)
    assert paused["paused"] == "bank" and paused["name"] == "proj"
    assert status["this_project"] is True
    assert resumed == {"resumed": "bank", "name": "proj", "was_paused": True}


@pytest.mark.parametrize("command", ["pause", "resume"])
def test_the_plugin_slash_commands_run_lamina_pause_and_resume(
    tmp_path: Path, command: str
) -> None:
    from .conftest import ROOT

    plugin = ROOT / "plugins" / "lamina"
    text = (plugin / "commands" / f"{command}.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("!`"))
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    if command == "resume":
        assert lamina(home, "pause", "--bank", "proj").returncode == 0
    installed = str(Path(sys.executable).parent / "lamina")
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(plugin), "LAMINA_HOME": str(home),
           "LAMINA_BANK": "proj", "LAMINA_BIN": installed}  # fmt: skip
    ran = subprocess.run(
        ["sh", "-c", line[2:-1]], capture_output=True, text=True, env=env, cwd=project, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "proj" in ran.stdout
    status = json.loads(lamina(home, "status", "--json").stdout)["paused"]
    assert status["this_project"] is (command == "pause")
