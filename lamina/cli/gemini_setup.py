"""`lamina install gemini`, `lamina uninstall gemini` and the Gemini part of `lamina status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .common import emit_json

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
    if as_json:
        emit_json({"target": "gemini", "scope": scope, "settings": str(path),
                   "installed": True, "advice": notes})  # fmt: skip
        return
    click.echo(f"installed Lamina's hooks for gemini in {path}")
    click.echo(f"registered Lamina's MCP server as mcpServers.lamina in {path}")
    for line in notes:
        click.echo(f"note: {line}", err=True)
    click.echo("new Gemini sessions now recall before each prompt and retain after each turn")


def uninstall_gemini(scope: str, as_json: bool) -> None:
    from ..integrations.gemini.install import uninstall

    path, changed = uninstall(scope)
    if as_json:
        emit_json({"target": "gemini", "scope": scope, "settings": str(path), "removed": changed})
        return
    if changed:
        click.echo(f"removed Lamina's hooks and MCP server from {path}")
    else:
        click.echo(f"no Lamina hooks or MCP server in {path}")


def gemini_status(directory: str | Path | None = None) -> dict[str, Any]:
    """Where Lamina's Gemini hooks are installed (Gemini has no per-hook trust)."""
    from ..integrations.gemini.install import installed_scopes, settings_file

    return {
        scope: {"installed": installed, "settings": str(settings_file(scope, directory))}
        for scope, installed in installed_scopes(directory).items()
    }
