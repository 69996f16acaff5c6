"""What `lamina install codex`, `gemini` and `copilot` share: the command each hook runs, the
`lamina mcp` server entry, and which installation serves a session when several do.

User scope runs this installation's `lamina` by absolute path (lamina.integrations.claude_code.
install.hook_command) with `LAMINA_HOOK_ORIGIN=<agent>-user`; project scope, a file meant to be
committed, runs `lamina` from PATH with `<agent>-project`, and does nothing where a teammate has
no Lamina. Every one of these CLIs runs the hooks of all its layers, so a user-scope hook stands
aside when the project's are installed, and a prompt never gets two memory blocks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .claude_code.install import hook_command

__all__ = [
    "AGENT_HOOK_EVENTS",
    "SERVER",
    "hook_commands",
    "is_lamina_server",
    "mcp_words",
    "packaged_stands_aside",
    "user_stands_aside",
    "with_server",
    "without_server",
]

AGENT_HOOK_EVENTS: Mapping[str, int] = {
    "SessionStart": 10,
    "UserPromptSubmit": 10,
    "Stop": 10,
    "PreCompact": 10,
    "SessionEnd": 10,
}
"""The events Lamina handles in Codex and Copilot (under Claude Code's names), with their
timeouts in seconds; each agent's module says what its own differ in."""

SERVER = "lamina"
"""The name Lamina's MCP server is registered under."""


def hook_commands(
    agent: str, scope: str, home: str | Path | None, events: Iterable[str]
) -> dict[str, str]:
    """The command of each event's hook: this installation's `lamina hook` (user scope), or
    `lamina hook` from PATH that does nothing without Lamina (a project's)."""
    if scope == "user":
        return dict.fromkeys(events, hook_command(home, origin=f"{agent}-user"))
    run = f"LAMINA_HOOK_ORIGIN={agent}-project exec lamina hook"
    return dict.fromkeys(events, f"command -v lamina >/dev/null 2>&1 && {run}; true")


def mcp_words(scope: str, home: str | Path | None) -> list[str]:
    """`lamina mcp` as command and arguments: the hook's executable without its origin and
    `hook` (user scope), or `lamina` from PATH (a project's)."""
    import shlex  # here: the hook imports this module; only installs split commands

    words = shlex.split(hook_command(home))[1:-1] if scope == "user" else ["lamina"]
    return [*words, "mcp"]


def is_lamina_server(entry: Any) -> bool:
    """Whether an `mcpServers` entry runs `lamina ... mcp`."""
    if not isinstance(entry, Mapping):
        return False
    args = entry.get("args")
    words = [str(entry.get("command") or ""), *(str(a) for a in args or [] if a is not None)]
    return "lamina" in " ".join(words) and "mcp" in words


def with_server(path: Path, data: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (a JSON settings file's) with `mcpServers.lamina` set to `entry`, the keys the
    user added to an older Lamina entry (env, timeout) kept. A `lamina` server that runs
    something else is left alone with an error."""
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' is not an object")
    if SERVER in servers and not is_lamina_server(servers[SERVER]):
        raise ConfigError(
            f"{path}: mcpServers.{SERVER} runs something other than `lamina mcp`; "
            "rename or remove it first"
        )
    old = servers.get(SERVER)
    merged = {**(old if isinstance(old, Mapping) else {}), **entry}
    return {**data, "mcpServers": {**servers, SERVER: merged}}


def without_server(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` without Lamina's `mcpServers.lamina` (and without `mcpServers` when that was all)."""
    updated = dict(data)
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and is_lamina_server(servers.get(SERVER)):
        rest = {name: entry for name, entry in servers.items() if name != SERVER}
        if rest:
            updated["mcpServers"] = rest
        else:
            updated.pop("mcpServers")
    return updated


def user_stands_aside(
    agent: str,
    label: str,
    installed_scopes: Callable[[str | Path | None, Mapping[str, str]], Mapping[str, bool]],
    directory: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The installation a user-scope hook of `agent` stands aside for (None: it serves): the
    project's, when that is installed too."""
    environ = os.environ if env is None else env
    if environ.get("LAMINA_HOOK_ORIGIN") == f"{agent}-user" and installed_scopes(
        directory, environ
    ).get("project"):
        return f"the project's Lamina hooks for {label}"
    return None


def packaged_stands_aside(
    agent: str,
    label: str,
    package: str,
    installed_scopes: Callable[[str | Path | None, Mapping[str, str]], Mapping[str, bool]],
    package_installed: Callable[[Mapping[str, str]], bool],
    directory: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """`user_stands_aside` for an agent whose CLI also loads Lamina as a `package` (Gemini's
    extension, Codex's plugin; its hooks' origin is `<agent>-<package>`), whose hooks run beside
    the settings' ones: the package's stand aside for a project's, and a user-scope hook for
    the package's, so a prompt never gets two memory blocks."""
    environ = os.environ if env is None else env
    origin = environ.get("LAMINA_HOOK_ORIGIN", "")
    if origin == f"{agent}-{package}":
        if installed_scopes(directory, environ).get("project"):
            return f"the project's Lamina hooks for {label}"
        return None
    if origin == f"{agent}-user" and package_installed(environ):
        return f"the Lamina {package} for {label}"
    return user_stands_aside(agent, label, installed_scopes, directory, env)
