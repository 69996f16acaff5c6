"""Installing the Claude Code hooks keeps everything else in the settings; status reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.errors import ConfigError
from lamina.integrations.claude_code.install import (
    HOOK_EVENTS,
    PLUGIN_COMMAND,
    hooks_config,
    install,
    uninstall,
)

from .conftest import ROOT

OTHER = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "~/.claude/hooks/notify.sh"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps(OTHER))
    return root


def settings(project: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((project / ".claude" / "settings.json").read_text())


def test_install_adds_hooks_and_keeps_the_rest(project: Path) -> None:
    install("project", directory=project, command="lamina hook")
    data = settings(project)
    assert data["model"] == "opus" and data["permissions"] == OTHER["permissions"]
    commands = [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == ["~/.claude/hooks/notify.sh", "lamina hook"]
    assert data["hooks"]["PreToolUse"] == OTHER["hooks"]["PreToolUse"]
    for event in ("UserPromptSubmit", "SessionStart", "PreCompact", "SessionEnd"):
        assert any(h["command"] == "lamina hook" for g in data["hooks"][event] for h in g["hooks"])
    # Installing twice leaves one entry per event.
    install("project", directory=project, command="/venv/bin/lamina hook")
    again = settings(project)
    commands = [h["command"] for g in again["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == ["~/.claude/hooks/notify.sh", "/venv/bin/lamina hook"]


def test_uninstall_restores_what_was_there(project: Path) -> None:
    install("project", directory=project, command="lamina hook")
    path, changed = uninstall("project", directory=project)
    assert changed and path == project / ".claude" / "settings.json"
    assert settings(project) == OTHER
    assert uninstall("project", directory=project)[1] is False


def test_broken_settings_are_never_replaced(project: Path) -> None:
    path = project / ".claude" / "settings.json"
    path.write_text("{ not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        install("project", directory=project)
    assert path.read_text() == "{ not json"


PLUGIN = ROOT / "plugins" / "lamina"
LAUNCHER = PLUGIN / "scripts" / "run-lamina"


def test_the_shipped_plugin_files_match_the_code() -> None:
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = marketplace["plugins"]
    assert entry["name"] == "lamina" and (ROOT / entry["source"]).resolve() == PLUGIN
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "lamina" and manifest["author"]["name"]
    assert manifest["version"] == entry["version"]
    shipped = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())
    assert shipped["hooks"] == hooks_config(PLUGIN_COMMAND)
    # Every event has an explicit timeout, SessionEnd's within the 1.5 s Claude Code allows.
    timeouts = {
        event: groups[0]["hooks"][0]["timeout"] for event, groups in shipped["hooks"].items()
    }
    assert set(timeouts) == set(HOOK_EVENTS) and timeouts["SessionEnd"] <= 2
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert servers["lamina"]["command"] == "${CLAUDE_PLUGIN_ROOT}/scripts/run-lamina"
    assert servers["lamina"]["args"] == ["mcp"]
    assert os.access(LAUNCHER, os.X_OK)


def launcher(
    tmp_path: Path, *args: str, payload: dict[str, str] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The plugin's launcher as Claude Code runs it, on a PATH without Lamina."""
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env}
    return subprocess.run(
        ["sh", str(LAUNCHER), *args],
        input=json.dumps(payload or {}),
        capture_output=True,
        text=True,
        env=environ,
        timeout=30,
    )


def test_plugin_without_lamina_says_once_how_to_install_it(tmp_path: Path) -> None:
    start = launcher(tmp_path, "hook", payload={"hook_event_name": "SessionStart"})
    assert start.returncode == 0
    message = json.loads(start.stdout)["systemMessage"]
    assert "lamina command was not found" in message and "pipx install" in message
    for event in ("UserPromptSubmit", "Stop", "SessionEnd"):
        quiet = launcher(tmp_path, "hook", payload={"hook_event_name": event})
        assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    server = launcher(tmp_path, "mcp")
    assert server.returncode == 1 and "pipx install" in server.stderr


def test_plugin_runs_the_installed_lamina_and_says_it_is_the_plugin(tmp_path: Path) -> None:
    fake = tmp_path / ".local" / "bin" / "lamina"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "$LAMINA_HOOK_ORIGIN $*"\n')
    fake.chmod(0o755)
    found = launcher(tmp_path, "hook", payload={"hook_event_name": "Stop"})
    assert found.stdout == "plugin hook\n"
    # LAMINA_BIN wins over the usual places.
    other = tmp_path / "other"
    other.write_text('#!/bin/sh\necho "other $*"\n')
    other.chmod(0o755)
    assert launcher(tmp_path, "mcp", LAMINA_BIN=str(other)).stdout == "other mcp\n"


def test_plugin_hooks_run_the_scripts_python_at_lamina_itself(tmp_path: Path) -> None:
    """pip's `lamina` script imports `re` before Lamina: a hook runs the script's Python at
    Lamina's entry point instead, never importing from the project it runs in, and falls back
    to the script where that Python has no Lamina."""
    project = tmp_path / "project"
    (project / "lamina").mkdir(parents=True)
    marker = tmp_path / "shadowed"
    (project / "lamina" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = tmp_path / "bin" / "lamina"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit('the script ran')\n")
    script.chmod(0o755)
    payload = {"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(project)}
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LAMINA_BIN": str(script),
               "LAMINA_HOME": str(tmp_path / "home")}  # fmt: skip
    run = subprocess.run(["sh", str(LAUNCHER), "hook"], input=json.dumps(payload), cwd=project,
                         capture_output=True, text=True, env=environ, timeout=60)  # fmt: skip
    assert run.returncode == 0 and "the script ran" not in run.stderr, run.stderr
    assert not marker.exists()
    assert "SessionStart" in (tmp_path / "home" / "logs" / "hooks.log").read_text()
    # A Python without Lamina: the script itself runs, with the same arguments.
    script.write_text("#!/usr/bin/python3\nimport sys\nprint('the script ran', sys.argv[1:])\n")
    fallback = subprocess.run(["sh", str(LAUNCHER), "hook"], input="{}", cwd=tmp_path,
                              capture_output=True, text=True, env=environ, timeout=60)  # fmt: skip
    assert fallback.stdout == "the script ran ['hook']\n", fallback.stderr


def test_project_install_writes_nothing_of_this_machine(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    (fresh / ".git").mkdir(parents=True)
    path = install("project", directory=fresh)
    text = path.read_text()
    for machine_specific in (sys.executable, str(Path.home()), "--home", str(tmp_path)):
        assert machine_specific not in text
    commands = {g[0]["hooks"][0]["command"] for g in json.loads(text)["hooks"].values()}
    assert all("lamina hook" in command for command in commands)
    # On a machine without Lamina, SessionStart says so once and every other event is quiet.
    for event, groups in json.loads(text)["hooks"].items():
        command = groups[0]["hooks"][0]["command"]
        run = subprocess.run(["sh", "-c", command], input="{}", capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin"}, timeout=30)  # fmt: skip
        assert run.returncode == 0, (event, run.stderr)
        if event == "SessionStart":
            assert "lamina command was not found" in json.loads(run.stdout)["systemMessage"]
        else:
            assert run.stdout == ""
    # Uninstalling leaves the project as it was: no settings file, no .claude directory.
    assert uninstall("project", directory=fresh)[1] is True
    assert not (fresh / ".claude").exists()


def test_cli_install_status_uninstall(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LAMINA_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "HOME": str(tmp_path),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lamina", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )

    assert run("install", "claude-code", "--user").returncode == 0
    report = json.loads(run("status", "--json").stdout)
    assert report["hooks"]["user"]["installed"] is True
    assert report["hooks"]["user"]["settings"] == str(tmp_path / "claude" / "settings.json")
    assert json.loads(run("doctor", "--json").stdout)["data_dir"] == str(tmp_path / "home")
    assert "removed" in run("uninstall", "claude-code").stdout
    assert json.loads(run("status", "--json").stdout)["hooks"]["user"]["installed"] is False
