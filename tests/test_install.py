"""Installing the Claude Code hooks keeps everything else in the settings; status reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.errors import ConfigError
from lamina.integrations.claude_code.install import hooks_config, install, uninstall

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


def test_the_shipped_plugin_files_match_the_code() -> None:
    shipped = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    assert shipped == {"hooks": hooks_config()}
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "lamina"


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
