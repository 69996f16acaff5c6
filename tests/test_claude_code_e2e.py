"""The real Claude Code CLI, offline, against a scripted Anthropic API: the plugin installed
from this checkout through its marketplace, a first session that states a fact, a second that
gets it back in exactly one memory block, and the bundled MCP server connected and called.

The CLI comes from LAMINA_CLAUDE_BIN or PATH (.ci/run installs the pinned version from npm).
Without it the test skips with the reason, unless LAMINA_REQUIRE_CLAUDE=1 (as in CI): then it
fails with the reason, LAMINA_CLAUDE_UNAVAILABLE's when .ci/run could not install it.
Timings (hook durations as Claude Code logged them) are written to `<tmp>/timings.json` and
printed (`pytest -s` shows them).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .agent_machine import AgentMachine, Cli, find_cli
from .conftest import ROOT
from .fake_anthropic import ScriptedAPI, last_user_text, text_of

CLAUDE_VERSION = "2.1.328"
"""The CLI version the plugin and hook contract are tested with (.ci/run installs it)."""

FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
TOOL_PROMPT = "Use the lamina recall tool to look up the staging database."


CLAUDE = Cli("CLAUDE", "Claude Code CLI", "claude", "@anthropic-ai/claude-code", CLAUDE_VERSION)


@pytest.fixture(scope="module")
def claude() -> str:
    return find_cli(CLAUDE)


RECALL_TOOL = "mcp__plugin_lamina_lamina__recall"


def script(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The scripted model: acknowledges, answers from its memory block, or calls the MCP tool
    (loading it through ToolSearch first, as Claude Code defers MCP tools' schemas)."""
    asked = last_user_text(body)
    messages = body.get("messages") or []
    everything = json.dumps(messages)
    last = messages[-1] if messages else {}
    results = [
        b
        for b in last.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    offered = {t.get("name", "") for t in body.get("tools") or []}
    if results and results[0].get("tool_use_id") != "toolu_search_1":
        return [{"type": "text", "text": "The recall tool answered."}]
    if TOOL_PROMPT in everything:
        if RECALL_TOOL in offered:
            return [{"type": "tool_use", "id": "toolu_recall_1", "name": RECALL_TOOL,
                     "input": {"query": "staging database name"}}]  # fmt: skip
        if RECALL_TOOL in everything and "ToolSearch" in offered and not results:
            return [{"type": "tool_use", "id": "toolu_search_1", "name": "ToolSearch",
                     "input": {"query": f"select:{RECALL_TOOL}"}}]  # fmt: skip
        return [{"type": "text", "text": "I have no lamina recall tool."}]
    if SECOND_PROMPT in asked:
        return [{"type": "text", "text": "heron-7" if "heron-7" in everything else "unknown"}]
    return [{"type": "text", "text": "Noted."}]


def requests_for(api: ScriptedAPI, prompt: str) -> list[dict[str, Any]]:
    return [r for r in api.requests if prompt in json.dumps(r.get("messages") or [])]


def hook_durations(debug_log: Path) -> dict[str, int]:
    """Milliseconds each Lamina hook took, as Claude Code logged them."""
    found: dict[str, int] = {}
    pattern = re.compile(r"Hooks: (\w+)(?::\w+)? \[.*run-lamina.*\] .*status 0 \((\d+)ms\)")
    for line in debug_log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = pattern.search(line)
        if match:
            found.setdefault(match.group(1), int(match.group(2)))
    return found


class Machine(AgentMachine):
    """A fresh HOME with Claude Code pointed at the scripted API and nowhere else."""

    def __init__(self, tmp: Path, claude: str, api: ScriptedAPI) -> None:
        super().__init__(tmp, claude)
        self.env.update(
            CLAUDE_CONFIG_DIR=str(self.home / ".claude"),
            ANTHROPIC_BASE_URL=api.url,
            ANTHROPIC_API_KEY="sk-ant-scripted",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )

    def ask(self, prompt: str, debug: Path, *extra: str) -> dict[str, Any]:
        started = time.monotonic()
        result = self.run("-p", prompt, "--output-format", "json", "--debug-file", str(debug),
                          *extra)  # fmt: skip
        answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
        answer["wall_seconds"] = round(time.monotonic() - started, 2)
        return answer


def test_memories_reach_the_next_session_through_the_plugin(claude: str, tmp_path: Path) -> None:
    timings: dict[str, Any] = {}
    with ScriptedAPI(script) as api:
        machine = Machine(tmp_path, claude, api)
        validate = machine.run("plugin", "validate", "--strict", str(ROOT / "plugins" / "lamina"))
        assert validate.returncode == 0, validate.stdout + validate.stderr
        assert machine.run("plugin", "validate", "--strict", str(ROOT)).returncode == 0
        added = machine.run("plugin", "marketplace", "add", str(ROOT))
        assert added.returncode == 0, added.stdout + added.stderr
        installed = machine.run("plugin", "install", "lamina@lamina")
        assert installed.returncode == 0, installed.stdout + installed.stderr
        # Hooks from `lamina install claude-code` as well: they must stand aside for the plugin.
        assert machine.lamina("install", "claude-code", "--user").returncode == 0

        first = machine.ask(FIRST_PROMPT, tmp_path / "first.log")
        assert first["is_error"] is False
        (request,) = requests_for(api, FIRST_PROMPT)
        assert "<lamina_memories>" not in json.dumps(request["messages"])
        timings["retain_seconds"] = machine.wait_for_document(first["session_id"])

        second = machine.ask(SECOND_PROMPT, tmp_path / "second.log")
        (request,) = requests_for(api, SECOND_PROMPT)
        sent = json.dumps(request["messages"])
        assert sent.count("<lamina_memories>") == 1, sent[:4000]
        block = sent[sent.index("<lamina_memories>") : sent.index("</lamina_memories>")]
        assert "heron-7" in block and "Frankfurt" in block
        assert second["result"] == "heron-7"
        timings["first_session"] = hook_durations(tmp_path / "first.log")
        timings["second_session"] = hook_durations(tmp_path / "second.log")
        timings["second_session_wall_seconds"] = second["wall_seconds"]
        assert "UserPromptSubmit" in timings["second_session"]

        status = json.loads(machine.lamina("status", "--json").stdout)
        assert status["plugin"]["enabled"] and status["hooks"]["user"]["installed"]
        assert any("plugin and hooks in user settings" in w for w in status["warnings"])

        # The plugin's MCP server: connected, listed to the model in -p mode, and called.
        started = time.monotonic()
        listed = machine.run("mcp", "list", limit=120)
        timings["mcp_list_seconds"] = round(time.monotonic() - started, 2)
        line = next((x for x in listed.stdout.splitlines() if "plugin:lamina:lamina" in x), "")
        assert "Connected" in line, listed.stdout + listed.stderr
        tool = machine.ask(TOOL_PROMPT, tmp_path / "tool.log", "--allowedTools", RECALL_TOOL)
        calls = requests_for(api, TOOL_PROMPT)
        # Listed to the model from the session's first request on (connected in -p mode).
        assert RECALL_TOOL in json.dumps(calls[0]), json.dumps(calls[0])[:3000]
        results = [
            text_of(block.get("content"))
            for r in calls
            for m in r["messages"]
            for block in m.get("content") or []
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        assert any("heron-7" in r for r in results), results
        assert tool["result"] == "The recall tool answered."
    (tmp_path / "timings.json").write_text(json.dumps(timings, indent=2))
    print(f"\nClaude Code {CLAUDE_VERSION} end to end: {json.dumps(timings)}")
