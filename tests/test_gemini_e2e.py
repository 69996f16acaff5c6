"""The real Gemini CLI, offline, against a scripted Gemini API: `lamina install gemini`, a first
`gemini -p` session that states a fact and is retained by its own hooks (AfterAgent,
SessionEnd), a second whose request to the model carries exactly one memory block recalling it
(the BeforeAgent context, an extra part of the user's content), which keeps its prompt in the
history when resumed, and one memory across agents: a
real Claude Code transcript retained through the Claude Code hook is recalled in a Gemini
session.

The CLI comes from LAMINA_GEMINI_BIN or PATH (.ci/run installs the pinned version from npm).
Without it the test skips with the reason, unless LAMINA_REQUIRE_GEMINI=1 (as in CI): then it
fails with the reason, LAMINA_GEMINI_UNAVAILABLE's when .ci/run could not install it. What the
scripted server received is written to `<tmp>/requests.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .agent_machine import AgentMachine, Cli, find_cli
from .conftest import EXAMPLE, ROOT
from .fake_gemini import ScriptedGemini, contents, last_user_text, unescaped

GEMINI_VERSION = "0.61.0"
"""The CLI version the hook contract is tested with (.ci/run installs it)."""

MODEL = "gemini-2.5-flash"
"""Named with -m, so the CLI asks no classifier which model to use."""
FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
RESUME_PROMPT = "One more thing about that staging database: who else uses it?"
CROSS_PROMPT = "Which environment variable holds the inkwell database path, and its default?"
BLOCK = "<lamina_memories>"


GEMINI = Cli("GEMINI", "Gemini CLI", "gemini", "@google/gemini-cli", GEMINI_VERSION)


@pytest.fixture(scope="module")
def gemini() -> str:
    return find_cli(GEMINI)


def _everything(body: Mapping[str, Any]) -> str:
    return unescaped(json.dumps(body.get("contents"), ensure_ascii=False))


def script(body: Mapping[str, Any]) -> str:
    """The scripted model: answers from what it was sent, else acknowledges."""
    asked = last_user_text(body)
    if SECOND_PROMPT in asked:
        return "heron-7" if "heron-7" in _everything(body) else "unknown"
    if CROSS_PROMPT in asked:
        return "INKWELL_DB_PATH" if "INKWELL_DB_PATH" in _everything(body) else "unknown"
    return "Noted."


def requests_for(api: ScriptedGemini, prompt: str) -> list[dict[str, Any]]:
    return [r for r in api.requests if prompt in last_user_text(r)]


def memory_blocks(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request's text parts holding a memory block (escaped or not): (role, text as the hook
    wrote it)."""
    return [
        (role, unescaped(text))
        for role, texts in contents(body)
        for text in texts
        if BLOCK in unescaped(text)
    ]


class Machine(AgentMachine):
    """A fresh HOME with the Gemini CLI pointed at the scripted API and nowhere else."""

    def __init__(self, tmp: Path, gemini: str, api: ScriptedGemini) -> None:
        super().__init__(tmp, gemini, os.environ.get("PATH", "/usr/bin:/bin"))
        self.gemini_dir = self.home / ".gemini"
        self.gemini_dir.mkdir()
        # What a user has already: `lamina install gemini` must keep every key of it.
        self.settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        (self.gemini_dir / "settings.json").write_text(json.dumps(self.settings))
        self.env.update(
            GEMINI_API_KEY="scripted",
            GOOGLE_GEMINI_BASE_URL=api.url,
            GEMINI_CLI_TRUST_WORKSPACE="true",  # a headless run elsewhere exits with 55
        )

    def chats(self) -> set[Path]:
        return set(self.gemini_dir.glob("tmp/*/chats/session-*.jsonl"))

    def ask(self, prompt: str, *extra: str, limit: int = 180) -> str:
        """One `gemini -p` session; its id (from the new chat file's header; "" when `extra`
        resumes one)."""
        before = self.chats()
        self.run("-m", MODEL, *extra, "-p", prompt, limit=limit)
        if "--resume" in extra:
            return ""
        (chat,) = self.chats() - before
        header = json.loads(chat.read_text().splitlines()[0])
        return str(header["sessionId"])


def test_memories_reach_the_next_gemini_session_and_cross_agents(
    gemini: str, tmp_path: Path
) -> None:
    timings: dict[str, Any] = {}
    with ScriptedGemini(script) as api:
        machine = Machine(tmp_path, gemini, api)
        installed = machine.lamina("install", "gemini", "--json")
        assert installed.returncode == 0, installed.stderr
        report = json.loads(installed.stdout)
        settings = json.loads((machine.gemini_dir / "settings.json").read_text())
        assert report["settings"] == str(machine.gemini_dir / "settings.json")
        assert {k: settings[k] for k in machine.settings} == machine.settings
        assert set(settings["hooks"]) == {"SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"}
        assert settings["mcpServers"]["lamina"]["trust"] is True
        status = json.loads(machine.lamina("status", "--json").stdout)
        assert status["gemini_hooks"]["user"]["installed"] is True

        # Session 1 states a fact; its own hooks (AfterAgent, SessionEnd) retain it.
        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        timings["retain_seconds"] = machine.wait_for_document(first)
        documents = json.loads(machine.lamina("documents", "--bank", machine.bank,
                                              "--json").stdout)["documents"]  # fmt: skip
        (document,) = [d for d in documents if d["id"] == first]
        assert document["format"] == "gemini" and document["metadata"]["agent"] == "gemini"

        # Session 2: exactly one memory block, a part of the user's content after the prompt.
        started = time.monotonic()
        machine.ask(SECOND_PROMPT)
        timings["second_session_wall_seconds"] = round(time.monotonic() - started, 2)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert block[0] == "user"
        assert "heron-7" in block[1] and "Frankfurt" in block[1]
        role, texts = contents(request)[-1]
        assert role == "user" and SECOND_PROMPT in texts[-2] and BLOCK in unescaped(texts[-1])
        assert texts[-1].startswith("<hook_context>")  # escaped inside: &lt;lamina_memories&gt;
        assert script(request) == "heron-7"
        # The MCP server is trusted, so headless Gemini offers its tools to the model.
        assert "mcp_lamina_recall" in json.dumps(request.get("tools"))

        # Resumed, the session still holds its prompt in the model's history (a SessionStart
        # context, prepended to it, would have made Gemini drop that message on resume).
        machine.ask(RESUME_PROMPT, "--resume", "latest")
        (request,) = requests_for(api, RESUME_PROMPT)
        history = [t for role, texts in contents(request)[:-1] if role == "user" for t in texts]
        assert any(SECOND_PROMPT in text for text in history)
        # Exactly one memory block: the one the history already holds (sent again by Gemini);
        # the prompt hook does not inject the same memories a second time.
        (held,) = memory_blocks(request)
        assert "heron-7" in held[1]
        assert not any(BLOCK in unescaped(t) for t in contents(request)[-1][1])
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "no memories: the session's history already holds them" in log

        # One memory across agents: a real Claude Code transcript, retained by the Claude Code
        # hook (Stop) into the project's bank, is recalled in a Gemini session.
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
        assert block[0] == "user" and "INKWELL_DB_PATH" in block[1], block[1]
        assert script(request) == "INKWELL_DB_PATH"

        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "failed" not in log, log[-3000:]
        sent = {"requests": api.requests, "other": api.other, "timings": timings}
        (tmp_path / "requests.json").write_text(json.dumps(sent, indent=2))
    print(f"\nGemini CLI {GEMINI_VERSION} end to end: {json.dumps(timings)}")


EXTENSION = "plugins/gemini-lamina"
"""The Gemini extension shipped in the repository (gemini-extension.json, hooks/hooks.json)."""


def test_the_gemini_extension_gives_one_memory_block(gemini: str, tmp_path: Path) -> None:
    """`gemini extensions install <path>` (the extension copied into the temporary HOME), a
    session that states a fact, retained by the extension's hooks; the next session's request
    carries exactly one memory block recalling it."""
    with ScriptedGemini(script) as api:
        machine = Machine(tmp_path, gemini, api)
        machine.run("extensions", "install", str(ROOT / EXTENSION), "--consent", limit=120)
        copied = machine.gemini_dir / "extensions" / "lamina"
        assert os.access(copied / "scripts" / "run-lamina", os.X_OK)
        assert "hooks" not in json.loads((machine.gemini_dir / "settings.json").read_text())

        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        machine.wait_for_document(first)

        machine.ask(SECOND_PROMPT)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert block[0] == "user" and "heron-7" in block[1] and "Frankfurt" in block[1]
        assert script(request) == "heron-7"
        # Gemini 0.61 drops `trust` from an extension's MCP servers (filterMcpConfig), and
        # headless mode offers only trusted servers' tools: the recall tool is not offered here.
        assert "mcp_lamina_recall" not in json.dumps(request.get("tools"))
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "injected" in log and "failed" not in log, log[-3000:]
        (tmp_path / "requests.json").write_text(json.dumps(api.requests, indent=2))
