"""What every real-CLI end-to-end test sets up: the pinned CLI (found, or a skip that CI turns
into a failure), and a machine of its own: a temporary HOME, a git project, Lamina's data
directory, and an environment that reaches the scripted model server on 127.0.0.1 and nothing
else. Each test_<agent>_e2e.py holds only what is specific to its CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from lamina.config import default_bank, resolve_settings

__all__ = ["RETAIN_WAIT", "AgentMachine", "Cli", "find_cli"]

RETAIN_WAIT = 300.0
"""Seconds a detached retain may take on a fresh, busy machine (model load included)."""
CLOSED = "http://127.0.0.1:9"
"""A proxy nothing listens on: a call that leaves 127.0.0.1 fails at once."""


@dataclass(frozen=True, slots=True)
class Cli:
    """A pinned agent CLI: `LAMINA_<KEY>_BIN` or `command` on PATH; `LAMINA_REQUIRE_<KEY>=1` (CI)
    makes a missing one fail, with `LAMINA_<KEY>_UNAVAILABLE`'s reason when .ci/run could not
    install it."""

    key: str
    label: str
    command: str
    package: str
    version: str


def _unavailable(cli: Cli, reason: str) -> NoReturn:
    if os.environ.get(f"LAMINA_REQUIRE_{cli.key}") == "1":
        pytest.fail(f"the {cli.label} is required here (LAMINA_REQUIRE_{cli.key}=1): {reason}")
    pytest.skip(f"{reason} (set LAMINA_{cli.key}_BIN, or install {cli.package})")


def find_cli(cli: Cli) -> str:
    """The CLI's path, checked to be the pinned version (`--version`)."""
    if os.environ.get(f"LAMINA_{cli.key}_UNAVAILABLE"):
        _unavailable(cli, os.environ[f"LAMINA_{cli.key}_UNAVAILABLE"])
    found = os.environ.get(f"LAMINA_{cli.key}_BIN") or shutil.which(cli.command)
    if not found or not Path(found).exists():
        _unavailable(cli, f"no {cli.label} found")
    try:  # Copilot's first run unpacks its package: up to a minute or two on a busy machine
        version = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 timeout=120, stdin=subprocess.DEVNULL).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(cli, f"{found} --version failed: {exc}")
    # "0.61.0", "codex-cli 0.171.0", "2.1.328 (Claude Code)", "GitHub Copilot CLI 1.0.102."
    # (and an update hint on the next line).
    first = (version.splitlines() or [""])[0].strip()
    if cli.version not in first.rstrip(".").split():
        _unavailable(cli, f"{found} is {first!r}, not {cli.label} {cli.version}")
    return found


class AgentMachine:
    """A fresh HOME, a git project (`inkwell`) and Lamina's data directory under `tmp`; `env`
    runs the CLI offline (every proxy closed but for 127.0.0.1) with this environment's
    `lamina` on PATH, as after `pipx install`. Subclasses add their CLI's own variables."""

    def __init__(self, tmp: Path, cli: str, path: str = "/usr/local/bin:/usr/bin:/bin") -> None:
        self.cli = cli
        self.home = tmp / "home"
        self.project = tmp / "inkwell"
        self.lamina_home = tmp / "lamina"
        for directory in (self.home, self.project):
            directory.mkdir(parents=True, exist_ok=True)
        if shutil.which("git"):
            subprocess.run(["git", "init", "-q", str(self.project)], check=True, timeout=60)
        else:
            (self.project / ".git").mkdir()
        self.env = {
            "PATH": f"{Path(sys.executable).parent}:{path}",
            "HOME": str(self.home),
            "LAMINA_HOME": str(self.lamina_home),
            **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), CLOSED),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        self.bank = default_bank(self.project, resolve_settings({}))

    def lamina(self, *args: str, stdin: str | None = None, **env: str) -> Any:
        """`lamina ARGS` in the project, with the machine's environment (and `env`)."""
        return subprocess.run(
            [sys.executable, "-m", "lamina", *args], input=stdin,
            capture_output=True, text=True, env={**self.env, **env}, cwd=self.project, timeout=120,
        )  # fmt: skip

    def run(self, *args: str, limit: int = 180) -> subprocess.CompletedProcess[str]:
        """The CLI with `args` in the project, stdin closed, under a time limit; it must exit 0."""
        result = subprocess.run(
            ["timeout", "-k", "5", str(limit), self.cli, *args],
            capture_output=True, text=True, env=self.env, cwd=self.project,
            stdin=subprocess.DEVNULL, timeout=limit + 30,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:] or result.stdout[-3000:]
        return result

    def hooks_log(self) -> str:
        path = self.lamina_home / "logs" / "hooks.log"
        return path.read_text() if path.exists() else "(no hook log)"

    def documents(self) -> list[dict[str, Any]]:
        listed = self.lamina("documents", "--bank", self.bank, "--json")
        return list(json.loads(listed.stdout)["documents"]) if listed.returncode == 0 else []

    def wait_for_document(self, session: str) -> float:
        """Seconds until `session` is a document of the project's bank (bounded)."""
        started = time.monotonic()
        while time.monotonic() - started < RETAIN_WAIT:
            if any(d["id"] == session for d in self.documents()):
                return round(time.monotonic() - started, 2)
            time.sleep(0.5)
        tail = self.hooks_log()[-3000:]
        pytest.fail(f"session {session} not retained within {RETAIN_WAIT:.0f}s; hook log:\n{tail}")
