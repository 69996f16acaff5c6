"""Another local user: the data directory is for its owner only, whoever creates it, and
what Lamina trusts there (the warm server's socket, the cached model) is checked for its owner
and mode before use (design invariants 9 and 13)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..conftest import EXAMPLE

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj", "LAMINA_HOOK_TIME_LIMIT": "30"})
    return env


def hook(home: Path, payload: dict[str, str]) -> None:
    ran = subprocess.run([sys.executable, "-m", "lamina", "hook"], input=json.dumps(payload),
                         env=environment(home), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def exposed(top: Path) -> list[str]:
    """Every folder under `top` (itself included) not 0700 and every file not 0600."""
    found = []
    for path in [top, *sorted(top.rglob("*"))]:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) and mode != wanted:
            found.append(f"{path} {mode:04o}")
    return found


def wait_for(check: Callable[[], bool], seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_a_data_directory_made_by_the_hook_is_for_its_owner_only(tmp_path: Path) -> None:
    top = tmp_path / "data"  # missing too: made by the hook as well
    home = top / "lamina"
    event = {"session_id": "s-1", "cwd": str(tmp_path), "transcript_path": str(EXAMPLE)}
    with umask(0o022):
        hook(home, {**event, "hook_event_name": "SessionStart"})
        hook(home, {**event, "hook_event_name": "UserPromptSubmit", "prompt": "which database?"})
        hook(home, {**event, "hook_event_name": "Stop"})  # a detached worker retains
        log = home / "logs" / "hooks.log"
        assert wait_for(lambda: " new records" in log.read_text()), log.read_text()
    assert (home / "lamina.db").exists() and (home / "sessions").is_dir()
    assert (home / "locks").is_dir() and (home / "cache").is_dir()
    assert exposed(top) == []


def test_a_data_directory_made_by_warm_start_is_for_its_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "data" / "lamina"
    run = [sys.executable, "-m", "lamina", "--home", str(home), "warm"]
    with umask(0o022):
        started = subprocess.run([*run, "start", "--json", "--idle-timeout", "60"],
                                 env=environment(home), capture_output=True, text=True,
                                 timeout=180)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        socket_file = home / "run" / "warm.sock"
        assert stat.S_IMODE(socket_file.lstat().st_mode) == 0o600
        assert exposed(tmp_path / "data") == []
    finally:
        stopped = subprocess.run([*run, "stop"], env=environment(home), capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
        if stopped.returncode != 0:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((home / "run" / "warm.pid").read_text()), signal.SIGKILL)
    assert exposed(tmp_path / "data") == []
