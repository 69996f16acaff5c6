"""`lamina mcp` on stdio answers `initialize` before the MCP SDK is even imported.

Claude Code abandons an MCP server that has not answered `initialize` within about 3 s in `-p`
mode, and importing the SDK alone takes from 0.4 s to well over a second on a busy machine.
So the stdio server starts as a small relay (standard library only): it starts the real server
(`lamina mcp` again, marked by LAMINA_MCP_DIRECT) at once, answers the client's `initialize`
itself with what that server would answer, and then passes every line both ways, dropping the
server's own answer to the `initialize` it forwarded, so the session state on both sides is
the same as without the relay. Requests after `initialize` wait only as long as the server
takes to start; `tests/test_mcp_stdio.py` checks the early answer matches the SDK's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from .. import __version__

__all__ = [
    "DIRECT_VARIABLE",
    "HANDSHAKE_VERSIONS",
    "INSTRUCTIONS",
    "initialize_result",
    "is_stdio_mcp",
    "relay",
    "sdk_missing",
]

DIRECT_VARIABLE = "LAMINA_MCP_DIRECT"

INSTRUCTIONS = """Lamina keeps a long-term memory of conversations. Call `recall` with a \
question to get the most relevant memories (with their dates and sources) before answering \
something earlier sessions may have settled; call `retain_text` to remember a note or a \
decision, and `retain_transcript` to remember a whole session file."""

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol revisions the SDK negotiates through `initialize` (a test pins them to it)."""

CAPABILITIES: Mapping[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}

_ROOT_OPTIONS = ("--home", "--database-url")


def is_stdio_mcp(args: Sequence[str]) -> bool:
    """Whether the command line is `lamina [root options] mcp [options]` on stdio."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _ROOT_OPTIONS else 1
    if index >= len(args) or args[index] != "mcp":
        return False
    rest = args[index + 1 :]
    if any(a in ("-h", "--help") for a in rest):
        return False
    for at, arg in enumerate(rest):
        value = arg.split("=", 1)[1] if arg.startswith("--transport=") else None
        if arg == "--transport" and at + 1 < len(rest):
            value = rest[at + 1]
        if value is not None and value != "stdio":
            return False
    return True


def initialize_result(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the SDK's server answers to `initialize` with these params."""
    requested = (params or {}).get("protocolVersion")
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": {key: dict(value) for key, value in CAPABILITIES.items()},
        "instructions": INSTRUCTIONS,
        "protocolVersion": version,
        "serverInfo": {"name": "lamina", "version": __version__},
    }


def _write(stream: IO[bytes], line: bytes) -> None:
    stream.write(line if line.endswith(b"\n") else line + b"\n")
    stream.flush()


def _early_answer(line: bytes) -> tuple[bytes | None, Any]:
    """The answer to an `initialize` request line and its id (None when it is not one)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None, None
    if "id" not in message:
        return None, None
    result = initialize_result(message.get("params"))
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    return json.dumps(answer, separators=(",", ":")).encode(), message["id"]


def _is_answer_to(line: bytes, ident: Any) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(message, dict)
        and "method" not in message
        and message.get("id") == ident
        and ("result" in message or "error" in message)
    )


MISSING_SDK = "error: `lamina mcp` needs the `mcp` extra: pip install 'lamina[mcp]'"
"""What the relay says, on stderr, when the MCP SDK is not installed."""


def sdk_missing() -> bool:
    """Whether the MCP SDK cannot be found (looked up, not imported: that takes a second)."""
    import importlib.util

    try:
        return importlib.util.find_spec("mcp") is None
    except (ImportError, ValueError):
        return True


def relay(args: Sequence[str]) -> int:
    """Serve `lamina mcp` on stdio through the relay; returns the exit code. Without the MCP
    SDK it says so in one line and returns 2 before reading a request: a client is never told
    the server started when it cannot."""
    if sdk_missing():
        sys.stderr.write(MISSING_SDK + "\n")
        return 2
    env = {**os.environ, DIRECT_VARIABLE: "1"}
    # `-P`: the working directory (the user's project, which names the default bank) stays
    # off sys.path, so a `lamina` package shipped by the project is never imported.
    child = subprocess.Popen(
        [sys.executable, "-P", "-m", "lamina", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    to_child, from_child = child.stdin, child.stdout
    out = sys.stdout.buffer
    writing = threading.Lock()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: child.send_signal(number))
    dropped: dict[str, Any] = {}

    def inbound() -> None:
        source = sys.stdin.buffer
        try:
            first = True
            for line in iter(source.readline, b""):
                if first:
                    first = False
                    answer, ident = _early_answer(line)
                    if answer is not None:
                        dropped["id"] = ident
                        with writing:
                            _write(out, answer)
                _write(to_child, line)
        except (BrokenPipeError, OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                to_child.close()

    reader = threading.Thread(target=inbound, daemon=True)
    reader.start()
    try:
        for line in iter(from_child.readline, b""):
            if "id" in dropped and _is_answer_to(line, dropped["id"]):
                del dropped["id"]
                continue
            with writing:
                _write(out, line)
    except (BrokenPipeError, OSError):
        child.terminate()
    return child.wait()
