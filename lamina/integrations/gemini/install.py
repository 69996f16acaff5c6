"""`lamina install gemini` / `lamina uninstall gemini`: Lamina's hooks and MCP server in the
Gemini CLI's settings.json, every other setting kept.

User scope: `~/.gemini/settings.json` (`$GEMINI_CLI_HOME/.gemini/` when that is set), with this
installation's `lamina` by absolute path. Project scope: `<project>/.gemini/settings.json` (the
project root of lamina.config), meant to be committed: `lamina` from PATH, nothing of this
machine.

- `hooks`: `{event: [{"matcher"?, "hooks": [{"name", "type": "command", "command", "timeout"}]}]}`,
  timeouts in milliseconds, merged as Claude Code's (lamina.integrations.claude_code.install):
  Lamina's entries replaced, everything else kept.
- `mcpServers.lamina`: `lamina mcp` with `"trust": true`. Gemini's headless mode (`gemini -p`)
  offers an MCP server's tools to the model only when the server is trusted (or in yolo mode);
  without it the server starts but its tools are left out.

Events: SessionStart (the database ready), BeforeAgent (recall and inject, as
`hookSpecificOutput.additionalContext`), AfterAgent (retain, detached) and SessionEnd (retain;
Gemini does not wait for it). Nothing is injected at SessionStart: in `-p` mode its context is
prepended to the prompt, and on `--resume` Gemini drops every user message starting with
`<hook_context>`, so that turn's prompt would disappear from the model's history. PreCompress is
not used: it fires on every turn.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import project_root
from ...errors import ConfigError
from ..claude_code.install import _load, _save, _without_ours, grouped_hooks_installed
from ..installs import (
    SERVER,
    hook_commands,
    mcp_words,
    packaged_stands_aside,
    with_server,
    without_server,
)

__all__ = [
    "HOOK_EVENTS",
    "SERVER",
    "extension_installed",
    "gemini_home",
    "install",
    "installed_scopes",
    "settings_file",
    "stands_aside",
    "uninstall",
]

HOOK_EVENTS: Mapping[str, int] = {
    "SessionStart": 10000,
    "BeforeAgent": 10000,
    "AfterAgent": 10000,
    "SessionEnd": 5000,
}
"""The events Lamina handles in Gemini, with their timeouts (milliseconds). The prompt hook
answers within its own 3 s limit; AfterAgent and SessionEnd only start the retain worker."""


@dataclass(frozen=True, slots=True)
class _Files:
    scope: str
    settings: Path


def gemini_home(env: Mapping[str, str] | None = None) -> Path:
    """The user's Gemini directory: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`."""
    environ = os.environ if env is None else env
    base = environ.get("GEMINI_CLI_HOME")
    return Path(base) / ".gemini" if base else Path.home() / ".gemini"


def settings_file(
    scope: str, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Path:
    if scope == "user":
        return gemini_home(env) / "settings.json"
    if scope == "project":
        return project_root(directory) / ".gemini" / "settings.json"
    raise ConfigError(f"unknown scope {scope!r} (user or project)")


def _hook_groups(commands: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for event, timeout in HOOK_EVENTS.items():
        entry = {"name": f"lamina-{event}", "type": "command", "command": commands[event],
                 "timeout": timeout}  # fmt: skip
        group: dict[str, Any] = {"matcher": "*"} if event == "SessionStart" else {}
        groups[event] = [{**group, "hooks": [entry]}]
    return groups


def _server(scope: str, home: str | Path | None) -> dict[str, Any]:
    """`mcpServers.lamina`: `lamina mcp`, trusted, so that headless sessions are offered its
    tools."""
    command, *args = mcp_words(scope, home)
    return {"command": command, "args": args, "trust": True}


def install(
    scope: str,
    *,
    directory: str | Path | None = None,
    home: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Add Lamina's hooks and MCP server (replacing an older Lamina entry, keeping everything
    else); running it again changes nothing. A `mcpServers.lamina` that is not Lamina's own
    (another command) is left alone with an error."""
    path = settings_file(scope, directory, env)
    data = _load(path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object")
    merged = _without_ours(hooks)
    for event, groups in _hook_groups(hook_commands("gemini", scope, home, HOOK_EVENTS)).items():
        merged.setdefault(event, []).extend(groups)
    updated = with_server(path, {**data, "hooks": merged}, _server(scope, home))
    if updated != data or not path.exists():
        _save(path, updated)
    return path


def uninstall(
    scope: str, *, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, bool]:
    """Remove Lamina's hooks and MCP server; whether anything was removed. A file left empty is
    removed, and so is a project's emptied `.gemini` directory."""
    path = settings_file(scope, directory, env)
    if not path.exists():
        return path, False
    data = _load(path)
    updated = without_server(data)
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        cleaned = _without_ours(hooks)
        if cleaned != hooks:
            if cleaned:
                updated["hooks"] = cleaned
            else:
                updated.pop("hooks")
    if updated == data:
        return path, False
    if updated:
        _save(path, updated)
    else:
        path.unlink()
        if scope == "project":
            with contextlib.suppress(OSError):
                path.parent.rmdir()
    return path, True


def installed_scopes(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, bool]:
    """Where Lamina's Gemini hooks are installed now."""
    return {
        scope: grouped_hooks_installed(settings_file(scope, directory, env))
        for scope in ("user", "project")
    }


def stands_aside(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """Gemini merges the hooks of its settings layers and its extensions': a user-scope hook
    stands aside for a project's, and so does the Lamina extension's; a user-scope hook also
    stands aside for the extension, so a prompt never gets two memory blocks."""
    return packaged_stands_aside(
        "gemini", "Gemini", "extension", installed_scopes, extension_installed, directory, env
    )


def extension_installed(env: Mapping[str, str] | None = None) -> bool:
    """Whether the Lamina extension (plugins/gemini-lamina) is installed for this user."""
    return (gemini_home(env) / "extensions" / "lamina" / "gemini-extension.json").is_file()
