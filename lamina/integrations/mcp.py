"""`lamina mcp`: the memory bank as an MCP server, built on the official `mcp` SDK, over stdio
or streamable HTTP.

Tools: `recall`, `retain_text`, `retain_transcript`, `list_banks`, `list_documents`,
`forget_document`, `compile_transcript`, and for context logs kept in a bank (as the HTTP API's
`/v1/banks/{bank}/logs`): `append_to_log`, `compile_log`, `list_logs`, `delete_log`, `pin_log`,
`unpin_log`; over stdio also `pause_memory` and `resume_memory` (lamina.integrations.mcp_pause).
They live in `lamina.integrations.mcp_tools`: every parameter typed and described
(enums for formats, an item schema for messages), every tool annotated (read-only, destructive,
idempotent), results as compact JSON. `recall` gives the memories with their time and document;
scores, source spans and a prompt block only with `detail`. A tool that fails for a reason the
caller can fix (no such bank or log, a file that is not a transcript) answers with an MCP tool
error carrying Lamina's one-line message, worded for a model (no command-line flags, no
temporary paths); the server never crashes on bad input. Without a `bank` argument, tools use
the server's default bank (`--bank`, `LAMINA_BANK`, or the project bank of
`CLAUDE_PROJECT_DIR` when Claude Code started it, else of the directory it was started in).

Over HTTP (`http_app`) the API keys of `lamina keys` apply as they do for `lamina serve`
(`lamina.access.Gate`): once a key exists, every request needs `Authorization: Bearer <key>`,
and before that `Authorization: Bearer <the local token>` (`lamina.access.local_token`),
checked at the transport (`KeyCheck`: without a valid key even `initialize` and `tools/list`
get HTTP 401, so a client with a wrong key does not show as connected), and a call sees only
the key's banks (others are reported as absent). A tool that takes a file path refuses paths
outside the directories an operator allowed (`--allow-dir`; none by default), without saying
whether the path exists. Over stdio the caller is the local user: every bank, any path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import orjson
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..access import Gate
from ..bank.bank import MemoryBank
from ..config import Settings, default_bank, resolve_settings
from ..context.logs import ContextLogs, log_summariser
from ..errors import AccessError
from .mcp_stdio import INSTRUCTIONS
from .mcp_tools import Tools, register

__all__ = ["KeyCheck", "build_server", "http_app"]


def _build(
    home: str | Path | None,
    bank: str | None,
    database_url: str | None,
    host: str,
    allow_dirs: Sequence[str | Path],
    token: str | None = None,
    settings: Settings | None = None,
) -> tuple[MCPServer, Gate, Settings]:
    if settings is None:
        settings = resolve_settings(home=home, database_url=database_url)
    memory = MemoryBank.open(settings=settings, serving=True)
    gate = Gate.at_start(memory.store, host, allow_dirs, token)
    # Claude Code names the project it started the server for; it stays put, unlike cwd.
    fallback = bank or default_bank(os.environ.get("CLAUDE_PROJECT_DIR") or None, settings)
    logs = ContextLogs(memory.store, log_summariser(memory.store, settings.summariser), settle=True)
    server = MCPServer(name="lamina", instructions=INSTRUCTIONS, version=__version__)
    register(server, Tools(memory, gate, fallback, logs))
    return server, gate, settings


def build_server(
    home: str | Path | None = None,
    bank: str | None = None,
    *,
    database_url: str | None = None,
    host: str = "127.0.0.1",
    allow_dirs: Sequence[str | Path] = (),
    settings: Settings | None = None,
) -> MCPServer:
    """The MCP server with Lamina's tools (for stdio; over HTTP serve `http_app`), and over
    stdio `pause_memory` / `resume_memory` (lamina.integrations.mcp_pause)."""
    from .mcp_pause import register_pause

    server, _gate, settings = _build(home, bank, database_url, host, allow_dirs, settings=settings)
    project = bank or default_bank(os.environ.get("CLAUDE_PROJECT_DIR") or None, settings)
    register_pause(server, settings.home, project)
    return server


class KeyCheck:
    """Refuses every HTTP request without a valid API key (or, while none exists, the local
    token) with 401 before the MCP transport sees it: `initialize` and `tools/list` included,
    so a client with a wrong key fails to connect instead of showing as connected."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            authorization = headers.get(b"authorization", b"").decode("latin-1") or None
            try:
                self.gate.access(authorization)
            except AccessError as exc:
                body = orjson.dumps(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": str(exc)}}
                )
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="lamina"'),
                ]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(
    home: str | Path | None = None,
    bank: str | None = None,
    *,
    database_url: str | None = None,
    host: str = "127.0.0.1",
    allow_dirs: Sequence[str | Path] = (),
    token: str | None = None,
    settings: Settings | None = None,
) -> ASGIApp:
    """The MCP server over streamable HTTP at `/mcp`, behind `KeyCheck`; `token` is what it
    asks while no API key exists (by default one nobody knows: pass `local_token`)."""
    server, gate, _settings = _build(home, bank, database_url, host, allow_dirs, token, settings)
    return KeyCheck(server.streamable_http_app(host=host), gate)
