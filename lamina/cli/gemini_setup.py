"""`lamina install gemini`, `lamina uninstall gemini` and the Gemini part of `lamina status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import report_install, report_uninstall

__all__ = ["gemini_status", "install_gemini", "uninstall_gemini"]

TRUST_NOTE = (
    "Gemini runs a headless session (`gemini -p`) only in a trusted folder: trust it when the "
    "first interactive run asks, or set GEMINI_CLI_TRUST_WORKSPACE=true"
)
MCP_NOTE = (
    'the MCP server is registered with "trust": true, without which Gemini\'s headless mode '
    "does not offer its tools to the model"
)


def install_gemini(scope: str, home: str | None, as_json: bool) -> None:
    from ..integrations.gemini.install import install

    path = install(scope, home=home if scope == "user" else None)
    notes = [TRUST_NOTE, MCP_NOTE]
    if scope == "project":
        notes.append("they run `lamina` from PATH: each teammate installs Lamina once")
    mcp = f"mcpServers.lamina in {path}"
    report_install(
        "gemini",
        scope,
        {"settings": str(path)},
        hooks=str(path),
        mcp=mcp,
        notes=notes,
        as_json=as_json,
    )


def uninstall_gemini(scope: str, as_json: bool) -> None:
    from ..integrations.gemini.install import uninstall

    path, changed = uninstall(scope)
    report_uninstall("gemini", scope, {"settings": str(path)}, str(path), changed, as_json)


def gemini_status(directory: str | Path | None = None) -> dict[str, Any]:
    """Where Lamina's Gemini hooks are installed (Gemini has no per-hook trust)."""
    from ..integrations.gemini.install import installed_scopes, settings_file

    return {
        scope: {"installed": installed, "settings": str(settings_file(scope, directory))}
        for scope, installed in installed_scopes(directory).items()
    }
