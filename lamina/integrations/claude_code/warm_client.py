"""The hook's side of the warm path: ask the warm server of a data directory over its unix socket.

Only built-in modules of the standard library are imported here (`_socket` and `_json`, the
C halves of socket and json, whose Python halves and what they import, re and enum, would
double the CPU time of a warm prompt's process; no pathlib, no typing), so a hook answered by
the warm server loads neither numpy, the model, the store, nor the rest of Lamina.
`lamina hook` calls `answer_hook` first, which finds the data directory, hands the event to
the server (op `hook`: the payload as Claude Code gave it, the variables that choose the bank
and settings, the working directory, how long this process has run) and prints what the
server answers. Anything else (another event, no server, a data directory only
`lamina.config` can find) takes the full hook (lamina.integrations.claude_code.hook), which
asks the server again only when it was not asked here. The protocol is one JSON object per
line: the client sends one request line, the server answers one line and closes the
connection.

Before connecting, the socket and its folder are checked: both this user's, the folder 0700,
the socket not writable by others; otherwise nothing is sent (another user who could place a
socket there would receive the prompts and choose what is injected).

Every failure is a `WarmUnavailable` with a short reason (no server, a stale socket file, a
socket path too long for AF_UNIX, a socket not trusted, a server of another version, no answer
in time, a bad answer); the hook then takes the cold path. A missing or stale socket costs well
under a millisecond.
"""

# os.path, not pathlib: importing pathlib would cost every warm prompt a few ms.
# ruff: noqa: PTH109, PTH118, PTH123

from __future__ import annotations

import _socket
import os
import stat  # imported by os already: costs nothing
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # importing typing and pathlib would cost every warm prompt a few ms
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

__all__ = [
    "FORWARDED_VARIABLES",
    "MAX_MESSAGE",
    "PROMPT_EVENTS",
    "PROTOCOL",
    "SOCKET_PATH_LIMIT",
    "WarmUnavailable",
    "answer_hook",
    "ask",
    "dumps",
    "loads",
    "process_age",
    "run_dir",
    "socket_path",
]

PROTOCOL = 4
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


def _socket_problem(run: str, path: str) -> str | None:
    """Why the socket `path` in the folder `run` is not the user's own warm server (None: it
    is): both owned by this user, the folder 0700 and not a symbolic link, the socket not
    writable by others. Anyone else who could place it would receive the prompts."""
    uid = os.getuid()
    folder, sock = os.lstat(run), os.lstat(path)
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != uid or folder.st_mode & 0o077:
        return f"{run} is not a folder of this user's alone (mode 0700)"
    if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid or sock.st_mode & 0o022:
        return f"{path} is not a socket of this user's that others cannot write"
    return None


def process_age() -> float:
    """Seconds since this process started (Linux: from /proc; elsewhere 0)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def ask(home: Path | str, request: dict[str, Any], timeout: float, version: str) -> dict[str, Any]:
    """Send one request to the warm server of `home` and return its answer (a JSON object with
    `"ok": true`), if the server runs lamina `version` and this protocol. Raises
    WarmUnavailable; waits at most `timeout` seconds in all."""
    base = os.path.realpath(os.fspath(home))
    run = os.path.join(base, "run")
    encoded = os.fsencode(os.path.join(run, "warm.sock"))
    if len(encoded) > SOCKET_PATH_LIMIT:
        raise WarmUnavailable(
            f"socket path too long for AF_UNIX ({len(encoded)} bytes > {SOCKET_PATH_LIMIT})"
        )
    try:
        problem = _socket_problem(run, os.fsdecode(encoded))
    except FileNotFoundError:
        raise WarmUnavailable("no warm server") from None
    except OSError as exc:
        raise WarmUnavailable(f"cannot check the warm server's socket: {exc}") from None
    if problem is not None:  # never sent a prompt: who listens there is not known
        raise WarmUnavailable(f"not trusted: {problem}")
    body = {
        "v": PROTOCOL,
        "version": version,
        "home": base,
        **request,
    }
    line = dumps(body).encode() + b"\n"
    if len(line) > MAX_MESSAGE:
        raise WarmUnavailable("request too large for the warm server")
    deadline = time.monotonic() + timeout
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
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
        data = loads(answer.decode())
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


def read_line(sock: _socket.socket, deadline: float | None = None) -> bytes:
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


# -- JSON with the C half of json only ---------------------------------------------------------


class _Context:
    """What json's C scanner asks of its decoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"{name} is not JSON")


def _make_codec() -> tuple[Callable[[str], str], Callable[[str], object]]:
    try:
        from _json import encode_basestring_ascii, make_scanner
    except ImportError:  # an interpreter without json's C half
        import json

        return json.dumps, json.loads
    scan = make_scanner(_Context())  # type: ignore[arg-type]  # it reads these attributes

    def load(text: str) -> object:
        start = len(text) - len(text.lstrip(" \t\n\r"))  # JSON's whitespace
        try:
            value, end = scan(text, start)
        except StopIteration:
            raise ValueError("not JSON") from None
        if text[end:].strip(" \t\n\r"):
            raise ValueError("not JSON: extra data")
        return value

    return encode_basestring_ascii, load


_quote, _load = _make_codec()


def dumps(value: object) -> str:
    """JSON of dicts (string keys), lists, strings, numbers, booleans and None."""
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value} is not JSON")
        return repr(value) if isinstance(value, float) else str(int(value))
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"JSON keys are strings, not {type(key).__name__}")
            items.append(f"{_quote(key)}:{dumps(item)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} is not JSON")


def loads(text: str) -> object:
    """The value of one JSON document (ValueError when it is not one)."""
    return _load(text)


# -- the hook's warm path ----------------------------------------------------------------------

FORWARDED_VARIABLES = (
    "CLAUDE_PROJECT_DIR",
    "CLAUDE_CONFIG_DIR",
    "COPILOT_HOME",
    "COPILOT_HOOK_DIR",
)
"""Sent with a hook to the server besides every LAMINA_* variable: what chooses the event's
bank, settings, installation and transcript, and the answer's shape (Copilot's) -- nothing
else of the environment leaves this process."""


PROMPT_EVENTS = ("UserPromptSubmit", "BeforeAgent")
"""The prompt events a warm server answers (the others do no recall)."""
RETAIN_EVENTS = ("Stop", "SubagentStop", "PreCompact", "SessionEnd", "AfterAgent")
"""The events whose retain a warm server runs on a thread of its own, by the names every agent
sends (Gemini's AfterAgent is its Stop), instead of a worker process that loads the model, the
tokenizer and the redaction rules again for every turn."""


def answer_hook(stdin: str, home: str | None, version: str) -> tuple[str | None, str]:
    """A prompt or retain event handled by the warm server: (what to print, "") when it
    answered, else (None, why not: "" when the server was not asked). Never raises."""
    try:
        started = time.monotonic() - process_age()
        payload = loads(stdin.strip() or "{}")
        # Gemini's BeforeAgent is its UserPromptSubmit (Copilot sends Claude Code's name).
        if not isinstance(payload, dict) or (
            payload.get("hook_event_name") not in PROMPT_EVENTS + RETAIN_EVENTS
        ):
            return None, ""
        environ = os.environ
        from ...config import resolve_settings  # the same rules as every entry point's

        try:
            settings = resolve_settings(environ, home=home)
        except Exception:  # a broken config file: the full hook reports it
            return None, ""
        limit = settings.hook.time_limit
        forwarded = {
            k: v for k, v in environ.items() if k.startswith("LAMINA_") or k in FORWARDED_VARIABLES
        }
        left = started + limit - 0.05 - time.monotonic()
        request = {
            "op": "hook",
            "database": settings.database_url or "",
            "embedder": settings.embedder or "",
            "payload": stdin,
            "env": forwarded,
            "cwd": os.getcwd(),
            "age": time.monotonic() - started,
        }
        # At most half of the time left, so a server that hangs leaves the cold path the rest.
        wait = max(0.05, left / 2)
        # The server is told how long this process waits: an answer it finishes later was
        # given cold here, and only this process records it.
        request["wait"] = wait
        reply = ask(str(settings.home), request, timeout=wait, version=version)
        output = reply.get("output")
        if not isinstance(output, str):
            raise WarmUnavailable("warm server sent an answer of the wrong shape")
        return output, ""
    except WarmUnavailable as exc:
        return None, exc.reason
    except Exception as exc:  # anything unforeseen: the full hook still answers
        return None, f"warm path failed: {exc!r}"[:300]
