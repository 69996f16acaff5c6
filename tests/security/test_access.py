"""Who may use which bank, and which server files, over HTTP and MCP: real server processes
on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from .servers import Served, create_key, lamina

pytest.importorskip("fastapi")


def test_revoking_the_last_key_does_not_open_the_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = Served(home, "serve")
    try:
        assert server.call("GET", "/v1/banks").status_code == 200  # keyless loopback: open
        key = create_key(home, "ops", "alpha")
        assert server.call("GET", "/v1/banks").status_code == 401
        assert server.call("GET", "/v1/banks", key=key).status_code == 200
        assert lamina(home, "keys", "revoke", "ops").returncode == 0
        # No key left: the server stays closed, not open to everyone.
        assert server.call("GET", "/v1/banks").status_code == 401
        assert server.call("GET", "/v1/banks", key=key).status_code == 401
        recall = server.call("POST", "/v1/banks/alpha/recall", json={"query": "x"})
        assert recall.status_code == 401
    finally:
        log = server.stop()
    assert "open to every local caller" in log


def test_a_server_started_with_keys_stays_closed_after_revoking_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    create_key(home, "ops", "alpha")
    server = Served(home, "serve")
    try:
        assert lamina(home, "keys", "revoke", "ops").returncode == 0
        assert server.call("GET", "/v1/banks").status_code == 401
    finally:
        log = server.stop()
    assert "API keys required" in log


def test_keyless_server_answers_loopback_host_names_only(tmp_path: Path) -> None:
    server = Served(tmp_path / "home", "serve")
    try:
        assert server.call("GET", "/v1/banks").status_code == 200
        assert server.call("GET", "/v1/banks", headers={"Host": "localhost:1"}).status_code == 200
        rebound = server.call("GET", "/v1/banks", headers={"Host": "evil.example:8420"})
        assert rebound.status_code == 421
        assert server.call("GET", "/v1/banks", headers={"Host": "[::1]:80"}).status_code == 200
    finally:
        server.stop()


mcp = pytest.importorskip("mcp")


async def mcp_call(url: str, key: str | None, tool: str, args: dict[str, Any]) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        return await session.call_tool(tool, args)


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


SECRET_FILE = '[{"role": "user", "content": "the vault combination is 7-41-13"}]\n'


def _flat(error: BaseException) -> str:
    """The messages of an exception and those inside it (the MCP client raises groups)."""
    if isinstance(error, BaseExceptionGroup):
        return " ".join(_flat(inner) for inner in error.exceptions)
    return repr(error)


@pytest.mark.parametrize("tool", ["compile_transcript", "retain_transcript", "append_to_log"])
def test_mcp_over_http_reads_no_server_file_outside_allowed_dirs(tmp_path: Path, tool: str) -> None:
    home = tmp_path / "home"
    key = create_key(home, "a", "alpha")
    private = tmp_path / "private" / "notes.json"
    private.parent.mkdir()
    private.write_text(SECRET_FILE)
    allowed = tmp_path / "shared"
    allowed.mkdir()
    (allowed / "chat.json").write_text(SECRET_FILE.replace("vault", "shared"))
    (allowed / "escape.json").symlink_to(private)
    server = Served(home, "mcp", "--transport", "streamable-http", "--allow-dir", str(allowed))
    url = f"{server.url}/mcp"
    args: dict[str, Any] = {"compile_transcript": {"budget": 4000, "reserve": 500},
                            "retain_transcript": {"bank": "alpha"},
                            "append_to_log": {"bank": "alpha", "log": "l"}}[tool]  # fmt: skip
    try:
        for who in (None, "lam_bogus"):
            # Refused at the transport (HTTP 401) before any tool runs.
            with pytest.raises(BaseException) as refused:
                anyio.run(mcp_call, url, who, tool, {**args, "path": str(private)})
            assert "API key" in _flat(refused.value) and "7-41-13" not in _flat(refused.value)
        outside = anyio.run(mcp_call, url, key, tool, {**args, "path": str(private)})
        missing = anyio.run(mcp_call, url, key, tool, {**args, "path": str(private) + ".nope"})
        escape = anyio.run(mcp_call, url, key, tool, {**args, "path": str(allowed / "escape.json")})
        assert outside.is_error and missing.is_error and escape.is_error
        # The same words whether or not the path exists: nothing to probe with.
        assert text_of(outside) == text_of(missing) == text_of(escape)
        assert "7-41-13" not in text_of(outside)
        inside = anyio.run(mcp_call, url, key, tool, {**args, "path": str(allowed / "chat.json")})
        assert not inside.is_error, text_of(inside)
    finally:
        log = server.stop()
    assert "API keys required" in log


def test_mcp_over_stdio_reads_local_paths(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from .servers import env_for

    transcript = tmp_path / "chat.json"
    transcript.write_text(SECRET_FILE)

    async def run() -> Any:
        params = StdioServerParameters(command=__import__("sys").executable,
                                       args=["-m", "lamina", "mcp", "--bank", "b"],
                                       env=env_for(tmp_path / "home"))  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool(
                "compile_transcript", {"path": str(transcript), "budget": 4000, "reserve": 500}
            )

    result = anyio.run(run)
    assert not result.is_error, text_of(result)
