"""Managing a warm server from outside it: whether one runs, starting one (waiting for it
from the command line, detached from the hook), stopping one, and retiring a server of another
Lamina version. The server itself is lamina.integrations.claude_code.warm; this module never
imports it, so the hook can start a server without loading the code that serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import InputError
from .warm_client import SOCKET_PATH_LIMIT, WarmUnavailable, ask, socket_path

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "LOCK_WAIT",
    "check_socket_path",
    "ensure_started",
    "start_detached",
    "start_server",
    "stop_server",
    "warm_status",
]

DEFAULT_IDLE_TIMEOUT = 1800.0
"""Seconds without a recall after which a server exits."""
START_TIMEOUT = 60.0
"""How long `start_server` waits for a new server to answer (it loads the model first)."""
LOCK_WAIT = 5.0
"""How long a new server waits for the data directory's lock (a server being replaced is
still shutting down)."""


def check_socket_path(home: Path) -> Path:
    path = socket_path(home)
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_LIMIT:
        raise InputError(
            f"{path}: too long for a unix socket ({size} bytes, at most {SOCKET_PATH_LIMIT}); "
            "use a shorter data directory (--home) for the warm path"
        )
    return path


def warm_status(home: Path, timeout: float = 2.0) -> dict[str, Any]:
    """`running` and what the server says of itself, or why none answers (`reason`)."""
    home = home.resolve()
    try:
        reply = ask(home, {"op": "ping"}, timeout=timeout, version=__version__)
    except WarmUnavailable as exc:
        status: dict[str, Any] = {
            "running": False,
            "socket": str(socket_path(home)),
            "reason": exc.reason,
        }
        if exc.other_version_pid is not None:
            status["other_version_pid"] = exc.other_version_pid
        return status
    reply.pop("ok", None)
    return {"running": True, "socket": str(socket_path(home)), **reply}


def start_server(home: Path, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> dict[str, Any]:
    """Start a detached server for `home` unless one answers; wait (bounded) until it does."""
    home = home.resolve()
    check_socket_path(home)
    status = warm_status(home)
    if status["running"]:
        return {**status, "started": False}
    _retire(status)
    process = _spawn(home, idle_timeout)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise InputError(
                f"the warm server exited at once (code {process.returncode}); "
                f"see {home / 'logs' / 'hooks.log'}"
            )
        status = warm_status(home, timeout=1.0)
        if status["running"]:
            return {**status, "started": True}
        time.sleep(0.05)
    raise InputError(f"the warm server did not answer within {START_TIMEOUT:g}s")


def ensure_started(home: Path, idle_timeout: float) -> str:
    """For SessionStart: start a server without waiting for it; one line for the hook log."""
    try:
        check_socket_path(home.resolve())
    except InputError as exc:
        return f"warm path off: {exc}"
    status = warm_status(home, timeout=0.5)
    if status["running"]:
        return f"warm server {status.get('pid')} already running"
    retired = _retire(status, wait=0.0)
    process = _spawn(home.resolve(), idle_timeout)
    replaced = f", replacing {retired} of another version" if retired else ""
    return f"warm server starting (pid {process.pid}{replaced})"


def start_detached(home: Path, idle_timeout: float) -> int | None:
    """For a prompt hook that found no server: start one for the next prompt without waiting
    or asking again; its pid, or None when the socket path cannot work."""
    try:
        check_socket_path(home.resolve())
    except InputError:
        return None
    return _spawn(home.resolve(), idle_timeout).pid


def _retire(status: dict[str, Any], wait: float = LOCK_WAIT) -> int | None:
    """Terminate a server of another Lamina version (left running by an upgrade: it cannot
    serve this version's hooks, and would hold the data directory until idle). Waits up to
    `wait` seconds for it to go; returns its pid, or None when there was none."""
    pid = status.get("other_version_pid")
    if not isinstance(pid, int):
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return None
    deadline = time.monotonic() + wait
    path = Path(status["socket"])
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return pid


def _spawn(home: Path, idle_timeout: float) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-P", "-m", "lamina", "--home", str(home), "warm", "serve",
               "--idle-timeout", f"{idle_timeout:g}"]  # fmt: skip
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        cwd="/",
    )


def stop_server(home: Path, timeout: float = 10.0) -> dict[str, Any]:
    """Ask the server to stop and wait (bounded) until its socket is gone."""
    home = home.resolve()
    try:
        reply = ask(home, {"op": "stop"}, timeout=timeout, version=__version__)
    except WarmUnavailable as exc:
        status = {"socket": str(socket_path(home)), "other_version_pid": exc.other_version_pid}
        retired = _retire(status, wait=timeout)
        if retired is not None:
            return {"stopped": not socket_path(home).exists(), "pid": retired}
        return {"stopped": False, "reason": exc.reason}
    path = socket_path(home)
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"stopped": not path.exists(), "pid": reply.get("pid")}
