"""The MCP server's pause tools (stdio only): `pause_memory` and `resume_memory` turn memory
off and on for the server's project (its default bank) or one session, as `lamina pause` and
`lamina resume` do (`lamina.pause`): from inside the agent, the user can say "stop remembering
this" and the hooks neither recall nor retain until resumed.

They write the data directory of the machine the server runs on, so they are offered over
stdio (the local user) only, never over HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ..pause import pause, resume
from .mcp_tools import _tool_errors

__all__ = ["register_pause"]

Session = Annotated[
    str | None,
    Field(description="One session's id; when absent, the whole project (the server's "
          "default bank)."),
]  # fmt: skip

_CHANGES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def register_pause(server: MCPServer, home: Path, bank: str) -> None:
    """Put `pause_memory` and `resume_memory` on `server`, for `bank` (the project's)."""

    @_tool_errors
    def pause_memory(session: Session = None) -> dict[str, Any]:
        target = {"session": session} if session else {"bank": bank}
        return pause(home, **target)

    @_tool_errors
    def resume_memory(session: Session = None) -> dict[str, Any]:
        target = {"session": session} if session else {"bank": bank}
        was = resume(home, **target)
        return {"resumed": "session" if session else "bank", "name": session or bank,
                "was_paused": was}  # fmt: skip

    tools: dict[str, tuple[Any, str]] = {
        "pause_memory": (pause_memory, "Pause memory for this project (or one session) when "
                         "the user asks not to be remembered: until resume_memory, nothing is "
                         "recalled into prompts and nothing said is retained, ever."),
        "resume_memory": (resume_memory, "Resume memory paused by pause_memory, when the user "
                          "asks for it."),
    }  # fmt: skip
    for name, (fn, description) in tools.items():
        server.add_tool(fn, name=name, description=description, annotations=_CHANGES)
