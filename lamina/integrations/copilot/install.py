"""`lamina install copilot` / `lamina uninstall copilot`: Lamina's hooks and MCP server for the
GitHub Copilot CLI, every other setting kept.

User scope: `$COPILOT_HOME` (default `~/.copilot`): hooks in `hooks/lamina.json`, the server in
`mcp-config.json`, with this installation's `lamina` by absolute path. Project scope: the
project root of lamina.config (Copilot reads a repository's hooks from its git root):
`.github/hooks/lamina.json` and `.github/mcp.json`, meant to be committed, `lamina` from PATH.

- hooks: `{"version": 1, "hooks": {event: [{"type": "command", "bash", "timeoutSec"}]}}`. The
  events have Claude Code's names (SessionStart, UserPromptSubmit, Stop, SessionEnd): Copilot
  then sends Claude Code's payloads (`hook_event_name`, `session_id`, `transcript_path` at Stop),
  which `lamina hook` reads as it reads Claude Code's. Copilot's own names (sessionStart,
  userPromptSubmitted, agentStop, sessionEnd) fire at the same moments with camelCase payloads
  and no event name. Lamina's entries are replaced, other entries of the file kept; a file that
  held only Lamina's is removed again.
- `mcpServers.lamina` in the MCP file, as `copilot mcp add lamina -- lamina mcp` writes it.

What reaches the model: the UserPromptSubmit hook's top-level `additionalContext` (Copilot does
not read `hookSpecificOutput`), appended to the prompt inside `<system_reminder>`, once per
prompt. SessionStart injects nothing (its context would become a user message of its own).

Trust: a user's hooks run everywhere. A repository's hooks (and .github/mcp.json) run only in
a folder the user trusted (Copilot asks on the first interactive run; `--trust-folder` for one
`-p` run; COPILOT_ALLOW_ALL=true trusts every folder); elsewhere they are skipped silently.
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
from ..claude_code.install import _load, _save, is_hook_command, settings_hooks
from ..installs import (
    AGENT_HOOK_EVENTS,
    hook_commands,
    mcp_words,
    packaged_stands_aside,
    with_server,
    without_server,
)

__all__ = [
    "HOOK_EVENTS",
    "PLUGIN",
    "CopilotFiles",
    "copilot_files",
    "copilot_home",
    "copilot_transcript",
    "install",
    "installed_scopes",
    "plugin_installed",
    "stands_aside",
    "uninstall",
]

HOOK_EVENTS: Mapping[str, int] = AGENT_HOOK_EVENTS
"""The events Lamina handles in Copilot, with their timeouts (seconds, `timeoutSec`). The prompt
hook answers within its own 3 s limit; Stop, PreCompact and SessionEnd only start the retain
worker. PreCompact (Copilot 1.0.102's preCompact, `trigger: manual` for /compact, `auto`) gets
Claude Code's payload with `transcript_path`: a long turn is retained before Copilot compacts
its history, rather than at the turn's end."""


def copilot_home(env: Mapping[str, str] | None = None) -> Path:
    """The user's Copilot directory: `$COPILOT_HOME`, else `~/.copilot`."""
    environ = os.environ if env is None else env
    return Path(environ.get("COPILOT_HOME") or Path.home() / ".copilot")


def copilot_transcript(session: str, env: Mapping[str, str] | None = None) -> str:
    """A Copilot session's `events.jsonl` ("" for a session id that is not a plain name)."""
    if not session or "/" in session or session.startswith("."):
        return ""
    return str(copilot_home(env) / "session-state" / session / "events.jsonl")


@dataclass(frozen=True, slots=True)
class CopilotFiles:
    scope: str
    hooks: Path
    mcp: Path


def copilot_files(
    scope: str, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> CopilotFiles:
    if scope == "user":
        base = copilot_home(env)
        return CopilotFiles(scope, base / "hooks" / "lamina.json", base / "mcp-config.json")
    if scope == "project":
        base = project_root(directory) / ".github"
        return CopilotFiles(scope, base / "hooks" / "lamina.json", base / "mcp.json")
    raise ConfigError(f"unknown scope {scope!r} (user or project)")


def _is_ours(entry: Any) -> bool:
    if not isinstance(entry, Mapping):
        return False
    command = entry.get("bash") or entry.get("command")
    return isinstance(command, str) and is_hook_command(command)


def _without_ours(hooks: Mapping[str, Any]) -> dict[str, Any]:
    """Copilot's `hooks` (event -> list of entries, no groups) without Lamina's entries."""
    cleaned: dict[str, Any] = {}
    for event, entries in hooks.items():
        if isinstance(entries, list):
            entries = [e for e in entries if not _is_ours(e)]
            if not entries:
                continue
        cleaned[event] = entries
    return cleaned


def _hooks(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    data = _load(path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object")
    return data, hooks


def install(
    scope: str,
    *,
    directory: str | Path | None = None,
    home: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> CopilotFiles:
    """Add Lamina's hooks and MCP server (replacing an older Lamina entry, keeping everything
    else); running it again changes nothing. A `mcpServers.lamina` that runs something other
    than `lamina mcp` is left alone with an error, before anything is written."""
    files = copilot_files(scope, directory, env)
    data, hooks = _hooks(files.hooks)
    command, *args = mcp_words(scope, home)
    entry = {"type": "local", "command": command, "args": args, "tools": ["*"]}
    mcp = _load(files.mcp)
    served = with_server(files.mcp, mcp, entry)
    merged = _without_ours(hooks)
    for event, run in hook_commands("copilot", scope, home, HOOK_EVENTS).items():
        ours = {"type": "command", "bash": run, "timeoutSec": HOOK_EVENTS[event]}
        merged.setdefault(event, []).append(ours)
    updated = {"version": 1, **data, "hooks": merged}
    if updated != data or not files.hooks.exists():
        _save(files.hooks, updated)
    if served != mcp or not files.mcp.exists():
        _save(files.mcp, served)
    return files


def uninstall(
    scope: str, *, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[CopilotFiles, bool]:
    """Remove Lamina's hooks and MCP server; whether anything was removed. A file left with
    nothing of its own is removed, and so are the directories emptied with it."""
    files = copilot_files(scope, directory, env)
    changed = False
    if files.hooks.exists():
        data, hooks = _hooks(files.hooks)
        cleaned = _without_ours(hooks)
        if cleaned != hooks:
            changed = True
            rest = {k: v for k, v in data.items() if k not in ("hooks", "version")}
            if cleaned or rest:
                _save(files.hooks, {**data, "hooks": cleaned})
            else:
                files.hooks.unlink()
    if files.mcp.exists():
        mcp = _load(files.mcp)
        served = without_server(mcp)
        if served != mcp:
            changed = True
            if served:
                _save(files.mcp, served)
            else:
                files.mcp.unlink()
    if changed:
        # Folders emptied with them go too: `hooks/`, and a project's `.github/`.
        folders = [files.hooks.parent] + ([files.mcp.parent] if scope == "project" else [])
        for folder in folders:
            with contextlib.suppress(OSError):
                folder.rmdir()
    return files, changed


def _installed(path: Path) -> bool:
    """Whether Copilot's hooks file (event -> hooks) holds a Lamina hook."""
    return any(
        _is_ours(entry)
        for entries in settings_hooks(path).values()
        if isinstance(entries, list)
        for entry in entries
    )


def installed_scopes(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, bool]:
    """Where Lamina's Copilot hooks are installed now."""
    return {
        scope: _installed(copilot_files(scope, directory, env).hooks)
        for scope in ("user", "project")
    }


def stands_aside(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """Copilot runs a user's hooks, a repository's and its plugins': a user-scope hook stands
    aside for a project's and for the Lamina plugin, and the plugin for a project's, so a
    prompt never gets two memory blocks."""
    return packaged_stands_aside(
        "copilot", "Copilot", "plugin", installed_scopes, plugin_installed, directory, env
    )


PLUGIN = "lamina@lamina"
"""The Copilot plugin's id: plugin `lamina` of the repository's marketplace `lamina`
(.github/plugin/marketplace.json, plugins/copilot-lamina)."""


def plugin_installed(env: Mapping[str, str] | None = None) -> bool:
    """Whether the Lamina plugin is installed and enabled in Copilot: `copilot plugin install
    lamina@lamina` records it in `settings.json` (`enabledPlugins`), loads it live from a local
    marketplace folder and copies it from any other (`installed-plugins/lamina/lamina`)."""
    home = copilot_home(env)
    try:
        settings = _load(home / "settings.json")
    except ConfigError:  # Copilot's to report; the hook goes on as if no plugin were there
        settings = {}
    enabled = settings.get("enabledPlugins")
    if isinstance(enabled, Mapping) and PLUGIN in enabled:
        return enabled[PLUGIN] is True
    name, _at, marketplace = PLUGIN.partition("@")
    return (home / "installed-plugins" / marketplace / name).is_dir()
