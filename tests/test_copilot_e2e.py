"""The real GitHub Copilot CLI, offline, against a scripted Chat Completions API: `lamina install
copilot` (user scope), a first `copilot -p` session that states a fact and is retained by its
own hooks (Stop, SessionEnd), a second whose request to the model carries exactly one memory
block recalling it (the UserPromptSubmit context, inside the prompt's `<system_reminder>`), and
one memory across agents both ways: a real Claude Code transcript retained through the Claude
Code hook is recalled in a Copilot session, and the Copilot session's fact reaches the Claude
Code prompt hook.

The CLI comes from LAMINA_COPILOT_BIN or PATH (.ci/run installs the pinned version from npm).
Without it the test skips with the reason, unless LAMINA_REQUIRE_COPILOT=1 (as in CI): then it
fails with the reason, LAMINA_COPILOT_UNAVAILABLE's when .ci/run could not install it. What the
scripted server received is written to `<tmp>/requests.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lamina.config import default_bank, resolve_settings

from .conftest import EXAMPLE
from .fake_openai import ScriptedResponses, input_messages

COPILOT_VERSION = "1.0.102"
"""The CLI version the hook contract is tested with (.ci/run installs it)."""

FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
CROSS_PROMPT = "Which environment variable holds the inkwell database path, and its default?"
RETAIN_WAIT = 300.0
"""Seconds a detached retain may take on a fresh, busy machine (model load included)."""
BLOCK = "<lamina_memories>"


def _unavailable(reason: str) -> None:
    if os.environ.get("LAMINA_REQUIRE_COPILOT") == "1":
        pytest.fail(f"the Copilot CLI is required here (LAMINA_REQUIRE_COPILOT=1): {reason}")
    pytest.skip(f"{reason} (set LAMINA_COPILOT_BIN, or install @github/copilot)")


@pytest.fixture(scope="module")
def copilot() -> str:
    if os.environ.get("LAMINA_COPILOT_UNAVAILABLE"):
        _unavailable(os.environ["LAMINA_COPILOT_UNAVAILABLE"])
    found = os.environ.get("LAMINA_COPILOT_BIN") or shutil.which("copilot")
    if not found or not Path(found).exists():
        _unavailable("no Copilot CLI found")
    assert found is not None
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 timeout=120, stdin=subprocess.DEVNULL).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"{found} --version failed: {exc}")
    # "GitHub Copilot CLI 1.0.102." and an update hint on the next line.
    first = (version.splitlines() or [""])[0].strip().rstrip(".")
    if first.split()[-1:] != [COPILOT_VERSION]:
        _unavailable(f"{found} is {first!r}, not Copilot CLI {COPILOT_VERSION}")
    return found


def user_messages(body: Mapping[str, Any]) -> list[str]:
    return [text for role, text in input_messages(body) if role == "user"]


def script(body: Mapping[str, Any]) -> str:
    """The scripted model: answers from what it was sent, else acknowledges."""
    asked = (user_messages(body) or [""])[-1]
    everything = json.dumps(body.get("messages"))
    if SECOND_PROMPT in asked:
        return "heron-7" if "heron-7" in everything else "unknown"
    if CROSS_PROMPT in asked:
        return "INKWELL_DB_PATH" if "INKWELL_DB_PATH" in everything else "unknown"
    return "Noted."


def requests_for(api: ScriptedResponses, prompt: str) -> list[dict[str, Any]]:
    return [r for r in api.requests if any(prompt in text for text in user_messages(r))]


def memory_blocks(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request's messages holding a memory block: (role, text), once per block."""
    return [
        (role, text)
        for role, text in input_messages(body)
        for _ in range(text.count(BLOCK))
    ]  # fmt: skip


class Machine:
    """A fresh HOME and COPILOT_HOME with Copilot pointed at the scripted API and nowhere else.
    The project folder is not trusted: a user's hooks run without that."""

    def __init__(self, tmp: Path, copilot: str, api: ScriptedResponses) -> None:
        self.copilot = copilot
        self.home = tmp / "home"
        self.copilot_home = tmp / "home" / ".copilot"
        self.project = tmp / "inkwell"
        self.lamina_home = tmp / "lamina"
        for directory in (self.copilot_home, self.project):
            directory.mkdir(parents=True)
        if shutil.which("git"):
            subprocess.run(["git", "init", "-q", str(self.project)], check=True, timeout=60)
        else:
            (self.project / ".git").mkdir()
        closed = "http://127.0.0.1:9"  # nothing listens: calls elsewhere fail at once
        self.env = {
            # The installed lamina (this environment's) is on PATH, as after `pipx install`.
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "COPILOT_HOME": str(self.copilot_home),
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": api.url,
            "COPILOT_PROVIDER_API_KEY": "scripted",
            "COPILOT_MODEL": "fake-model",
            "LAMINA_HOME": str(self.lamina_home),
            **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), closed),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        self.bank = default_bank(self.project, resolve_settings({}))

    def lamina(self, *args: str, stdin: str | None = None, **env: str) -> Any:
        return subprocess.run(
            [sys.executable, "-m", "lamina", *args], input=stdin,
            capture_output=True, text=True, env={**self.env, **env}, cwd=self.project, timeout=120,
        )  # fmt: skip

    def ask(self, prompt: str, limit: int = 180) -> str:
        """One `copilot -p` session; its id (the new folder under session-state)."""
        before = set(self.copilot_home.glob("session-state/*/events.jsonl"))
        result = subprocess.run(
            ["timeout", "-k", "5", str(limit), self.copilot, "-p", prompt, "--silent"],
            capture_output=True, text=True, env=self.env, cwd=self.project,
            stdin=subprocess.DEVNULL, timeout=limit + 30,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:] or result.stdout[-3000:]
        (events,) = set(self.copilot_home.glob("session-state/*/events.jsonl")) - before
        return events.parent.name

    def wait_for_document(self, session: str) -> float:
        """Seconds until `session` is a document of the project's bank (bounded)."""
        started = time.monotonic()
        while time.monotonic() - started < RETAIN_WAIT:
            listed = self.lamina("documents", "--bank", self.bank, "--json")
            if listed.returncode == 0 and any(
                d["id"] == session for d in json.loads(listed.stdout)["documents"]
            ):
                return round(time.monotonic() - started, 2)
            time.sleep(0.5)
        hooks_log = self.lamina_home / "logs" / "hooks.log"
        tail = hooks_log.read_text()[-3000:] if hooks_log.exists() else "(no hook log)"
        pytest.fail(f"session {session} not retained within {RETAIN_WAIT:.0f}s; hook log:\n{tail}")


def test_memories_reach_the_next_copilot_session_and_cross_agents(
    copilot: str, tmp_path: Path
) -> None:
    timings: dict[str, Any] = {}
    with ScriptedResponses(script) as api:
        machine = Machine(tmp_path, copilot, api)
        installed = machine.lamina("install", "copilot", "--json")
        assert installed.returncode == 0, installed.stderr
        report = json.loads(installed.stdout)
        assert report["hooks_file"] == str(machine.copilot_home / "hooks" / "lamina.json")
        status = json.loads(machine.lamina("status", "--json").stdout)
        assert status["copilot_hooks"]["user"]["installed"] is True
        assert status["copilot_hooks"]["project"]["installed"] is False
        # Copilot lists the registered server as the user's.
        listed = subprocess.run([copilot, "mcp", "list"], capture_output=True, text=True,
                                env=machine.env, timeout=120)  # fmt: skip
        assert "lamina" in listed.stdout, listed.stdout + listed.stderr

        # Session 1 states a fact; its own hooks (Stop, SessionEnd) retain it.
        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        timings["retain_seconds"] = machine.wait_for_document(first)
        documents = json.loads(machine.lamina("documents", "--bank", machine.bank,
                                              "--json").stdout)["documents"]  # fmt: skip
        (document,) = [d for d in documents if d["id"] == first]
        assert document["format"] == "copilot" and document["metadata"]["agent"] == "copilot"

        # Session 2: exactly one memory block, in the prompt's own message, recalling the fact.
        started = time.monotonic()
        second = machine.ask(SECOND_PROMPT)
        timings["second_session_wall_seconds"] = round(time.monotonic() - started, 2)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert block[0] == "user" and SECOND_PROMPT in block[1]
        # The MCP server is offered to the model from the first request on, offline.
        offered = [t.get("function", {}).get("name") for t in request.get("tools") or []]
        assert "lamina-recall" in offered, offered
        reminder = block[1][block[1].index("<system_reminder>") :]
        assert BLOCK in reminder and "heron-7" in reminder and "Frankfurt" in reminder

        # Retained again, the second session keeps the prompt and leaves the block out.
        machine.wait_for_document(second)
        ask = machine.lamina("recall", "staging database name", "--bank", machine.bank,
                             "--document", second, "--json", "--full")  # fmt: skip
        assert ask.returncode == 0, ask.stderr
        texts = [hit["text"] for hit in json.loads(ask.stdout)["results"]]
        assert any(SECOND_PROMPT in text for text in texts), texts
        assert not any(BLOCK in text or "Frankfurt" in text for text in texts), texts

        # /compact in the continued session runs Lamina's PreCompact hook (Copilot's
        # preCompact, with Claude Code's payload), which retains before the history is compacted.
        compacted = subprocess.run(
            ["timeout", "-k", "5", "120", copilot, "--continue", "-p", "/compact", "--silent"],
            capture_output=True, text=True, env=machine.env, cwd=machine.project,
            stdin=subprocess.DEVNULL, timeout=150,
        )  # fmt: skip
        assert compacted.returncode == 0, compacted.stderr[-3000:]
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert f"PreCompact {second} retain" in log, log[-3000:]

        # Claude Code -> Copilot: a real Claude Code transcript, retained by the Claude Code
        # hook (Stop) into the project's bank, is recalled in a Copilot session.
        transcript = tmp_path / "claude" / EXAMPLE.name
        transcript.parent.mkdir()
        shutil.copy(EXAMPLE, transcript)
        session = json.loads(transcript.read_text().splitlines()[1])["sessionId"]
        stop = {"hook_event_name": "Stop", "session_id": session, "cwd": str(machine.project),
                "transcript_path": str(transcript)}  # fmt: skip
        ran = machine.lamina(
            "hook", stdin=json.dumps(stop), CLAUDE_PROJECT_DIR=str(machine.project)
        )
        assert ran.returncode == 0, ran.stderr
        machine.wait_for_document(session)
        machine.ask(CROSS_PROMPT)
        (request,) = requests_for(api, CROSS_PROMPT)
        (block,) = memory_blocks(request)
        assert "INKWELL_DB_PATH" in block[1], block[1]

        # Copilot -> Claude Code: Claude Code's prompt hook recalls the Copilot session's fact.
        prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "claude-later",
                  "cwd": str(machine.project), "prompt": SECOND_PROMPT}  # fmt: skip
        answered = machine.lamina(
            "hook", stdin=json.dumps(prompt), CLAUDE_PROJECT_DIR=str(machine.project)
        )
        assert answered.returncode == 0, answered.stderr
        context = json.loads(answered.stdout)["hookSpecificOutput"]["additionalContext"]
        assert context.count(BLOCK) == 1 and "heron-7" in context, context

        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "failed" not in log, log[-3000:]
        sent = {"requests": api.requests, "other": api.other, "timings": timings}
        (tmp_path / "requests.json").write_text(json.dumps(sent, indent=2))
    print(f"\nCopilot {COPILOT_VERSION} end to end: {json.dumps(timings)}")
