"""A hostile project directory: a repository that ships a `lamina` package of its own must never
have it imported by a Lamina process started there (design invariant 10)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.config import default_bank, project_root, resolve_settings
from lamina.integrations.claude_code import install, warm_control

HOSTILE = "import pathlib\npathlib.Path({marker!r}).write_text('imported from the project')\n"


def hostile_project(tmp_path: Path) -> tuple[Path, Path]:
    """A project holding `lamina/__init__.py` and `lamina/__main__.py` that leave a marker
    file when imported; the project and the marker's path."""
    project = tmp_path / "project"
    package = project / "lamina"
    package.mkdir(parents=True)
    marker = tmp_path / "marker"
    for name in ("__init__.py", "__main__.py"):
        (package / name).write_text(HOSTILE.format(marker=str(marker)))
    return project, marker


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env["LAMINA_HOME"] = str(tmp_path / "home")
    return env


# The installed `lamina` as Claude Code starts it: never from the project (pip's script puts
# its own bin directory first on sys.path, as -P does here).
INSTALLED = [sys.executable, "-P", "-m", "lamina"]


def test_the_mcp_relay_started_in_a_hostile_project_imports_nothing_from_it(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    project, marker = hostile_project(tmp_path)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    lines = "".join(json.dumps(m) + "\n" for m in (request, initialized, listed))
    process = subprocess.Popen([*INSTALLED, "mcp"], cwd=project, env=environment(tmp_path),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines)
    process.stdin.flush()
    answers: list[dict[str, Any]] = []
    for line in process.stdout:  # the server behind the relay answers tools/list: it ran
        answers.append(json.loads(line))
        if answers[-1].get("id") == 2:
            break
    process.stdin.close()
    process.wait(timeout=60)
    assert [a.get("id") for a in answers] == [1, 2]
    assert "tools" in answers[1]["result"]
    assert not marker.exists()


def test_the_warm_server_started_from_a_hostile_project_imports_nothing_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, marker = hostile_project(tmp_path)
    started: list[list[str]] = []

    class Recorded:
        pid = 0

        def __init__(self, command: list[str], **options: Any) -> None:
            started.append(command)
            assert options.get("cwd") == "/"

    monkeypatch.setattr(warm_control.subprocess, "Popen", Recorded)
    warm_control.start_detached(tmp_path / "home", 5.0)
    (command,) = started
    assert command[:4] == [sys.executable, "-P", "-m", "lamina"]
    # A real server, started from the project, answers; nothing of the project ran.
    monkeypatch.undo()
    home = ["--home", str(tmp_path / "home")]
    ran = subprocess.run([*INSTALLED, *home, "warm", "start", "--idle-timeout", "30"],
                         cwd=project, env=environment(tmp_path), capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    stopped = subprocess.run([*INSTALLED, *home, "warm", "stop"], env=environment(tmp_path),
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.returncode == 0 and stopped.returncode == 0, ran.stderr + stopped.stderr
    assert not marker.exists()


def test_the_installed_hook_command_imports_nothing_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `lamina` on PATH the user-scope hook runs this Python at Lamina's module."""
    project, marker = hostile_project(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    command = install.hook_command(tmp_path / "home")
    assert shlex.split(command)[1:4] == [sys.executable, "-P", "-m"]
    payload = {"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(project)}
    ran = subprocess.run(["sh", "-c", command], input=json.dumps(payload), cwd=project,
                         env=environment(tmp_path), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "SessionStart" in (tmp_path / "home" / "logs" / "hooks.log").read_text()
    assert not marker.exists()


def test_the_hook_command_never_names_a_lamina_relative_to_the_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PATH holding `.` finds the project's own `lamina`: such a find is not used."""
    monkeypatch.setattr(shutil, "which", lambda name: "./lamina")
    assert shlex.split(install.hook_command())[1:4] == [sys.executable, "-P", "-m"]


def test_the_plugin_launcher_runs_no_lamina_of_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    planted = project / "lamina"
    planted.write_text('#!/bin/sh\necho "the project\'s lamina $*"\n')
    planted.chmod(0o755)
    launcher = Path(__file__).resolve().parents[2] / "plugins" / "lamina" / "scripts" / "run-lamina"
    for env in ({"PATH": ".:/usr/bin:/bin"}, {"PATH": "/usr/bin:/bin", "LAMINA_BIN": "lamina"}):
        ran = subprocess.run(["sh", str(launcher), "mcp"], cwd=project, capture_output=True,
                             text=True, env={"HOME": str(tmp_path), **env}, timeout=30)  # fmt: skip
        assert "the project's lamina" not in ran.stdout, env
        assert ran.returncode == 1 and "pipx install" in ran.stderr


# -- a `.git` pointer ----------------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A project of the user's with a real worktree, `victim-feature`, beside it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    main = tmp_path / "victim"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x",
        cwd=main)  # fmt: skip
    git("worktree", "add", "-q", str(tmp_path / "victim-feature"), cwd=main)
    return main


NO_CONFIG = {"LAMINA_CONFIG": "/nonexistent/lamina.toml"}


def test_a_real_worktree_shares_its_repositorys_bank(victim: Path) -> None:
    worktree = victim.with_name("victim-feature")
    assert project_root(worktree / ".") == victim.resolve()
    assert default_bank(worktree, resolve_settings(NO_CONFIG)) == default_bank(
        victim, resolve_settings(NO_CONFIG)
    )


def test_a_planted_git_pointer_does_not_reach_another_projects_bank(
    victim: Path, tmp_path: Path
) -> None:
    hostile = tmp_path / "downloaded"
    hostile.mkdir()
    own = default_bank(hostile, resolve_settings(NO_CONFIG))
    # A git directory of its own whose commondir names the victim's repository.
    (hostile / ".git").write_text("gitdir: .fake\n")
    (hostile / ".fake").mkdir()
    (hostile / ".fake" / "commondir").write_text(f"{victim / '.git'}\n")
    assert default_bank(hostile, resolve_settings(NO_CONFIG)) == own
    # The victim's real worktree entry, which names another worktree.
    (hostile / ".git").write_text(f"gitdir: {victim / '.git' / 'worktrees' / 'victim-feature'}\n")
    assert default_bank(hostile, resolve_settings(NO_CONFIG)) == own
    (hostile / "sub").mkdir()
    assert project_root(hostile / "sub") == hostile.resolve()


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give the repository to another user")
def test_a_worktree_of_another_users_repository_keeps_its_own_bank(victim: Path) -> None:
    worktree = victim.with_name("victim-feature")
    os.chown(victim / ".git", 65534, 65534)
    assert project_root(worktree) == worktree.resolve()
