"""What a Claude Code user notices of the hooks: the project's bank whatever the agent `cd`s to,
subagents retained on their own, the configured database on every event, memories that fit
Claude Code's limit, one installation injecting, and failures shown once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lamina.config import default_bank, resolve_settings
from lamina.integrations.claude_code.contract import MAX_CONTEXT_CHARS, Notices
from lamina.integrations.claude_code.install import install
from lamina.integrations.claude_code.project import hook_bank
from lamina.store.sqlite import SQLiteStore

from .conftest import CC, EXAMPLE

SESSION = "0b7ab87f-8198-4377-8129-e7f7474617ab"


def hook(home: Path, payload: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "LAMINA_HOME": str(home), **env}
    return subprocess.run(
        [sys.executable, "-m", "lamina", "hook"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def documents(
    home: Path, bank: str, *, at_least: int = 1, timeout: float = 180.0
) -> dict[str, Any]:
    """The bank's documents once `at_least` are there (the detached worker is waited for)."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        if (home / "lamina.db").exists():
            store = SQLiteStore(home / "lamina.db")
            try:
                found = {d.id: d for d in store.list_documents(bank)}
            finally:
                store.close()
            if len(found) >= at_least:
                return found
        time.sleep(0.2)
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "inkwell"
    (root / ".git").mkdir(parents=True)
    return root


def test_the_bank_is_the_projects_even_after_the_agent_cds_away(
    tmp_path: Path, project: Path
) -> None:
    home = tmp_path / "home"
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    stop = {"hook_event_name": "Stop", "session_id": SESSION,
            "transcript_path": str(EXAMPLE), "cwd": str(elsewhere)}  # fmt: skip
    result = hook(home, stop, CLAUDE_PROJECT_DIR=str(project))
    assert result.returncode == 0, result.stderr
    assert SESSION in documents(home, default_bank(project, resolve_settings()))
    assert not documents(home, default_bank(elsewhere, resolve_settings()), timeout=0)


def test_without_a_project_dir_a_session_keeps_its_first_directory(
    tmp_path: Path, project: Path
) -> None:
    home = tmp_path / "home"
    env: dict[str, str] = {}
    first = hook_bank(
        {"session_id": "s1", "cwd": str(project / "src")}, resolve_settings(env, home=home), env
    )
    later = hook_bank({"session_id": "s1", "cwd": "/tmp"}, resolve_settings(env, home=home), env)
    assert first == later == default_bank(project, resolve_settings(env))
    assert hook_bank(
        {"session_id": "s2", "cwd": "/tmp"}, resolve_settings(env, home=home), env
    ) == default_bank("/tmp", resolve_settings(env))


def test_subagent_stop_retains_the_subagents_own_transcript(tmp_path: Path, cc: CC) -> None:
    home = tmp_path / "home"
    cc.user("Find where the rate limiter is configured.", isSidechain=True)
    cc.assistant(
        "The limiter lives in gateway/limits.toml: 120 requests a minute.", isSidechain=True
    )
    agent = cc.write(tmp_path / "agent-a1b2c3.jsonl")
    payload = {"hook_event_name": "SubagentStop", "session_id": SESSION,
               "transcript_path": str(EXAMPLE), "agent_id": "a1b2c3",
               "agent_transcript_path": str(agent), "cwd": str(tmp_path)}  # fmt: skip
    assert hook(home, payload, LAMINA_BANK="proj").returncode == 0
    found = documents(home, "proj")
    assert list(found) == [f"{SESSION}:agent-a1b2c3"]
    document = found[f"{SESSION}:agent-a1b2c3"]
    assert document.metadata["parent_session"] == SESSION and "subagent" in document.tags
    assert document.source == str(agent)


def test_session_start_prepares_the_configured_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    other = tmp_path / "elsewhere.db"
    start = {"hook_event_name": "SessionStart", "session_id": "s"}
    result = hook(home, start, LAMINA_DATABASE_URL=f"sqlite:///{other}")
    assert result.returncode == 0 and result.stdout == "", result.stderr
    assert other.exists() and not (home / "lamina.db").exists()
    # The config file's database_url the same way.
    config = tmp_path / "config.toml"
    third = tmp_path / "from-config.db"
    config.write_text(f'database_url = "sqlite:///{third}"\n')
    assert hook(home, start, LAMINA_CONFIG=str(config)).returncode == 0
    assert third.exists() and not (home / "lamina.db").exists()


def test_memories_stay_under_claude_codes_limit_whatever_the_budget(tmp_path: Path, cc: CC) -> None:
    home = tmp_path / "home"
    for n in range(30):
        detail = f"step {n}: the deploy pipeline runs migrations, then smoke tests. " * 8
        cc.user(f"How does deploy stage {n} work? {detail}")
        cc.assistant(f"Deploy stage {n} is described above. {detail}")
    transcript = cc.write(tmp_path / "long.jsonl")
    stop = {"hook_event_name": "Stop", "session_id": "old", "transcript_path": str(transcript)}
    assert hook(home, stop, LAMINA_BANK="proj").returncode == 0
    assert documents(home, "proj")
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "new",
              "prompt": "how does the deploy pipeline run migrations?"}  # fmt: skip
    result = hook(home, prompt, LAMINA_BANK="proj", LAMINA_HOOK_BUDGET="6000",
                  LAMINA_HOOK_TIME_LIMIT="60")  # fmt: skip
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(context) <= MAX_CONTEXT_CHARS < 10_000
    assert context.startswith("<lamina_memories>") and context.endswith("</lamina_memories>")
    assert context.count("- [") >= 2  # whole memories, the best of them, not one cut short


def test_a_failure_the_user_can_fix_is_shown_once_per_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = tmp_path / "config.toml"
    config.write_text("[hook\nturns = 3\n")
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "what now?"}
    first = hook(home, prompt, LAMINA_CONFIG=str(config))
    assert first.returncode == 0
    message = json.loads(first.stdout)["systemMessage"]
    assert "Lamina failed" in message and str(config) in message and "not valid TOML" in message
    again = hook(home, prompt, LAMINA_CONFIG=str(config))
    assert again.returncode == 0 and again.stdout == ""
    other = hook(home, {**prompt, "session_id": "s2"}, LAMINA_CONFIG=str(config))
    assert "systemMessage" in json.loads(other.stdout)


def test_a_retain_failure_reaches_the_user_at_the_next_event(tmp_path: Path) -> None:
    notices = Notices(tmp_path)
    notices.post("s1", "Lamina could not retain: database is locked")
    assert notices.take("s1") == "Lamina could not retain: database is locked"
    assert notices.take("s1") is None
    notices.post("s1", "Lamina could not retain: database is locked")
    assert notices.take("s1") is None  # already shown in this session


def enable_plugin(config_dir: Path) -> None:
    plugins = config_dir / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    installed = {"version": 2, "plugins": {"lamina@lamina": [{"scope": "user"}]}}
    (plugins / "installed_plugins.json").write_text(json.dumps(installed))
    (config_dir / "settings.json").write_text(
        json.dumps({"enabledPlugins": {"lamina@lamina": True}})
    )


def test_with_the_plugin_enabled_settings_hooks_stand_aside(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    stop = {"hook_event_name": "Stop", "session_id": SESSION, "transcript_path": str(EXAMPLE)}
    assert hook(home, stop, LAMINA_BANK="proj").returncode == 0
    assert documents(home, "proj")
    enable_plugin(config_dir)
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "new",
              "prompt": "which environment variable holds the database path?"}  # fmt: skip
    limit = {"LAMINA_BANK": "proj", "LAMINA_HOOK_TIME_LIMIT": "60"}
    from_settings = hook(home, prompt, **limit, LAMINA_HOOK_ORIGIN="user")
    assert from_settings.returncode == 0 and from_settings.stdout == ""
    legacy = hook(home, prompt, **limit)  # installed before hooks said where they came from
    assert legacy.stdout == ""
    from_plugin = hook(home, prompt, **limit, LAMINA_HOOK_ORIGIN="plugin")
    assert (
        "<lamina_memories>"
        in json.loads(from_plugin.stdout)["hookSpecificOutput"]["additionalContext"]
    )
    assert (
        "skipped: the Lamina plugin serves this session"
        in (home / "logs" / "hooks.log").read_text()
    )


def test_user_hooks_stand_aside_for_the_projects(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    install("project", directory=project)
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "new", "prompt": "hello there"}
    env = {"CLAUDE_PROJECT_DIR": str(project), "LAMINA_BANK": "proj"}
    hook(home, prompt, **env, LAMINA_HOOK_ORIGIN="user")
    hook(home, prompt, **env, LAMINA_HOOK_ORIGIN="project")
    log = (home / "logs" / "hooks.log").read_text().splitlines()
    assert sum("skipped: the project's Lamina hooks" in line for line in log) == 1
    assert sum("injected" in line or "no memories" in line for line in log) == 1


def test_status_sees_every_installation_and_warns_about_overlaps(
    tmp_path: Path, project: Path
) -> None:
    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    enable_plugin(config_dir)
    install("user", command="/opt/lamina/bin/lamina hook")
    servers = {"mcpServers": {"lamina": {"type": "stdio", "command": "lamina", "args": ["mcp"]}}}
    (config_dir / ".claude.json").write_text(json.dumps(servers))
    result = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(tmp_path / "home"), "status", "--json"],
        capture_output=True, text=True, cwd=project, timeout=60,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert report["plugin"] == {"installed": True, "enabled": True, "id": "lamina@lamina"}
    assert report["hooks"]["user"]["installed"] is True
    assert {(s["name"], s["scope"]) for s in report["mcp_servers"]} == {
        ("lamina", "user"),
        ("plugin:lamina:lamina", "plugin"),
    }
    warnings = " ".join(report["warnings"])
    assert "plugin and hooks in user settings" in warnings
    assert "lamina uninstall claude-code --user" in warnings
    assert "2 Lamina MCP servers" in warnings
    text = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(tmp_path / "home"), "status"],
        capture_output=True, text=True, cwd=project, timeout=60,
    ).stdout  # fmt: skip
    assert "plugin      lamina@lamina: enabled" in text and "warning" in text
