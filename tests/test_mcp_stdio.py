"""`lamina mcp` on stdio answers `initialize` itself, as the SDK's server would, before that
server has started (tests/test_mcp.py runs a whole SDK client session through it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.integrations.mcp_stdio import HANDSHAKE_VERSIONS, is_stdio_mcp

pytest.importorskip("mcp")


def initialize(version: str) -> bytes:
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    return (json.dumps(request) + "\n").encode()


def first_answer(home: Path, version: str, *args: str, direct: bool = False) -> dict[str, Any]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    if direct:
        env["LAMINA_MCP_DIRECT"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "lamina", "mcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(initialize(version))
    process.stdin.flush()
    line = process.stdout.readline()
    process.stdin.close()
    process.wait(timeout=60)
    answer: dict[str, Any] = json.loads(line)
    return answer


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05", "1999-01-01"])
def test_the_early_answer_is_the_servers_own(tmp_path: Path, version: str) -> None:
    early = first_answer(tmp_path, version)
    server = first_answer(tmp_path, version, direct=True)
    assert early == server
    assert early["id"] == 7 and early["result"]["serverInfo"]["name"] == "lamina"


def test_initialize_is_answered_before_the_server_runs(tmp_path: Path) -> None:
    # The server behind the relay cannot even start (a bad option): the client still gets its
    # initialize answer, so the answer never waits for the SDK to load.
    answer = first_answer(tmp_path, "2025-06-18", "--port", "0")
    assert answer["result"]["protocolVersion"] == "2025-06-18"


def test_the_relay_knows_the_sdks_protocol_versions() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert HANDSHAKE_PROTOCOL_VERSIONS == HANDSHAKE_VERSIONS


@pytest.mark.parametrize(
    ("args", "relayed"),
    [
        (["mcp"], True),
        (["mcp", "--bank", "b"], True),
        (["--home", "/h", "mcp"], True),
        (["mcp", "--transport", "stdio"], True),
        (["mcp", "--transport", "streamable-http"], False),
        (["mcp", "--transport=streamable-http"], False),
        (["mcp", "--help"], False),
        (["recall", "mcp"], False),
        (["--home", "mcp", "status"], False),
    ],
)
def test_which_command_lines_take_the_relay(args: list[str], relayed: bool) -> None:
    assert is_stdio_mcp(args) is relayed
