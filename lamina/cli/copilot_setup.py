"""`lamina install copilot`, `lamina uninstall copilot` and the Copilot part of `lamina status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .common import emit_json

__all__ = ["copilot_status", "install_copilot", "uninstall_copilot"]

TRUST_NOTE = (
    "Copilot runs a repository's hooks and MCP servers only in a folder you trusted (it asks on "
    "the first interactive run; `copilot --trust-folder -p ...` trusts it for one run); "
    "elsewhere it skips them without a word"
)


def install_copilot(scope: str, home: str | None, as_json: bool) -> None:
    from ..integrations.copilot.install import install

    files = install(scope, home=home if scope == "user" else None)
    notes = []
    if scope == "project":
        notes = [TRUST_NOTE, "they run `lamina` from PATH: each teammate installs Lamina once"]
    if as_json:
        emit_json({"target": "copilot", "scope": scope, "hooks_file": str(files.hooks),
                   "mcp_config": str(files.mcp), "installed": True, "advice": notes})  # fmt: skip
        return
    click.echo(f"installed Lamina's hooks for copilot in {files.hooks}")
    click.echo(f"registered Lamina's MCP server as mcpServers.lamina in {files.mcp}")
    for line in notes:
        click.echo(f"note: {line}", err=True)
    click.echo("new Copilot sessions now recall before each prompt and retain after each turn")


def uninstall_copilot(scope: str, as_json: bool) -> None:
    from ..integrations.copilot.install import uninstall

    files, changed = uninstall(scope)
    if as_json:
        emit_json({"target": "copilot", "scope": scope, "hooks_file": str(files.hooks),
                   "mcp_config": str(files.mcp), "removed": changed})  # fmt: skip
        return
    where = f"{files.hooks} and {files.mcp}"
    if changed:
        click.echo(f"removed Lamina's hooks and MCP server from {where}")
    else:
        click.echo(f"no Lamina hooks or MCP server in {where}")


def copilot_status(directory: str | Path | None = None) -> dict[str, Any]:
    """Where Lamina's Copilot hooks are installed (a repository's run only in a folder the user
    trusted, which Copilot keeps to itself)."""
    from ..integrations.copilot.install import copilot_files, installed_scopes

    return {
        scope: {"installed": installed, "hooks_file": str(copilot_files(scope, directory).hooks)}
        for scope, installed in installed_scopes(directory).items()
    }
