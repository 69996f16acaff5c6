"""`lamina install copilot`: Lamina's hooks and MCP server for the Copilot CLI, every other entry
kept, idempotent, removed again; the hook finds Copilot's session file, retains it with the
Copilot reader and answers the way Copilot reads context."""

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
from lamina.integrations.copilot.install import (
    HOOK_EVENTS,
    PLUGIN,
    copilot_files,
    install,
    installed_scopes,
    plugin_installed,
    uninstall,
)
from lamina.integrations.transcript import transcript_format

from .test_claude_code_hooks import documents, hook

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "agent-clis-generated"
SESSION = "befdf5d3-3f0b-4b65-b2ed-477e7a13eb3d"

HOOKS: dict[str, Any] = {
    "version": 1,
    "hooks": {
        "Stop": [{"type": "command", "bash": "notify.sh", "timeoutSec": 5}],
        "preToolUse": [{"type": "command", "bash": "guard.sh"}],
    },
}
MCP: dict[str, Any] = {"mcpServers": {"github": {"type": "local", "command": "gh-mcp"}}}


@pytest.fixture
def copilot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "chome"))
    return tmp_path / "chome"


def ours(hooks: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [entry for entry in hooks["hooks"][event] if "lamina" in entry["bash"]]


def test_install_writes_hooks_and_server_and_keeps_every_other_entry(copilot_home: Path) -> None:
    hooks_file, mcp_file = copilot_home / "hooks" / "lamina.json", copilot_home / "mcp-config.json"
    hooks_file.parent.mkdir(parents=True)
    hooks_file.write_text(json.dumps(HOOKS))
    mcp_file.write_text(json.dumps(MCP))
    files = install("user")
    assert (files.hooks, files.mcp) == (hooks_file, mcp_file)
    hooks = json.loads(hooks_file.read_text())
    assert hooks["version"] == 1 and hooks["hooks"]["preToolUse"] == HOOKS["hooks"]["preToolUse"]
    assert set(HOOK_EVENTS) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "PreCompact",
        "SessionEnd",
    }
    for event, timeout in HOOK_EVENTS.items():
        (entry,) = ours(hooks, event)
        assert entry["type"] == "command" and entry["timeoutSec"] == timeout
        assert entry["bash"].startswith("LAMINA_HOOK_ORIGIN=copilot-user ")
        assert entry["bash"].endswith(" hook")
    assert "notify.sh" in json.dumps(hooks["hooks"]["Stop"])
    servers = json.loads(mcp_file.read_text())["mcpServers"]
    assert servers["github"] == MCP["mcpServers"]["github"]
    assert servers["lamina"]["type"] == "local" and servers["lamina"]["args"][-1] == "mcp"
    assert Path(servers["lamina"]["command"]).is_absolute() and servers["lamina"]["tools"] == ["*"]
    # Idempotent: a second install writes the same bytes.
    written = hooks_file.read_bytes(), mcp_file.read_bytes()
    install("user")
    assert (hooks_file.read_bytes(), mcp_file.read_bytes()) == written
    assert installed_scopes() == {"user": True, "project": False}
    # Uninstall gives back exactly what was there.
    assert uninstall("user") == (files, True)
    assert json.loads(hooks_file.read_text()) == HOOKS
    assert json.loads(mcp_file.read_text()) == MCP
    assert uninstall("user") == (files, False)


def test_project_scope_uses_path_and_leaves_nothing_behind(tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    files = install("project", directory=project)
    assert files.hooks == project / ".github" / "hooks" / "lamina.json"
    assert files.mcp == project / ".github" / "mcp.json"
    hooks = json.loads(files.hooks.read_text())
    (entry,) = ours(hooks, "UserPromptSubmit")
    assert "LAMINA_HOOK_ORIGIN=copilot-project exec lamina hook" in entry["bash"]
    for path in (files.hooks, files.mcp):  # nothing of this machine in a shared file
        assert str(tmp_path) not in path.read_text()
    assert json.loads(files.mcp.read_text())["mcpServers"]["lamina"] == {
        "type": "local", "command": "lamina", "args": ["mcp"], "tools": ["*"]}  # fmt: skip
    assert copilot_files("project", project) == files
    assert uninstall("project", directory=project) == (files, True)
    assert not (project / ".github").exists()


def test_a_foreign_lamina_server_is_left_alone_and_nothing_is_written(copilot_home: Path) -> None:
    copilot_home.mkdir(parents=True)
    (copilot_home / "mcp-config.json").write_text(
        json.dumps({"mcpServers": {"lamina": {"command": "node", "args": ["x.js"]}}})
    )
    with pytest.raises(ConfigError, match="other than `lamina mcp`"):
        install("user")
    assert not (copilot_home / "hooks").exists()
    (copilot_home / "mcp-config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        install("user")


def test_user_hooks_stand_aside_for_a_project_s_and_claude_code_s_for_copilot_s(
    tmp_path: Path,
) -> None:
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    env = {"COPILOT_HOME": str(tmp_path / "c"), "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}  # fmt: skip
    # Copilot also runs a project's .claude/settings.json hooks: while Lamina has no Copilot
    # hooks they serve the session, then they stand aside for them.
    claude_in_copilot = {**env, "LAMINA_HOOK_ORIGIN": "project", "COPILOT_HOOK_DIR": "x"}
    assert stands_aside(project, claude_in_copilot) is None
    install("user", env=env)
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "copilot-user"}) is None
    assert stands_aside(project, claude_in_copilot) == "Lamina's hooks for Copilot"
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "project"}) is None
    install("project", directory=project, env=env)
    found = stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "copilot-user"})
    assert found == "the project's Lamina hooks for Copilot"
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "copilot-project"}) is None


PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugins" / "copilot-lamina"


def test_the_plugin_serves_the_same_hooks_through_the_plugin_launcher() -> None:
    shipped = json.loads((PLUGIN_DIR / "hooks" / "hooks.json").read_text())
    assert shipped["version"] == 1
    hooks = shipped["hooks"]
    assert {event: entries[0]["timeoutSec"] for event, entries in hooks.items()} == dict(
        HOOK_EVENTS
    )
    assert {entries[0]["bash"] for entries in hooks.values()} == {
        '"${PLUGIN_ROOT}/scripts/run-lamina" --origin copilot-plugin hook'
    }
    launcher = PLUGIN_DIR / "scripts" / "run-lamina"
    claude_code = PLUGIN_DIR.parent / "lamina" / "scripts" / "run-lamina"
    assert launcher.read_bytes() == claude_code.read_bytes()
    assert os.access(launcher, os.X_OK)
    manifest = json.loads((PLUGIN_DIR / "plugin.json").read_text())
    assert (PLUGIN_DIR / manifest["hooks"]).is_file() and (
        PLUGIN_DIR / manifest["mcpServers"]
    ).is_file()
    # Copilot reads .github/plugin/marketplace.json before .claude-plugin/marketplace.json.
    market = json.loads(
        (PLUGIN_DIR.parents[1] / ".github" / "plugin" / "marketplace.json").read_text()
    )
    (entry,) = market["plugins"]
    assert f"{entry['name']}@{market['name']}" == PLUGIN
    assert (PLUGIN_DIR.parents[1] / entry["source"]).resolve() == PLUGIN_DIR
    assert entry["version"] == manifest["version"]


def test_the_plugin_is_installed_while_copilot_has_it_enabled(tmp_path: Path) -> None:
    home = tmp_path / "c"
    env = {"COPILOT_HOME": str(home)}
    assert plugin_installed(env) is False
    home.mkdir()
    settings = home / "settings.json"
    settings.write_text(json.dumps({"enabledPlugins": {PLUGIN: True, "other@x": True}}))
    assert plugin_installed(env) is True
    settings.write_text(json.dumps({"enabledPlugins": {PLUGIN: False}}))  # `copilot plugin disable`
    assert plugin_installed(env) is False
    settings.write_text("{not json")  # Copilot's to report: the hook goes on without the plugin
    assert plugin_installed(env) is False
    settings.unlink()
    (home / "installed-plugins" / "lamina" / "lamina").mkdir(parents=True)  # copied from GitHub
    assert plugin_installed(env) is True


def test_one_installation_serves_beside_the_copilot_plugin(tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)
    home = tmp_path / "c"
    env = {"COPILOT_HOME": str(home), "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}  # fmt: skip
    plugin = {**env, "LAMINA_HOOK_ORIGIN": "copilot-plugin", "COPILOT_HOOK_DIR": "x"}
    install("user", env=env)
    home.joinpath("settings.json").write_text(json.dumps({"enabledPlugins": {PLUGIN: True}}))
    assert stands_aside(project, plugin) is None
    found = stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "copilot-user"})
    assert found == "the Lamina plugin for Copilot"
    claude_in_copilot = {**env, "LAMINA_HOOK_ORIGIN": "project", "COPILOT_HOOK_DIR": "x"}
    assert stands_aside(project, claude_in_copilot) == "Lamina's hooks for Copilot"
    install("project", directory=project, env=env)
    assert stands_aside(project, plugin) == "the project's Lamina hooks for Copilot"


def sample_session(tmp_path: Path) -> Path:
    source = SAMPLES / "copilot-1.0.102" / "events.jsonl"
    if not source.is_file():
        pytest.skip(f"{source}: the shared Copilot samples are not here")
    target = tmp_path / "chome" / "session-state" / SESSION / "events.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copy(source, target)
    return target


def test_copilot_sessions_are_told_from_other_transcripts(tmp_path: Path) -> None:
    events = sample_session(tmp_path)
    assert transcript_format(str(events)) == "copilot"
    renamed = tmp_path / "whatever.jsonl"
    shutil.copy(events, renamed)
    assert transcript_format(str(renamed)) == "copilot"
    empty = events.parents[1] / "0b9c7e1e-0000-4000-8000-000000000000" / "events.jsonl"
    empty.parent.mkdir()
    empty.write_text("")
    assert transcript_format(str(empty)) == "copilot"


def test_copilot_events_retain_the_session_and_recall_it_as_top_level_context(
    tmp_path: Path,
) -> None:
    sample_session(tmp_path)
    home, project = tmp_path / "lamina", tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"LAMINA_HOOK_ORIGIN": "copilot-user", "CLAUDE_PROJECT_DIR": str(project),
           "COPILOT_HOME": str(tmp_path / "chome")}  # fmt: skip
    # SessionEnd names no transcript: the session id finds it under COPILOT_HOME.
    end = {"hook_event_name": "SessionEnd", "session_id": SESSION, "cwd": str(project),
           "timestamp": "2026-12-04T17:36:34.733Z", "reason": "complete"}  # fmt: skip
    ran = hook(home, end, **env)
    assert ran.returncode == 0 and ran.stdout == "", ran.stderr
    bank = default_bank(project, resolve_settings({}))
    document = documents(home, bank)[SESSION]
    assert document.metadata["agent"] == "copilot" and document.format == "copilot"
    # Another session asks: the session's words come back as a top-level additionalContext,
    # the only shape Copilot reads.
    asked = hook(home, {"hook_event_name": "UserPromptSubmit", "session_id": "another",
                        "cwd": str(project), "prompt": "what did I say hello to (copilot)?"},
                 **env)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    output = json.loads(asked.stdout)
    assert "hookSpecificOutput" not in output
    assert output["additionalContext"].startswith("<lamina_memories>")
    assert "Say hello (copilot)" in output["additionalContext"]
    # The hook context Copilot recorded in that session (its hook.end output) was not retained.
    assert "LAMINA-MARKER" not in output["additionalContext"]


def test_install_copilot_cli_json_and_status(tmp_path: Path) -> None:
    env = {**os.environ, "COPILOT_HOME": str(tmp_path / "c"), "LAMINA_HOME": str(tmp_path / "l"),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # fmt: skip
    env.pop("LAMINA_CODEX_BIN", None)

    def lamina(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lamina", *args], capture_output=True,
                              text=True, env=env, timeout=60, cwd=tmp_path)  # fmt: skip

    before = json.loads(lamina("status", "--json").stdout)["copilot_hooks"]
    assert (
        before["user"]["installed"] is False and "copilot      user" not in lamina("status").stdout
    )
    run = lamina("install", "copilot", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["installed"] and report["hooks_file"] == str(tmp_path / "c/hooks/lamina.json")
    assert report["mcp_config"] == str(tmp_path / "c/mcp-config.json")
    assert json.loads(lamina("status", "--json").stdout)["copilot_hooks"]["user"]["installed"]
    assert "copilot     user: installed" in lamina("status").stdout
    project = lamina("install", "copilot", "--project")
    assert "trusted" in project.stderr  # a repository's hooks run only in a trusted folder
    gone = lamina("uninstall", "copilot", "--json")
    assert json.loads(gone.stdout)["removed"] is True
    assert lamina("uninstall", "copilot", "--project").stdout.startswith("removed")
