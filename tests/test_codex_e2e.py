"""The real Codex CLI, offline, against a scripted OpenAI Responses API: `lamina install codex
--trust` (hooks trusted through `codex app-server`), a first `codex exec` session that states a
fact and is retained by its own hooks, a second whose request to the model carries exactly one
memory block recalling it (as a developer message), and one memory across agents: a real Claude
Code transcript retained through the Claude Code hook is recalled in a Codex session.

The CLI comes from LAMINA_CODEX_BIN or PATH (.ci/run installs the pinned version from npm).
Without it the test skips with the reason, unless LAMINA_REQUIRE_CODEX=1 (as in CI): then it
fails with the reason, LAMINA_CODEX_UNAVAILABLE's when .ci/run could not install it. What the
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
from .fake_openai import ScriptedResponses, input_messages, last_user_text

CODEX_VERSION = "0.171.0"
"""The CLI version the hook contract is tested with (.ci/run installs it)."""

FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
CROSS_PROMPT = "Which environment variable holds the inkwell database path, and its default?"
BLOCK = "<lamina_memories>"


CODEX = Cli("CODEX", "Codex CLI", "codex", "@openai/codex", CODEX_VERSION)


@pytest.fixture(scope="module")
def codex() -> str:
    return find_cli(CODEX)


def script(body: Mapping[str, Any]) -> str:
    """The scripted model: answers from what it was sent, else acknowledges."""
    asked = last_user_text(body)
    everything = json.dumps(body.get("input"))
    if SECOND_PROMPT in asked:
        return "heron-7" if "heron-7" in everything else "unknown"
    if CROSS_PROMPT in asked:
        return "INKWELL_DB_PATH" if "INKWELL_DB_PATH" in everything else "unknown"
    return "Noted."


def requests_for(api: ScriptedResponses, prompt: str) -> list[dict[str, Any]]:
    return [r for r in api.requests if prompt in last_user_text(r)]


def memory_blocks(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request's input messages holding a memory block: (role, text)."""
    return [(role, text) for role, text in input_messages(body) if BLOCK in text]


class Machine(AgentMachine):
    """A fresh HOME and CODEX_HOME with Codex pointed at the scripted API and nowhere else."""

    def __init__(self, tmp: Path, codex: str, api: ScriptedResponses) -> None:
        super().__init__(tmp, codex)
        self.codex = codex
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir()
        (self.codex_home / "config.toml").write_text(
            "\n".join(
                [
                    'model = "fake-model"',
                    'model_provider = "fake"',
                    'approval_policy = "never"',
                    'sandbox_mode = "read-only"',
                    "check_for_update_on_startup = false",
                    "",
                    "[model_providers.fake]",
                    'name = "Scripted"',
                    f'base_url = "{api.url}"',
                    'env_key = "FAKE_OPENAI_API_KEY"',
                    'wire_api = "responses"',
                    "request_max_retries = 0",
                    "stream_max_retries = 0",
                    "",
                    "[features]",
                    "plugins = false",
                    "",
                ]
            )
        )
        self.env.update(CODEX_HOME=str(self.codex_home), FAKE_OPENAI_API_KEY="scripted")

    def ask(self, prompt: str, limit: int = 180) -> str:
        """One `codex exec` session; its id (the newest rollout's)."""
        before = set(self.codex_home.glob("sessions/*/*/*/rollout-*.jsonl"))
        self.run("exec", prompt, limit=limit)
        (rollout,) = set(self.codex_home.glob("sessions/*/*/*/rollout-*.jsonl")) - before
        return rollout.stem[-36:]


def test_memories_reach_the_next_codex_session_and_cross_agents(codex: str, tmp_path: Path) -> None:
    timings: dict[str, Any] = {}
    with ScriptedResponses(script) as api:
        machine = Machine(tmp_path, codex, api)
        installed = machine.lamina("install", "codex", "--trust", "--codex", codex, "--json")
        assert installed.returncode == 0, installed.stderr
        report = json.loads(installed.stdout)
        assert report["trusted"] is True, report
        assert set(report["trust"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact",
                                        "SessionEnd"}  # fmt: skip
        status = json.loads(machine.lamina("status", "--json", LAMINA_CODEX_BIN=codex).stdout)
        assert status["codex_hooks"]["user"] == {**status["codex_hooks"]["user"],
                                                 "installed": True, "trusted": True}  # fmt: skip

        # Session 1 states a fact; its own hooks (Stop, SessionEnd) retain it.
        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        timings["retain_seconds"] = machine.wait_for_document(first)
        documents = json.loads(machine.lamina("documents", "--bank", machine.bank,
                                              "--json").stdout)["documents"]  # fmt: skip
        (document,) = [d for d in documents if d["id"] == first]
        assert document["format"] == "codex" and document["metadata"]["agent"] == "codex"

        # Session 2: exactly one memory block, as a developer message, recalling the fact.
        started = time.monotonic()
        machine.ask(SECOND_PROMPT)
        timings["second_session_wall_seconds"] = round(time.monotonic() - started, 2)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert block[0] == "developer"
        assert "heron-7" in block[1] and "Frankfurt" in block[1]
        roles = [role for role, _ in input_messages(request)]
        assert roles.index("developer", roles.index("user")) > 0  # after the prompt
        # The MCP server is registered and enabled (Codex lists it; in `exec` the first request
        # may leave before the server has listed its tools, so that is not asserted here).
        listed = subprocess.run([codex, "mcp", "list"], capture_output=True, text=True,
                                env=machine.env, timeout=60)  # fmt: skip
        (line,) = [x for x in listed.stdout.splitlines() if x.startswith("lamina ")]
        assert "enabled" in line and " mcp" in line, listed.stdout

        # One memory across agents: a real Claude Code transcript, retained by the Claude Code
        # hook (Stop) into the project's bank, is recalled in a Codex session.
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
        assert block[0] == "developer" and "INKWELL_DB_PATH" in block[1], block[1]

        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "failed" not in log, log[-3000:]
        sent = {"requests": api.requests, "other": api.other, "timings": timings}
        (tmp_path / "requests.json").write_text(json.dumps(sent, indent=2))
    print(f"\nCodex {CODEX_VERSION} end to end: {json.dumps(timings)}")


def test_the_codex_plugin_gives_one_memory_block(codex: str, tmp_path: Path) -> None:
    """The repository as a Codex marketplace (.agents/plugins/marketplace.json): `codex plugin
    marketplace add <checkout>`, `codex plugin add lamina@lamina` (copied into the temporary
    CODEX_HOME), its hooks trusted with `lamina install codex --plugin` (through `codex
    app-server`), which `lamina status` shows before and after; a session that states a fact,
    retained by the plugin's hooks; the next session's request carries exactly one memory
    block recalling it."""
    events = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
    with ScriptedResponses(script) as api:
        machine = Machine(tmp_path, codex, api)
        config = machine.codex_home / "config.toml"
        config.write_text(config.read_text().replace("plugins = false", "plugins = true"))
        missing = machine.lamina("install", "codex", "--plugin", "--codex", codex)
        assert missing.returncode == 3 and "codex plugin add lamina@lamina" in missing.stderr

        machine.run("plugin", "marketplace", "add", str(ROOT), limit=120)
        machine.run("plugin", "add", "lamina@lamina", limit=120)
        status = json.loads(machine.lamina("status", "--json", LAMINA_CODEX_BIN=codex).stdout)
        assert status["codex_hooks"]["plugin"]["trusted"] is False
        assert any("lamina install codex --plugin" in w for w in status["warnings"])
        trusted = machine.lamina("install", "codex", "--plugin", "--codex", codex, "--json")
        assert trusted.returncode == 0, trusted.stderr
        assert json.loads(trusted.stdout)["trust"] == dict.fromkeys(events, "trusted")
        status = json.loads(machine.lamina("status", "--json", LAMINA_CODEX_BIN=codex).stdout)
        assert status["codex_hooks"]["plugin"]["trusted"] is True
        assert not any("Codex" in w for w in status["warnings"]), status["warnings"]

        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(api, FIRST_PROMPT)
        assert memory_blocks(request) == []
        machine.wait_for_document(first)

        machine.ask(SECOND_PROMPT)
        (request,) = requests_for(api, SECOND_PROMPT)
        (block,) = memory_blocks(request)
        assert block[0] == "developer" and "heron-7" in block[1] and "Frankfurt" in block[1]
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "injected" in log and "failed" not in log, log[-3000:]
        (tmp_path / "requests.json").write_text(json.dumps(api.requests, indent=2))
