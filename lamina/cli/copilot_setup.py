"""`lamina install copilot`, `lamina uninstall copilot` and the Copilot part of `lamina status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import report_install, report_uninstall

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
    paths = {"hooks_file": str(files.hooks), "mcp_config": str(files.mcp)}
    mcp = f"mcpServers.lamina in {files.mcp}"
    report_install(
        "copilot", scope, paths, hooks=str(files.hooks), mcp=mcp, notes=notes, as_json=as_json
    )


def uninstall_copilot(scope: str, as_json: bool) -> None:
    from ..integrations.copilot.install import uninstall

    files, changed = uninstall(scope)
    paths = {"hooks_file": str(files.hooks), "mcp_config": str(files.mcp)}
    report_uninstall("copilot", scope, paths, f"{files.hooks} and {files.mcp}", changed, as_json)


def copilot_status(directory: str | Path | None = None) -> dict[str, Any]:
    """Where Lamina's Copilot hooks are installed (a repository's run only in a folder the user
    trusted, which Copilot keeps to itself)."""
    from ..integrations.copilot.install import (
        PLUGIN,
        copilot_files,
        copilot_home,
        installed_scopes,
        plugin_installed,
    )

    report: dict[str, Any] = {
        scope: {"installed": installed, "hooks_file": str(copilot_files(scope, directory).hooks)}
        for scope, installed in installed_scopes(directory).items()
    }
    if plugin_installed():
        # `copilot plugin install lamina@lamina`, recorded in Copilot's settings.json.
        settings = copilot_home() / "settings.json"
        report["plugin"] = {"installed": True, "id": PLUGIN, "hooks_file": str(settings)}
    return report
