"""`lamina install codex`: Lamina's hooks in Codex's hooks.json and its MCP server in config.toml,
every other byte kept, idempotent, removed again; the hook reads Codex's payloads and rollouts
and answers the way Codex reads context."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from lamina.config import default_bank, resolve_settings
from lamina.errors import ConfigError
from lamina.integrations.claude_code.detect import stands_aside
from lamina.integrations.claude_code.prompt import last_compaction
from lamina.integrations.codex.install import (
    HOOK_EVENTS,
    codex_files,
    install,
    installed_scopes,
    uninstall,
)
from lamina.integrations.codex.transcript import transcript_format

from .test_claude_code_hooks import documents, hook

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "agent-clis-generated"
ROLLOUT = "rollout-2026-12-04T17-36-43-01a24221-38b7-7202-868e-0659a70eb601.jsonl"

CONFIG = """# my Codex settings
model = "gpt-5.5"   # keep this comment
approval_policy = "on-request"

[mcp_servers.github]
command = "gh-mcp"
args = ["serve"]

[projects."/home/me/app"]
trust_level = "trusted"
"""
OTHER_HOOKS = {
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify.sh", "timeout": 5}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
    }
}


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "codexhome"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


def ours(hooks: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        h for g in hooks["hooks"][event] for h in g["hooks"] if "lamina" in h["command"]
    ]  # fmt: skip


def test_install_writes_hooks_and_server_and_keeps_every_other_byte(codex_home: Path) -> None:
    (codex_home / "config.toml").write_text(CONFIG)
    (codex_home / "hooks.json").write_text(json.dumps(OTHER_HOOKS))
    files = install("user")
    assert files.hooks == codex_home / "hooks.json"
    hooks = json.loads(files.hooks.read_text())
    for event, timeout in HOOK_EVENTS.items():
        (entry,) = ours(hooks, event)
        assert entry["timeout"] == timeout and entry["type"] == "command"
        assert entry["command"].startswith("LAMINA_HOOK_ORIGIN=codex-user ")
        assert entry["command"].endswith(" hook")
    assert hooks["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex clamps to 3 s
    assert hooks["hooks"]["PreToolUse"] == OTHER_HOOKS["hooks"]["PreToolUse"]
    assert hooks["hooks"]["Stop"][0] == OTHER_HOOKS["hooks"]["Stop"][0]
    text = (codex_home / "config.toml").read_text()
    assert text.startswith(CONFIG)  # every byte of the user's settings, in place
    server = tomllib.loads(text)["mcp_servers"]["lamina"]
    assert server["args"][-1] == "mcp" and Path(server["command"]).is_absolute()
    assert tomllib.loads(text)["mcp_servers"]["github"]["command"] == "gh-mcp"
    # Idempotent: a second install changes no byte of either file.
    before = (files.hooks.read_bytes(), files.config.read_bytes())
    install("user")
    assert (files.hooks.read_bytes(), files.config.read_bytes()) == before
    assert installed_scopes() == {"user": True, "project": False}
    # Codex's own writes after ours (the trust state) stay where they are on a reinstall.
    with files.config.open("a") as handle:
        handle.write('\n[hooks.state."x:stop:0:0"]\ntrusted_hash = "sha256:00"\n')
    after_trust = files.config.read_bytes()
    install("user")
    assert files.config.read_bytes() == after_trust
    # Uninstall: the hooks file and the config as they were, but for Codex's trust table.
    files, removed = uninstall("user")
    assert removed
    assert json.loads(files.hooks.read_text()) == OTHER_HOOKS
    assert (
        files.config.read_text()
        == CONFIG + '\n[hooks.state."x:stop:0:0"]\ntrusted_hash = "sha256:00"\n'
    )
    assert uninstall("user")[1] is False


def test_uninstall_removes_files_that_held_only_lamina(codex_home: Path) -> None:
    install("user")
    _, removed = uninstall("user")
    assert removed and not (codex_home / "hooks.json").exists()
    assert not (codex_home / "config.toml").exists()


def test_a_server_declared_another_way_is_left_alone(codex_home: Path) -> None:
    config = 'mcp_servers = { lamina = { command = "mine" } }\n'
    (codex_home / "config.toml").write_text(config)
    with pytest.raises(ConfigError, match="does not edit"):
        install("user")
    assert (codex_home / "config.toml").read_text() == config
    (codex_home / "config.toml").write_text("model = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        install("user")


def test_project_scope_runs_lamina_from_path(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    files = install("project", directory=project)
    assert files.hooks == project.resolve() / ".codex" / "hooks.json"
    command = ours(json.loads(files.hooks.read_text()), "Stop")[0]["command"]
    assert "LAMINA_HOOK_ORIGIN=codex-project exec lamina hook" in command
    server = tomllib.loads(files.config.read_text())["mcp_servers"]["lamina"]
    assert server == {"command": "lamina", "args": ["mcp"]}
    _, removed = uninstall("project", directory=project)
    assert removed and not (project / ".codex").exists()


def test_codex_user_hooks_stand_aside_only_for_codex_project_hooks(
    tmp_path: Path, codex_home: Path
) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"LAMINA_HOOK_ORIGIN": "codex-user", "CODEX_HOME": str(codex_home)}
    assert stands_aside(project, env) is None
    install("project", directory=project)
    assert stands_aside(project, env) == "the project's Lamina hooks for Codex"
    assert stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "codex-project"}) is None


def sample_rollout(tmp_path: Path) -> Path:
    source = SAMPLES / "codex-0.171.0" / ROLLOUT
    if not source.is_file():
        pytest.skip(f"{source}: the shared Codex samples are not here")
    target = tmp_path / "sessions" / ROLLOUT
    target.parent.mkdir(parents=True)
    shutil.copy(source, target)
    return target


def test_rollouts_are_told_from_claude_code_transcripts(tmp_path: Path) -> None:
    rollout = sample_rollout(tmp_path)
    assert transcript_format(str(rollout)) == "codex"
    renamed = tmp_path / "session.jsonl"
    shutil.copy(rollout, renamed)
    assert transcript_format(str(renamed)) == "codex"
    empty = tmp_path / "sessions" / "rollout-2026-12-05T08-00-00-x.jsonl"
    empty.write_text("")
    assert transcript_format(str(empty)) == "codex"
    assert transcript_format(str(Path(__file__).parents[1] / "examples" / "session.jsonl")) == (
        "claude-code"
    )
    assert last_compaction(str(rollout)) is not None  # its `compacted` record


def test_codex_events_retain_the_rollout_and_recall_it_as_developer_context(
    tmp_path: Path,
) -> None:
    rollout = sample_rollout(tmp_path)
    home, project = tmp_path / "lamina", tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"LAMINA_HOOK_ORIGIN": "codex-user", "CODEX_HOME": str(tmp_path)}
    base = {"session_id": "01a24221-38b7-7202-868e-0659a70eb601", "cwd": str(project),
            "transcript_path": str(rollout), "model": "fake-model"}  # fmt: skip
    assert hook(home, {**base, "hook_event_name": "SessionEnd", "reason": "other"}, **env)
    bank = default_bank(project, resolve_settings({}))
    found = documents(home, bank)
    document = found[base["session_id"]]
    assert document.metadata["agent"] == "codex"
    # Another session of the project asks: the rollout's words come back as additionalContext.
    other = {**base, "session_id": "another", "turn_id": "t1", "transcript_path": ""}
    asked = hook(home, {**other, "hook_event_name": "UserPromptSubmit",
                        "prompt": "what did step3 list in the files?"}, **env)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    output = json.loads(asked.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "UserPromptSubmit"
    assert output["additionalContext"].startswith("<lamina_memories>")


def test_install_codex_cli_json(tmp_path: Path) -> None:
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "ch"), "LAMINA_HOME": str(tmp_path / "l"),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # fmt: skip
    env.pop("LAMINA_CODEX_BIN", None)
    run = subprocess.run([sys.executable, "-m", "lamina", "install", "codex", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["installed"] and report["trusted"] is False
    assert any("/hooks" in line for line in report["advice"])
    assert codex_files("user", env=env).hooks.is_file()
    status = subprocess.run([sys.executable, "-m", "lamina", "status", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert json.loads(status.stdout)["codex_hooks"]["user"]["installed"] is True


PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "codex-lamina"


def test_the_plugin_serves_the_same_hooks_through_the_plugin_launcher() -> None:
    shipped = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert {event: groups[0]["hooks"][0]["timeout"] for event, groups in shipped.items()} == dict(
        HOOK_EVENTS
    )
    assert {c for g in shipped.values() for c in [g[0]["hooks"][0]["command"]]} == {
        '"${PLUGIN_ROOT}/scripts/run-lamina" --origin codex-plugin hook'
    }
    launcher = PLUGIN / "scripts" / "run-lamina"
    assert (
        launcher.read_bytes() == (PLUGIN.parent / "lamina" / "scripts" / "run-lamina").read_bytes()
    )
    manifest = json.loads((PLUGIN / ".codex-plugin" / "plugin.json").read_text())
    assert (PLUGIN / manifest["hooks"]).is_file() and (PLUGIN / manifest["mcpServers"]).is_file()
    market = json.loads(
        (PLUGIN.parents[1] / ".agents" / "plugins" / "marketplace.json").read_text()
    )
    (entry,) = market["plugins"]
    assert f"{entry['name']}@{market['name']}" == "lamina@lamina"
    assert (PLUGIN.parents[1] / entry["source"]["path"]).resolve() == PLUGIN


def test_one_installation_serves_beside_the_codex_plugin(tmp_path: Path, codex_home: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"CODEX_HOME": str(codex_home)}
    plugin = {**env, "LAMINA_HOOK_ORIGIN": "codex-plugin"}
    install("user")
    (codex_home / "plugins" / "cache" / "lamina" / "lamina" / "0.1.0").mkdir(parents=True)
    assert stands_aside(project, plugin) is None
    found = stands_aside(project, {**env, "LAMINA_HOOK_ORIGIN": "codex-user"})
    assert found == "the Lamina plugin for Codex"
    install("project", directory=project)
    assert stands_aside(project, plugin) == "the project's Lamina hooks for Codex"
