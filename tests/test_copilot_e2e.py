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
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .agent_machine import AgentMachine, Cli, find_cli
from .conftest import EXAMPLE, ROOT
from .fake_openai import ScriptedResponses, input_messages

COPILOT_VERSION = "1.0.102"
"""The CLI version the hook contract is tested with (.ci/run installs it)."""

FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
CROSS_PROMPT = "Which environment variable holds the inkwell database path, and its default?"
BLOCK = "<lamina_memories>"


COPILOT = Cli("COPILOT", "Copilot CLI", "copilot", "@github/copilot", COPILOT_VERSION)


@pytest.fixture(scope="module")
def copilot() -> str:
    return find_cli(COPILOT)


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


class Machine(AgentMachine):
    """A fresh HOME and COPILOT_HOME with Copilot pointed at the scripted API and nowhere else.
    The project folder is not trusted: a user's hooks run without that."""

    def __init__(self, tmp: Path, copilot: str, api: ScriptedResponses) -> None:
        super().__init__(tmp, copilot)
        self.copilot_home = self.home / ".copilot"
        self.copilot_home.mkdir()
        self.env.update(
            COPILOT_HOME=str(self.copilot_home),
            COPILOT_OFFLINE="true",
            COPILOT_AUTO_UPDATE="false",
            COPILOT_PROVIDER_BASE_URL=api.url,
            COPILOT_PROVIDER_API_KEY="scripted",
            COPILOT_MODEL="fake-model",
        )

    def lists_lamina_server(self) -> None:
        """`copilot mcp list` names Lamina's MCP server."""
        listed = subprocess.run([self.cli, "mcp", "list"], capture_output=True, text=True,
                                env=self.env, timeout=120)  # fmt: skip
        assert "lamina" in listed.stdout, listed.stdout + listed.stderr

    def ask(self, prompt: str, limit: int = 180) -> str:
        """One `copilot -p` session; its id (the new folder under session-state)."""
        before = set(self.copilot_home.glob("session-state/*/events.jsonl"))
        self.run("-p", prompt, "--silent", limit=limit)
        (events,) = set(self.copilot_home.glob("session-state/*/events.jsonl")) - before
        return events.parent.name


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
        machine.lists_lamina_server()  # as the user's

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
        machine.run("--continue", "-p", "/compact", "--silent", limit=120)
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


def test_the_copilot_plugin_gives_one_memory_block(copilot: str, tmp_path: Path) -> None:
    """The repository as a Copilot marketplace (.github/plugin/marketplace.json): `copilot plugin
    marketplace add <checkout>`, `copilot plugin install lamina@lamina` (loaded live from the
    checkout); a session that states a fact, retained by the plugin's hooks; with the user's
    own `lamina install copilot` beside it, the next session's request carries exactly one
    memory block recalling it, and `lamina status` shows the plugin."""
    with ScriptedResponses(script) as api:
        machine = Machine(tmp_path, copilot, api)
        machine.run("plugin", "marketplace", "add", str(ROOT), limit=120)
        machine.run("plugin", "install", "lamina@lamina", limit=120)
        status = json.loads(machine.lamina("status", "--json").stdout)
        assert status["copilot_hooks"]["plugin"]["installed"] is True
        machine.lists_lamina_server()  # as the plugin's

        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        machine.wait_for_document(first)

        # The user-scope hooks stand aside for the plugin: still one block per prompt.
        assert machine.lamina("install", "copilot").returncode == 0
        machine.ask(SECOND_PROMPT)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert "heron-7" in block[1] and "Frankfurt" in block[1]
        offered = [t.get("function", {}).get("name") for t in request.get("tools") or []]
        assert "lamina-recall" in offered, offered
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "injected" in log and "failed" not in log, log[-3000:]
        assert "skipped: the Lamina plugin for Copilot serves this session" in log, log[-3000:]
        (tmp_path / "requests.json").write_text(json.dumps(api.requests, indent=2))
