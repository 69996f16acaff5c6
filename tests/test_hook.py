"""`lamina hook` run the way Claude Code runs it: a subprocess with the event's JSON on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lamina.integrations.claude_code.hook import TIMINGS_MARK
from lamina.readers import read_transcript
from lamina.store.sqlite import SQLiteStore
from lamina.text.units import build_units, memory_id

from .conftest import CLAUDE_CODE, EXAMPLE

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")

SESSION = "7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17"


def failures(log: str) -> list[str]:
    """The hook log's lines that report a failure, whole (so a failing test shows why)."""
    return [line for line in log.splitlines() if "failed" in line]


def hook(home: Path, payload: Any, **env: str) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    environ = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj", **env}
    return subprocess.run(
        [sys.executable, "-m", "lamina", "hook"],
        input=text,
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def wait_for_records(home: Path, count: int, timeout: float = 180.0) -> int:
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        db = home / "lamina.db"
        if db.exists():
            store = SQLiteStore(db)
            seen = store.count_records("proj")
            store.close()
            if seen >= count:
                # Let any worker still running finish before the caller looks further.
                time.sleep(0.5)
                return seen
        time.sleep(0.2)
    return seen


def retain_example(home: Path, tmp_path: Path) -> None:
    """The example session retained through a Stop hook, waited for."""
    hook(home, {"hook_event_name": "Stop", "session_id": SESSION,
                "transcript_path": str(EXAMPLE), "cwd": str(tmp_path)})  # fmt: skip
    assert wait_for_records(home, 83) == 83


def test_stop_after_every_turn_retains_each_record_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    live = tmp_path / "live.jsonl"
    messages = read_transcript(str(EXAMPLE)).messages
    cuts = [m.source.end_line for m in messages if m.kind.value == "reply" and m.source.end_line]
    for cut in [*cuts[::3], len(lines)]:
        live.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
        result = hook(
            home,
            {
                "hook_event_name": "Stop",
                "session_id": SESSION,
                "transcript_path": str(live),
                "cwd": str(tmp_path),
            },
        )
        assert result.returncode == 0 and result.stdout == "", result.stderr
    assert wait_for_records(home, len(messages)) == len(messages)
    store = SQLiteStore(home / "lamina.db")
    assert store.count_records("proj", SESSION) == len(messages)
    # Every unit once: the same memories a single retain of the whole file makes (its 9
    # turns, the longer ones cut into parts).
    units, _segments = build_units(messages)
    stored = [m.memory.id for m in store.iter_memories("proj")]
    assert sorted(stored) == sorted(memory_id(SESSION, u) for u in units)
    log = (home / "logs" / "hooks.log").read_text()
    assert "retain" in log and not failures(log), failures(log)


def test_prompt_gets_memories_of_other_sessions_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    prompt = "Remind me: which environment variable holds the database path?"
    other = hook(
        home,
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "another-session",
            "transcript_path": str(tmp_path / "new.jsonl"),
            "prompt": prompt,
            "cwd": str(tmp_path),
        },
    )
    assert other.returncode == 0, other.stderr
    output = json.loads(other.stdout)
    context = output["hookSpecificOutput"]["additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert context.startswith("<lamina_memories>") and "INKWELL_DB_PATH" in context
    # The hook log says which memories went in (the inspector's hook page links them).
    line = next(
        x for x in reversed((home / "logs" / "hooks.log").read_text().splitlines())
        if " UserPromptSubmit another-session injected " in x
    )  # fmt: skip
    record = json.loads(line.split(TIMINGS_MARK, 1)[1])
    store = SQLiteStore(home / "lamina.db")
    injected = store.get_memories(record["bank"], record["ids"])
    assert len(injected) == len(record["ids"]) == record["memories"] >= 1
    best = next(m for m in injected if m.id == record["ids"][0])
    assert best.text.split("\n", 1)[0][:40] in context
    store.close()
    # The same session still has all of this in its context: nothing is injected.
    same = hook(
        home,
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": SESSION,
            "transcript_path": str(EXAMPLE),
            "prompt": prompt,
            "cwd": str(tmp_path),
        },
    )
    assert same.returncode == 0 and same.stdout == ""


def test_the_injected_block_fits_the_budget_whole(tmp_path: Path) -> None:
    """`budget` is what the prompt grows by: the block's heading and each memory's date count,
    not only the memories' texts; a larger budget holds more memories."""
    from lamina.tokens import count_text

    home = tmp_path / "home"
    retain_example(home, tmp_path)
    prompt = "What did we decide about the database, its path and the migrations?"
    shown = []
    for budget in (120, 300, 700):
        asked = hook(home, {"hook_event_name": "UserPromptSubmit", "session_id": "another",
                            "prompt": prompt, "cwd": str(tmp_path)},
                     LAMINA_HOOK_BUDGET=str(budget))  # fmt: skip
        assert asked.returncode == 0, asked.stderr
        context = json.loads(asked.stdout)["hookSpecificOutput"]["additionalContext"]
        assert 0 < count_text(context) <= budget, budget
        shown.append(context.count("\n- ["))
    assert shown[0] < shown[2]


@pytest.mark.parametrize("prompt", ["ok", "/clear", "   "])
def test_trivial_prompts_are_skipped(tmp_path: Path, prompt: str) -> None:
    result = hook(
        tmp_path / "home",
        {
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
            "session_id": "s",
            "cwd": str(tmp_path),
        },
    )
    assert result.returncode == 0 and result.stdout == ""


def test_the_time_limit_returns_nothing_rather_than_stall(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    result = hook(
        home,
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "x",
            "prompt": "which database did we choose?",
            "cwd": str(tmp_path),
        },
        LAMINA_HOOK_TIME_LIMIT="0.01",
    )
    assert result.returncode == 0 and result.stdout == ""
    assert "over the 0.01s limit" in (home / "logs" / "hooks.log").read_text()


@pytest.mark.parametrize(
    "payload",
    [
        "not json at all",
        "[1, 2]",
        {"hook_event_name": "Stop", "session_id": "s", "transcript_path": "/nope/t.jsonl"},
        {"hook_event_name": "Stop"},
    ],
)
def test_broken_input_fails_open_with_one_line(tmp_path: Path, payload: Any) -> None:
    home = tmp_path / "home"
    result = hook(home, payload)
    assert result.returncode == 0
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("lamina: ") and "Traceback" not in result.stderr
    assert "failed" in (home / "logs" / "hooks.log").read_text()


def test_corrupt_transcript_is_retained_as_far_as_it_reads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    broken = tmp_path / "broken.jsonl"
    good = EXAMPLE.read_text(encoding="utf-8").splitlines()
    broken.write_text("\n".join([*good[:20], "{garbage", *good[20:]]) + "\n", encoding="utf-8")
    result = hook(
        home,
        {
            "hook_event_name": "SessionEnd",
            "session_id": SESSION,
            "transcript_path": str(broken),
            "cwd": str(tmp_path),
        },
    )
    assert result.returncode == 0
    assert wait_for_records(home, 83) == 83


def test_a_session_file_written_after_the_stop_hook_is_still_retained(tmp_path: Path) -> None:
    """Copilot writes its session file in the background: on a loaded machine its Stop (and
    SessionEnd) hooks can run before the file exists. The hook answers at once and its worker
    waits for the file (lamina.integrations.claude_code.retain_worker.TRANSCRIPT_WAIT)."""
    home = tmp_path / "home"
    late = tmp_path / "late.jsonl"
    for event in ("Stop", "SessionEnd"):
        result = hook(home, {"hook_event_name": event, "session_id": SESSION,
                             "transcript_path": str(late), "cwd": str(tmp_path)})  # fmt: skip
        assert result.returncode == 0 and result.stdout == "", result.stderr
    time.sleep(2)
    late.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    assert wait_for_records(home, 83) == 83
    log = (home / "logs" / "hooks.log").read_text()
    assert not failures(log), failures(log)


def test_session_start_prepares_the_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = hook(home, {"hook_event_name": "SessionStart", "session_id": "s"})
    assert result.returncode == 0 and result.stdout == ""
    assert (home / "lamina.db").exists()


def test_several_sessions_hooking_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    sessions = []
    for n in range(3):
        session = f"session-{n}"
        path = tmp_path / f"{session}.jsonl"
        path.write_text("\n".join(line.replace(SESSION, session) for line in lines) + "\n")
        sessions.append((session, path))
    env = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj"}
    procs = []
    for _round in range(3):  # every session's Stop fires three times, all at once
        for session, path in sessions:
            payload = {"hook_event_name": "Stop", "session_id": session,
                       "transcript_path": str(path), "cwd": str(tmp_path)}  # fmt: skip
            proc = subprocess.Popen([sys.executable, "-m", "lamina", "hook"], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)  # fmt: skip
            proc.stdin.write(json.dumps(payload))  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
            procs.append(proc)
    for proc in procs:
        assert proc.wait(timeout=60) == 0
        assert proc.stderr.read() == ""  # type: ignore[union-attr]
    # Each transcript's message ids are the same across sessions (copied file), but each
    # session is its own document: 83 records each.
    assert wait_for_records(home, 3 * 83) == 3 * 83
    time.sleep(2)  # workers that were told to go again finish
    store = SQLiteStore(home / "lamina.db")
    for session, _path in sessions:
        assert store.count_records("proj", session) == 83
    log = (home / "logs" / "hooks.log").read_text()
    assert not failures(log) and "database is locked" not in log, failures(log)


def test_session_start_digest_is_off_by_default_and_lists_recent_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    start = {"hook_event_name": "SessionStart", "session_id": "new", "cwd": str(tmp_path)}
    assert hook(home, start).stdout == ""
    shown = hook(home, start, LAMINA_HOOK_SESSION_DIGEST="1")
    context = json.loads(shown.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("<lamina_memories>") and "Recent sessions" in context
    assert "PostgreSQL or SQLite?" in context and "[2026-03-14]" in context


def test_session_start_digest_skips_an_opener_marked_wrong(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retain_example(home, tmp_path)
    start = {"hook_event_name": "SessionStart", "session_id": "new", "cwd": str(tmp_path)}
    env = {"LAMINA_HOOK_SESSION_DIGEST": "1"}

    def opener() -> str:
        shown = hook(home, start, **env)
        context = json.loads(shown.stdout)["hookSpecificOutput"]["additionalContext"]
        return next(line for line in context.splitlines() if line.startswith("- ["))

    before = opener()
    store = SQLiteStore(home / "lamina.db")
    memories = [row.memory for row in store.iter_memories("proj", with_embeddings=False)]
    store.close()
    first = next(m for m in memories if m.text.split("\n", 1)[0][:200] in before)
    environ = {**os.environ, "LAMINA_HOME": str(home)}
    marked = subprocess.run(
        [sys.executable, "-m", "lamina", "memory", "wrong", first.id, "--bank", "proj"],
        capture_output=True, text=True, env=environ, timeout=60,
    )  # fmt: skip
    assert marked.returncode == 0, marked.stderr
    # The session's line now comes from its next memory (here a part of the same turn, which
    # opens with the prompt cut short), never from the marked one.
    after = opener()
    assert after != before and after.startswith(before[:16])


@pytest.mark.skipif(not CLAUDE_CODE.is_dir(), reason="../shared/data/claude-code absent")
def test_shared_sessions_replayed_prompt_by_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    total = 0
    for path in sorted(CLAUDE_CODE.glob("*.jsonl")):
        if ".subagent-" in path.name:
            continue
        messages = read_transcript(str(path)).messages
        lines = path.read_text(encoding="utf-8").splitlines()
        live = tmp_path / path.name
        session = path.stem
        starts = [m for m in messages if m.kind.value == "prompt" and m.source.line]
        for number, prompt in enumerate(starts):
            live.write_text("\n".join(lines[: prompt.source.line - 1]) + "\n", encoding="utf-8")
            asked = hook(home, {"hook_event_name": "UserPromptSubmit", "session_id": session,
                                "transcript_path": str(live), "cwd": str(tmp_path),
                                "prompt": prompt.text})  # fmt: skip
            assert asked.returncode == 0 and "Traceback" not in asked.stderr
            if asked.stdout:
                context = json.loads(asked.stdout)["hookSpecificOutput"]["additionalContext"]
                # One block, and no memory in it holds an injected block itself.
                assert context.count("<lamina_memories>") == 1
            end = starts[number + 1].source.line - 1 if number + 1 < len(starts) else len(lines)
            live.write_text("\n".join(lines[:end]) + "\n", encoding="utf-8")
            stopped = hook(home, {"hook_event_name": "Stop", "session_id": session,
                                  "transcript_path": str(live), "cwd": str(tmp_path)})  # fmt: skip
            assert stopped.returncode == 0
        total += len(messages)
        assert wait_for_records(home, total) == total
    store = SQLiteStore(home / "lamina.db")
    assert store.count_records("proj") == total
    assert all("lamina_memories" not in r.memory.text for r in store.iter_memories("proj"))
    log = (home / "logs" / "hooks.log").read_text()
    assert not failures(log), failures(log)


def test_the_retain_worker_never_runs_code_from_the_project(tmp_path: Path) -> None:
    # The agent works in a repository that holds a `lamina/` package of its own: the Stop
    # hook's detached worker must run the installed Lamina, not that one.
    project = tmp_path / "project"
    fake = project / "lamina"
    fake.mkdir(parents=True)
    marker = tmp_path / "executed"
    code = f"open({str(marker)!r}, 'w').write('the project ran')\n"
    (fake / "__init__.py").write_text(code)
    (fake / "__main__.py").write_text(code)
    home = tmp_path / "home"
    transcript = tmp_path / "session.jsonl"
    example = Path(__file__).parent.parent / "examples" / "session.jsonl"
    transcript.write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    script = Path(sys.executable).parent / "lamina"
    command = [str(script)] if script.exists() else [sys.executable, "-P", "-m", "lamina"]
    payload = {
        "hook_event_name": "Stop",
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(project),
    }
    stopped = subprocess.run(
        [*command, "hook"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj"},
        timeout=60,
    )
    assert stopped.returncode == 0
    assert wait_for_records(home, 1) >= 1  # the installed worker retained the session
    assert not marker.exists()
