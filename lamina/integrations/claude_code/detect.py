"""Which Lamina installations Claude Code will run: the plugin, hooks in settings files, MCP
servers. Read from Claude Code's own files, never written.

- Plugin: `<config dir>/plugins/installed_plugins.json` lists `lamina@<marketplace>`;
  `enabledPlugins` in the user's, the project's and the project's local settings turn it on or
  off (the later file wins).
- Settings hooks: `lamina install claude-code` entries (`install.installed_scopes`).
- MCP servers: `mcpServers` of `.claude.json` (user scope, and local scope under `projects`),
  the project's `.mcp.json`, and the plugin's own.

One installation wins: when the plugin is enabled, hooks from settings files stand aside (the
hook sees it was not started by the plugin's launcher and returns nothing), so no prompt ever
gets two memory blocks. The Copilot CLI also runs a project's `.claude/settings.json` hooks
(setting COPILOT_HOOK_DIR for them); they stand aside where Lamina's Copilot hooks are
installed. `lamina status` reports all of them and warns about the overlap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ...config import project_root

__all__ = [
    "claude_dir",
    "installation_warnings",
    "mcp_servers",
    "plugin_state",
    "stands_aside",
]

PLUGIN = "lamina"
ORIGIN_VARIABLE = "LAMINA_HOOK_ORIGIN"
"""Set to `plugin` by the plugin's launcher (scripts/run-lamina) for the hooks it starts."""


def claude_dir(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    return Path(environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def _claude_json(env: Mapping[str, str]) -> Path:
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json"
    return Path.home() / ".claude.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _project_dirs(directory: str | Path | None) -> list[Path]:
    start = Path(directory or Path.cwd()).resolve()
    root = project_root(start)
    return [start] if root == start else [start, root]


def plugin_state(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`{"installed": bool, "enabled": bool, "id": "lamina@<marketplace>" | None}`."""
    environ = os.environ if env is None else env
    config = claude_dir(environ)
    installed = _read(config / "plugins" / "installed_plugins.json").get("plugins")
    ids = [
        key
        for key in (installed if isinstance(installed, dict) else {})
        if isinstance(key, str) and key.split("@", 1)[0] == PLUGIN
    ]
    settings = [config / "settings.json"]
    project = _project_dirs(directory)[-1] / ".claude"
    settings += [project / "settings.json", project / "settings.local.json"]
    enabled: dict[str, bool] = {}
    for path in settings:
        flags = _read(path).get("enabledPlugins")
        if isinstance(flags, dict):
            enabled.update({k: bool(v) for k, v in flags.items() if isinstance(k, str)})
    on = [key for key in ids if enabled.get(key)]
    return {"installed": bool(ids), "enabled": bool(on), "id": next(iter(on or ids), None)}


def stands_aside(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """Which installation serves this session instead of the one that started this hook
    (None: this one serves it). The plugin wins over settings hooks, and a project's settings
    over the user's; each installation's command says where it came from in
    LAMINA_HOOK_ORIGIN (`plugin`, `project`, `user`; unset for hooks installed before that)."""
    from .install import installed_scopes

    environ = os.environ if env is None else env
    origin = environ.get(ORIGIN_VARIABLE, "")
    if origin == "plugin":
        return None
    if origin.startswith("codex-"):  # Codex's hooks: Claude Code's installations are not rivals
        from ..codex.install import stands_aside as codex_stands_aside

        return codex_stands_aside(directory, environ)
    if origin.startswith("gemini-"):  # the same for Gemini's
        from ..gemini.install import stands_aside as gemini_stands_aside

        return gemini_stands_aside(directory, environ)
    if origin.startswith("copilot-"):  # and Copilot's
        from ..copilot.install import stands_aside as copilot_stands_aside

        return copilot_stands_aside(directory, environ)
    if environ.get("COPILOT_HOOK_DIR"):
        # Copilot runs a project's .claude/settings.json hooks too: Lamina's own Copilot
        # hooks, where installed, serve the session instead.
        from ..copilot.install import installed_scopes as copilot_scopes
        from ..copilot.install import plugin_installed as copilot_plugin

        if any(copilot_scopes(directory, environ).values()) or copilot_plugin(environ):
            return "Lamina's hooks for Copilot"
    if plugin_state(directory, environ)["enabled"]:
        return "the Lamina plugin"
    if origin == "user" and installed_scopes(directory, environ).get("project"):
        return "the project's Lamina hooks"
    return None


def _is_lamina_server(name: str, entry: Any) -> bool:
    if not isinstance(entry, Mapping):
        return False
    args = entry.get("args")
    words = [str(entry.get("command") or ""), *(str(a) for a in args or [] if a is not None)]
    command = " ".join(words)
    return ("lamina" in command and "mcp" in words) or (
        "lamina" in name.lower() and bool(entry.get("url") or entry.get("command"))
    )


def mcp_servers(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """Lamina's MCP servers Claude Code knows of: name, scope and where it is declared."""
    environ = os.environ if env is None else env
    found: list[dict[str, str]] = []
    state = _read(_claude_json(environ))
    where = str(_claude_json(environ))

    def add(servers: Any, scope: str, source: str) -> None:
        for name, entry in (servers if isinstance(servers, dict) else {}).items():
            if isinstance(name, str) and _is_lamina_server(name, entry):
                found.append({"name": name, "scope": scope, "source": source})

    add(state.get("mcpServers"), "user", where)
    projects = state.get("projects")
    for project in _project_dirs(directory):
        if isinstance(projects, dict) and isinstance(projects.get(str(project)), dict):
            add(projects[str(project)].get("mcpServers"), "local", where)
    root = _project_dirs(directory)[-1]
    add(_read(root / ".mcp.json").get("mcpServers"), "project", str(root / ".mcp.json"))
    plugin = plugin_state(directory, environ)
    if plugin["enabled"]:
        found.append({"name": f"plugin:{PLUGIN}:lamina", "scope": "plugin", "source": plugin["id"]})
    return found


def installation_warnings(
    plugin: Mapping[str, Any], hooks: Mapping[str, bool], servers: list[dict[str, str]]
) -> list[str]:
    """What `lamina status` should warn about: more than one installation of a kind."""
    warnings: list[str] = []
    scopes = [scope for scope, installed in hooks.items() if installed]
    if plugin.get("enabled") and scopes:
        remove = " and ".join(f"`lamina uninstall claude-code --{scope}`" for scope in scopes)
        warnings.append(
            f"the Lamina plugin and hooks in {' and '.join(scopes)} settings are both installed;"
            f" the plugin serves the hooks and the others stand aside (remove them: {remove})"
        )
    elif len(scopes) > 1:
        warnings.append(
            "Lamina's hooks are in both user and project settings; the project's serve this"
            " project and the user's stand aside (`lamina uninstall claude-code --user`)"
        )
    if len(servers) > 1:
        names = ", ".join(f"{s['name']} ({s['scope']})" for s in servers)
        warnings.append(f"{len(servers)} Lamina MCP servers are configured: {names}; keep one")
    return warnings
