"""`lamina install claude-code` / `lamina uninstall claude-code`: write Lamina's hooks into
Claude Code's settings, or take them out, without touching anything else there.

User scope: `~/.claude/settings.json`, with this installation's `lamina` by absolute path (Claude
Code's PATH may not include a virtual environment). Project scope:
`<project>/.claude/settings.json` (the project root of lamina.config), a file meant to be
committed, so nothing of this machine goes in: the command is `lamina` from PATH, and where a
teammate has no Lamina, SessionStart says how to get it instead of every event failing.

The file is read, Lamina's entries are added to (or removed from) its `hooks`, and it is
written back atomically; other settings and other tools' hooks stay as they were. Uninstalling
leaves the file as it was before: a file that held nothing else is removed again. A file that
is not valid JSON is left alone with an error, never replaced.

Each command sets LAMINA_HOOK_ORIGIN to its scope, so a hook knows where it came from and
stands aside when another installation serves the session (see `detect.stands_aside`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ...config import project_root
from ...errors import ConfigError

__all__ = [
    "HOOK_EVENTS",
    "PLUGIN_COMMAND",
    "grouped_hooks_installed",
    "hook_command",
    "hooks_config",
    "install",
    "installed_scopes",
    "is_hook_command",
    "project_commands",
    "settings_hooks",
    "settings_path",
    "uninstall",
]

HOOK_EVENTS: Mapping[str, int] = {
    "SessionStart": 10,
    "UserPromptSubmit": 10,
    "Stop": 10,
    "SubagentStop": 10,
    "PreCompact": 10,
    "SessionEnd": 2,
}
"""The events Lamina handles, with the timeout Claude Code gives the hook (seconds). A prompt
hook stops itself after 3 s (LAMINA_HOOK_TIME_LIMIT); the retaining events return as soon as
a detached worker is started. SessionEnd hooks get 1.5 s whatever is asked (and a plugin cannot
raise it), which is why that event only ever starts the worker."""

PLUGIN_COMMAND = '"${CLAUDE_PLUGIN_ROOT}/scripts/run-lamina" hook'
"""How the plugin's hooks/hooks.json runs the hook: through the plugin's launcher, which finds
the installed `lamina` or tells the user how to install it."""

_OURS = re.compile(r"lamina[\"']?\s+(--home(=|\s+)('[^']*'|\S+)\s+)?hook(\s|;|$)")
"""A command that runs `lamina hook` (by any path, with or without --home, in any wrapper)."""

MISSING_ADVICE = (
    "Lamina (memory) is set up for this project, but the lamina command was not found on"
    ' PATH. Install it with: pipx install "lamina[mcp]", then start a new session.'
)


def hook_command(home: str | Path | None = None, origin: str = "user") -> str:
    """The user-scope command: this installation's `lamina`, by absolute path when it can be
    found (Claude Code's PATH may not include a virtual environment), else this Python at
    Lamina's module with `-P`, so the project a hook runs in is never on sys.path. `origin`
    goes into LAMINA_HOOK_ORIGIN (`codex-user` for Codex's hooks)."""
    import shlex
    import shutil

    found = shutil.which("lamina")
    # Only an absolute find: a PATH holding "." finds the project's own `lamina` as "./lamina".
    absolute = found is not None and Path(found).is_absolute()
    base = [found] if found and absolute else [sys.executable, "-P", "-m", "lamina"]
    if home is not None:
        base += ["--home", str(home)]
    return f"LAMINA_HOOK_ORIGIN={origin} " + " ".join(shlex.quote(part) for part in [*base, "hook"])


def project_commands() -> dict[str, str]:
    """The project-scope command of each event: `lamina` from PATH, nothing machine-specific.
    Without it, SessionStart prints one systemMessage saying how to install it; the other
    events do nothing."""
    import shlex

    run = "command -v lamina >/dev/null 2>&1 && LAMINA_HOOK_ORIGIN=project exec lamina hook"
    advice = shlex.quote(orjson.dumps({"systemMessage": MISSING_ADVICE}).decode())
    return {
        event: f"{run}; printf '%s\\n' {advice}" if event == "SessionStart" else f"{run}; true"
        for event in HOOK_EVENTS
    }


def hooks_config(command: str | Mapping[str, str] = "lamina hook") -> dict[str, Any]:
    """The `hooks` object for Claude Code's settings or a plugin's hooks/hooks.json: one
    command for every event, or a command per event."""
    config: dict[str, Any] = {}
    for event, timeout in HOOK_EVENTS.items():
        run = command if isinstance(command, str) else command[event]
        entry: dict[str, Any] = {"type": "command", "command": run, "timeout": timeout}
        config[event] = [{"hooks": [entry]}]
    return config


def settings_path(
    scope: str, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Path:
    environ = os.environ if env is None else env
    if scope == "user":
        return Path(environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / ("settings.json")
    if scope == "project":
        return project_root(directory) / ".claude" / "settings.json"
    raise ConfigError(f"unknown scope {scope!r} (user or project)")


def is_hook_command(command: str) -> bool:
    """Whether a hook's command runs `lamina hook` (by any path, in any wrapper)."""
    return _OURS.search(command) is not None


def _is_ours(entry: Any) -> bool:
    command = entry.get("command") if isinstance(entry, Mapping) else None
    return isinstance(command, str) and is_hook_command(command)


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); fix it, Lamina will not replace it"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def _save(path: Path, data: Mapping[str, Any]) -> None:
    import tempfile  # here: the prompt hook reads these settings, only installs write them

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings-", suffix=".json")
    with os.fdopen(fd, "wb") as handle:
        handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    Path(tmp).replace(path)


def _without_ours(hooks: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            cleaned[event] = groups
            continue
        kept_groups = []
        for group in groups:
            if isinstance(group, Mapping) and isinstance(group.get("hooks"), list):
                entries = [e for e in group["hooks"] if not _is_ours(e)]
                if entries:
                    kept_groups.append({**group, "hooks": entries})
            else:
                kept_groups.append(group)
        if kept_groups:
            cleaned[event] = kept_groups
    return cleaned


def install(
    scope: str,
    *,
    directory: str | Path | None = None,
    command: str | Mapping[str, str] | None = None,
) -> Path:
    """Add Lamina's hooks (replacing an older Lamina entry, keeping everything else). The
    command defaults to `hook_command()` for the user's settings and `project_commands()` for
    a project's."""
    path = settings_path(scope, directory)
    data = _load(path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object")
    merged = _without_ours(hooks)
    default = project_commands() if scope == "project" else hook_command()
    for event, groups in hooks_config(command or default).items():
        merged.setdefault(event, []).extend(groups)
    data["hooks"] = merged
    _save(path, data)
    return path


def uninstall(scope: str, *, directory: str | Path | None = None) -> tuple[Path, bool]:
    """Remove Lamina's hooks; returns the file and whether anything was removed."""
    path = settings_path(scope, directory)
    if not path.exists():
        return path, False
    data = _load(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return path, False
    cleaned = _without_ours(hooks)
    changed = cleaned != hooks
    if cleaned:
        data["hooks"] = cleaned
    else:
        data.pop("hooks", None)
    if changed and not data:
        # The file held nothing but Lamina's hooks: it goes, as it came (and so does an
        # emptied .claude directory of a project).
        path.unlink()
        if scope == "project":
            with contextlib.suppress(OSError):
                path.parent.rmdir()
    elif changed:
        _save(path, data)
    return path, changed


def installed_scopes(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, bool]:
    """Where Lamina's hooks are installed now (for `lamina status`)."""
    return {
        scope: grouped_hooks_installed(settings_path(scope, directory, env))
        for scope in ("user", "project")
    }


def settings_hooks(path: Path) -> dict[str, Any]:
    """The `hooks` object of a settings file; empty when there is none or the file cannot be
    read."""
    try:
        hooks = _load(path).get("hooks", {})
    except ConfigError:
        return {}
    return hooks if isinstance(hooks, dict) else {}


def grouped_hooks_installed(path: Path) -> bool:
    """Whether a settings file laid out as Claude Code's and Gemini's are (event -> groups ->
    `hooks`) holds a Lamina hook."""
    for groups in settings_hooks(path).values():
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            if isinstance(entries, list) and any(_is_ours(entry) for entry in entries):
                return True
    return False
