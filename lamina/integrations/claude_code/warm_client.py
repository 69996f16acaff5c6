"""The hook's side of the warm path: ask the warm server of a data directory over its unix socket.

Only the standard library is imported here, so a hook answered by the warm server never loads
numpy, the model or the store. The protocol is one JSON object per line: the client sends one
request line, the server answers one line and closes the connection.

Every failure is a `WarmUnavailable` with a short reason (no server, a stale socket file, a
socket path too long for AF_UNIX, a server of another version, no answer in time, a bad answer);
the hook then takes the cold path. A missing or stale socket costs well under a millisecond.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_MESSAGE",
    "PROTOCOL",
    "SOCKET_PATH_LIMIT",
    "WarmUnavailable",
    "ask",
    "run_dir",
    "socket_path",
]

PROTOCOL = 1
"""Bumped whenever a request or an answer changes shape."""

MAX_MESSAGE = 4 * 1024 * 1024
"""The longest request or answer line, in bytes."""

SOCKET_PATH_LIMIT = 107
"""AF_UNIX paths hold 108 bytes on Linux, the terminating NUL included (104 on macOS)."""


class WarmUnavailable(Exception):
    """The warm server could not answer; `reason` is one short line for the hook log.
    `other_version_pid` is the pid of a server that answered but runs another Lamina version
    or protocol (left running by an upgrade), as that server said."""

    def __init__(self, reason: str, other_version_pid: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.other_version_pid = other_version_pid


def run_dir(home: Path) -> Path:
    """Where the warm server keeps its socket, lock and pid (mode 0700)."""
    return home / "run"


def socket_path(home: Path) -> Path:
    return run_dir(home) / "warm.sock"


def ask(home: Path, request: dict[str, Any], timeout: float, version: str) -> dict[str, Any]:
    """Send one request to the warm server of `home` and return its answer (a JSON object with
    `"ok": true`), if the server runs lamina `version` and this protocol. Raises
    WarmUnavailable; waits at most `timeout` seconds in all."""
    path = socket_path(home)
    encoded = os.fsencode(path)
    if len(encoded) > SOCKET_PATH_LIMIT:
        raise WarmUnavailable(
            f"socket path too long for AF_UNIX ({len(encoded)} bytes > {SOCKET_PATH_LIMIT})"
        )
    if not path.exists():
        raise WarmUnavailable("no warm server")
    body = {
        "v": PROTOCOL,
        "version": version,
        "home": str(home.resolve()),
        **request,
    }
    line = json.dumps(body, ensure_ascii=False).encode() + b"\n"
    if len(line) > MAX_MESSAGE:
        raise WarmUnavailable("request too large for the warm server")
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.001, timeout))
        try:
            sock.connect(encoded)
        except (ConnectionRefusedError, FileNotFoundError):
            raise WarmUnavailable("stale socket file (no warm server listening)") from None
        except TimeoutError:
            raise WarmUnavailable("warm server did not accept in time") from None
        except OSError as exc:
            raise WarmUnavailable(f"cannot connect to the warm server: {exc}") from None
        try:
            sock.sendall(line)
            answer = read_line(sock, deadline)
        except EOFError:
            raise WarmUnavailable("warm server closed the connection without an answer") from None
        except ValueError:
            raise WarmUnavailable("warm server answer too large") from None
        except TimeoutError:
            raise WarmUnavailable(f"warm server did not answer within {timeout:.2f}s") from None
        except (ConnectionResetError, BrokenPipeError):
            # Accepted by a listener that was going away (a server killed as we connected).
            raise WarmUnavailable("stale socket file (the warm server went away)") from None
        except OSError as exc:
            raise WarmUnavailable(f"warm server connection failed: {exc}") from None
    finally:
        sock.close()
    try:
        data = json.loads(answer)
    except ValueError:
        raise WarmUnavailable("warm server sent an answer that is not JSON") from None
    if not isinstance(data, dict):
        raise WarmUnavailable("warm server sent an answer that is not a JSON object")
    if data.get("v") != PROTOCOL or data.get("version") != body["version"]:
        pid = data.get("pid")
        raise WarmUnavailable(
            f"warm server speaks protocol {data.get('v')!r} of lamina {data.get('version')!r}, "
            f"not {PROTOCOL} of {body['version']}",
            other_version_pid=pid if isinstance(pid, int) and pid > 1 else None,
        )
    if data.get("ok") is not True:
        raise WarmUnavailable(f"warm server refused: {str(data.get('error'))[:300]}")
    return data


def read_line(sock: socket.socket, deadline: float | None = None) -> bytes:
    """One newline-ended message (without its newline), the protocol's unit both ways.
    Raises EOFError when the peer closes first, ValueError past MAX_MESSAGE bytes and
    TimeoutError past `deadline` (a time.monotonic() instant; None: the socket's timeout)."""
    parts: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("the message ended before its newline")
        end = chunk.find(b"\n")
        if end >= 0:
            parts.append(chunk[:end])
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_MESSAGE:
            raise ValueError(f"the message is longer than {MAX_MESSAGE} bytes")
