"""`lamina install gemini`: Lamina's hooks and MCP server in the Gemini CLI's settings.json, every
other key kept, idempotent, removed again; the hook reads Gemini's payloads and chats and answers
the way Gemini reads context."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.config import default_bank, resolve_settings
from lamina.errors import ConfigError
from lamina.integrations.claude_code.detect import stands_aside
from lamina.integrations.claude_code.hook import served_event
from lamina.integrations.gemini.install import (
    HOOK_EVENTS,
    install,
    installed_scopes,
    settings_file,
    uninstall,
)
from lamina.integrations.transcript import transcript_format

from .test_claude_code_hooks import documents, hook

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "agent-clis-generated"
CHAT = "session-2026-12-04T17-36-b9dd6746.jsonl"
SESSION = "b9dd6746-a75d-4d9e-ab35-d2ce32e8c622"

SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"enableAutoUpdate": False},
    "hooksConfig": {"enabled": True},
    "mcpServers": {"github": {"command": "gh-mcp", "args": ["serve"]}},
    "hooks": {
        "AfterAgent": [{"hooks": [{"type": "command", "command": "notify.sh", "timeout": 5000}]}],
        "BeforeTool": [
            {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "guard"}]}
        ],
    },
}


@pytest.fixture
def gemini_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "ghome"))
    return tmp_path / "ghome" / ".gemini"


def ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        h for g in settings["hooks"][event] for h in g["hooks"] if "lamina" in h["command"]
    ]  # fmt: skip


def test_install_writes_hooks_and_server_and_keeps_every_other_key(gemini_home: Path) -> None:
    gemini_home.mkdir(parents=True)
    path = gemini_home / "settings.json"
    path.write_text(json.dumps(SETTINGS))
    assert install("user") == path
    settings = json.loads(path.read_text())
    for key in ("security", "general", "hooksConfig"):
        assert settings[key] == SETTINGS[key]
    assert settings["mcpServers"]["github"] == SETTINGS["mcpServers"]["github"]
    assert settings["hooks"]["BeforeTool"] == SETTINGS["hooks"]["BeforeTool"]
    assert set(HOOK_EVENTS) == {"SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"}
    for event, timeout in HOOK_EVENTS.items():
        (entry,) = ours(settings, event)
        assert entry["timeout"] == timeout >= 1000  # milliseconds
        assert entry["type"] == "command" and entry["name"] == f"lamina-{event}"
        assert entry["command"].startswith("LAMINA_HOOK_ORIGIN=gemini-user ")
        assert entry["command"].endswith(" hook")
    assert "notify.sh" in json.dumps(settings["hooks"]["AfterAgent"])
    server = settings["mcpServers"]["lamina"]
    assert server["trust"] is True and server["args"][-1] == "mcp"
    assert Path(server["command"]).is_absolute()
    # Idempotent: a second install writes the same bytes.
    written = path.read_bytes()
    install("user")
    assert path.read_bytes() == written
    assert installed_scopes() == {"user": True, "project": False}
    # Uninstall gives back exactly what was there.
    assert uninstall("user") == (path, True)
    assert json.loads(path.read_text()) == SETTINGS
    assert uninstall("user") == (path, False)


def test_a_file_of_only_lamina_goes_and_project_scope_uses_path(tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    path = install("project", directory=project)
    assert path == project / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    (entry,) = ours(settings, "BeforeAgent")
    assert "LAMINA_HOOK_ORIGIN=gemini-project exec lamina hook" in entry["command"]
    assert str(tmp_path) not in path.read_text()  # nothing of this machine in a shared file
    assert settings["mcpServers"]["lamina"] == {"command": "lamina", "args": ["mcp"],
                                                "trust": True}  # fmt: skip
    assert settings_file("project", project) == path
    assert uninstall("project", directory=project) == (path, True)
    assert not path.exists() and not path.parent.exists()


def test_a_foreign_lamina_server_is_left_alone(gemini_home: Path) -> None:
    gemini_home.mkdir(parents=True)
    path = gemini_home / "settings.json"
    path.write_text(json.dumps({"mcpServers": {"lamina": {"command": "node", "args": ["x.js"]}}}))
    with pytest.raises(ConfigError, match="other than `lamina mcp`"):
        install("user")
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        install("user")


def test_user_hooks_stand_aside_for_a_project_s(tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    env = {"GEMINI_CLI_HOME": str(tmp_path / "g"), "HOME": str(tmp_path)}
    install("user", env=env)
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "gemini-user"}) is None
    install("project", directory=project, env=env)
    found = stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "gemini-user"})
    assert found == "the project's Lamina hooks for Gemini"
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "gemini-project"}) is None


EXTENSION = Path(__file__).resolve().parents[1] / "plugins" / "gemini-lamina"


def test_the_extension_serves_the_same_events_with_the_plugin_launcher() -> None:
    shipped = json.loads((EXTENSION / "hooks" / "hooks.json").read_text())["hooks"]
    assert {event: groups[0]["hooks"][0]["timeout"] for event, groups in shipped.items()} == dict(
        HOOK_EVENTS
    )
    launcher = EXTENSION / "scripts" / "run-lamina"
    assert (
        launcher.read_bytes()
        == (EXTENSION.parent / "lamina" / "scripts" / "run-lamina").read_bytes()
    )
    assert os.access(launcher, os.X_OK)


def test_one_installation_serves_beside_the_extension(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    env = {"GEMINI_CLI_HOME": str(tmp_path / "g"), "HOME": str(tmp_path)}
    extension = {**env, "LAMINA_HOOK_ORIGIN": "gemini-extension"}
    installed = tmp_path / "g" / ".gemini" / "extensions" / "lamina"
    shutil.copytree(EXTENSION, installed)
    install("user", env=env)
    assert stands_aside(project, extension) is None
    found = stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "gemini-user"})
    assert found == "the Lamina extension for Gemini"
    install("project", directory=project, env=env)
    assert stands_aside(project, extension) == "the project's Lamina hooks for Gemini"


def test_before_agent_prompt_loses_the_session_start_context() -> None:
    prompt = "<hook_context>digest\nline</hook_context>\n\nstep2: list the files"
    payload = {"hook_event_name": "BeforeAgent", "session_id": "s", "prompt": prompt}
    served, event, named = served_event(payload)
    assert (event, named) == ("UserPromptSubmit", "BeforeAgent")
    assert served["prompt"] == "step2: list the files"
    assert served_event({"hook_event_name": "AfterAgent"})[1:] == ("Stop", "AfterAgent")
    assert served_event({"hook_event_name": "Stop"})[1:] == ("Stop", "Stop")


def sample_chat(tmp_path: Path) -> Path:
    source = SAMPLES / "gemini-0.61.0" / CHAT
    if not source.is_file():
        pytest.skip(f"{source}: the shared Gemini samples are not here")
    target = tmp_path / "ghome" / ".gemini" / "tmp" / "work" / "chats" / CHAT
    target.parent.mkdir(parents=True)
    shutil.copy(source, target)
    return target


def test_gemini_chats_are_told_from_other_transcripts(tmp_path: Path) -> None:
    chat = sample_chat(tmp_path)
    assert transcript_format(str(chat)) == "gemini"
    renamed = tmp_path / "whatever.jsonl"
    shutil.copy(chat, renamed)
    assert transcript_format(str(renamed)) == "gemini"
    empty = chat.parent / "session-2026-12-05T08-00-abcdef12.jsonl"
    empty.write_text("")
    assert transcript_format(str(empty)) == "gemini"
    example = Path(__file__).parents[1] / "examples" / "session.jsonl"
    assert transcript_format(str(example)) == "claude-code"


def test_gemini_events_retain_the_chat_and_recall_it_as_before_agent_context(
    tmp_path: Path,
) -> None:
    chat = sample_chat(tmp_path)
    home, project = tmp_path / "lamina", tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"LAMINA_HOOK_ORIGIN": "gemini-user", "CLAUDE_PROJECT_DIR": str(project),
           "GEMINI_CLI_HOME": str(tmp_path / "ghome")}  # fmt: skip
    base = {"session_id": SESSION, "cwd": str(project), "transcript_path": str(chat),
            "timestamp": "2026-12-04T17:36:48.437Z"}  # fmt: skip
    after = {**base, "hook_event_name": "AfterAgent", "prompt": "step2: list the files",
             "prompt_response": "FAKE-MODEL-REPLY", "stop_hook_active": False}  # fmt: skip
    ran = hook(home, after, **env)
    assert ran.returncode == 0 and ran.stdout == "", ran.stderr
    bank = default_bank(project, resolve_settings({}))
    document = documents(home, bank)[SESSION]
    assert document.metadata["agent"] == "gemini" and document.format == "gemini"
    # SessionStart gives no context to Gemini, even with the digest on.
    start = {**base, "session_id": "another", "hook_event_name": "SessionStart",
             "source": "startup"}  # fmt: skip
    started = hook(home, start, LAMINA_HOOK_SESSION_DIGEST="1", **env)
    assert started.returncode == 0 and started.stdout == "", started.stderr
    # Another session asks: the chat's words come back as BeforeAgent's additionalContext.
    asked = hook(home, {**base, "session_id": "another", "transcript_path": "",
                        "hook_event_name": "BeforeAgent",
                        "prompt": "<hook_context>x</hook_context>\n\nwhich files did step2 list?"},
                 **env)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    output = json.loads(asked.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "BeforeAgent"
    assert output["additionalContext"].startswith("<lamina_memories>")
    assert "step2: list the files" in output["additionalContext"]


def test_install_gemini_cli_json(tmp_path: Path) -> None:
    env = {**os.environ, "GEMINI_CLI_HOME": str(tmp_path / "g"), "LAMINA_HOME": str(tmp_path / "l"),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # fmt: skip
    env.pop("LAMINA_CODEX_BIN", None)
    run = subprocess.run([sys.executable, "-m", "lamina", "install", "gemini", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["installed"] and report["settings"] == str(tmp_path / "g/.gemini/settings.json")
    assert any("trust" in line for line in report["advice"])
    status = subprocess.run([sys.executable, "-m", "lamina", "status", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert json.loads(status.stdout)["gemini_hooks"]["user"]["installed"] is True
    text = subprocess.run([sys.executable, "-m", "lamina", "status"],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert "gemini      user: installed" in text.stdout
    gone = subprocess.run([sys.executable, "-m", "lamina", "uninstall", "gemini", "--json"],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert json.loads(gone.stdout)["removed"] is True
