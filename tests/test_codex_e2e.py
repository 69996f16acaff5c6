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

from .conftest import EXAMPLE, ROOT
from .fake_openai import ScriptedResponses, input_messages, last_user_text

CODEX_VERSION = "0.171.0"
"""The CLI version the hook contract is tested with (.ci/run installs it)."""

FACT = "the staging database is called heron-7 and runs in Frankfurt"
FIRST_PROMPT = f"Please remember this for later: {FACT}."
SECOND_PROMPT = "Which name does the staging database have, and where does it run?"
CROSS_PROMPT = "Which environment variable holds the inkwell database path, and its default?"
RETAIN_WAIT = 300.0
"""Seconds a detached retain may take on a fresh, busy machine (model load included)."""
BLOCK = "<lamina_memories>"


def _unavailable(reason: str) -> None:
    if os.environ.get("LAMINA_REQUIRE_CODEX") == "1":
        pytest.fail(f"the Codex CLI is required here (LAMINA_REQUIRE_CODEX=1): {reason}")
    pytest.skip(f"{reason} (set LAMINA_CODEX_BIN, or install @openai/codex)")


@pytest.fixture(scope="module")
def codex() -> str:
    if os.environ.get("LAMINA_CODEX_UNAVAILABLE"):
        _unavailable(os.environ["LAMINA_CODEX_UNAVAILABLE"])
    found = os.environ.get("LAMINA_CODEX_BIN") or shutil.which("codex")
    if not found or not Path(found).exists():
        _unavailable("no Codex CLI found")
    assert found is not None
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 timeout=60, stdin=subprocess.DEVNULL).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"{found} --version failed: {exc}")
    if version.split()[-1:] != [CODEX_VERSION]:
        _unavailable(f"{found} is Codex {version.strip()!r}, not {CODEX_VERSION}")
    return found


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


class Machine:
    """A fresh HOME and CODEX_HOME with Codex pointed at the scripted API and nowhere else."""

    def __init__(self, tmp: Path, codex: str, api: ScriptedResponses) -> None:
        self.codex = codex
        self.home = tmp / "home"
        self.codex_home = tmp / "home" / ".codex"
        self.project = tmp / "inkwell"
        self.lamina_home = tmp / "lamina"
        for directory in (self.codex_home, self.project):
            directory.mkdir(parents=True)
        if shutil.which("git"):
            subprocess.run(["git", "init", "-q", str(self.project)], check=True, timeout=60)
        else:
            (self.project / ".git").mkdir()
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
        closed = "http://127.0.0.1:9"  # nothing listens: calls elsewhere fail at once
        self.env = {
            # The installed lamina (this environment's) is on PATH, as after `pipx install`.
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "LAMINA_HOME": str(self.lamina_home),
            "FAKE_OPENAI_API_KEY": "scripted",
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
        """One `codex exec` session; its id (the newest rollout's)."""
        before = set(self.codex_home.glob("sessions/*/*/*/rollout-*.jsonl"))
        result = subprocess.run(
            ["timeout", "-k", "5", str(limit), self.codex, "exec", prompt],
            capture_output=True, text=True, env=self.env, cwd=self.project,
            stdin=subprocess.DEVNULL, timeout=limit + 30,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:] or result.stdout[-3000:]
        (rollout,) = set(self.codex_home.glob("sessions/*/*/*/rollout-*.jsonl")) - before
        return rollout.stem[-36:]

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
    CODEX_HOME), its hooks trusted through `codex app-server`; a session that states a fact,
    retained by the plugin's hooks; the next session's request carries exactly one memory
    block recalling it."""
    from lamina.integrations.codex.install import trust_plugin

    with ScriptedResponses(script) as api:
        machine = Machine(tmp_path, codex, api)
        config = machine.codex_home / "config.toml"
        config.write_text(config.read_text().replace("plugins = false", "plugins = true"))

        def run(*args: str) -> None:
            done = subprocess.run(
                ["timeout", "-k", "5", "120", codex, *args], capture_output=True, text=True,
                env=machine.env, cwd=machine.project, stdin=subprocess.DEVNULL, timeout=150,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:] or done.stdout[-3000:]

        run("plugin", "marketplace", "add", str(ROOT))
        run("plugin", "add", "lamina@lamina")
        states = trust_plugin(codex, directory=machine.project, env=machine.env)
        assert states == dict.fromkeys(("SessionStart", "UserPromptSubmit", "Stop", "PreCompact",
                                        "SessionEnd"), "trusted")  # fmt: skip

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
