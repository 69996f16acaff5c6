"""`lamina install claude-code` / `lamina uninstall claude-code`: write Lamina's hooks into
Claude Code's settings, or take them out, without touching anything else there.

User scope: `~/.claude/settings.json`. Project scope: `<project>/.claude/settings.json` (the
project root of lamina.config). The file is read, Lamina's entries are added to (or removed
from) its `hooks`, and it is written back atomically; other settings and other tools' hooks
stay as they were. A file that is not valid JSON is left alone with an error, never replaced.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ...config import project_root
from ...errors import ConfigError

__all__ = ["HOOK_EVENTS", "hooks_config", "install", "settings_path", "uninstall"]

HOOK_EVENTS: Mapping[str, int | None] = {
    "SessionStart": None,
    "UserPromptSubmit": 10,
    "Stop": None,
    "SubagentStop": None,
    "PreCompact": None,
    "SessionEnd": None,
}
"""The events Lamina handles, with Claude Code's own timeout for the hook (seconds) where the
default is not right: a prompt hook stops itself after 3 s, Claude Code may wait up to 10."""

MARK = "lamina"


def hook_command(home: str | Path | None = None) -> str:
    """How Claude Code should run the hook: this installation's `lamina`, by absolute path when
    it can be found (Claude Code's PATH may not include a virtual environment)."""
    found = shutil.which("lamina")
    base = [found] if found else [sys.executable, "-m", "lamina"]
    if home is not None:
        base += ["--home", str(home)]
    return " ".join(shlex.quote(part) for part in [*base, "hook"])


def hooks_config(command: str = "lamina hook") -> dict[str, Any]:
    """The `hooks` object for Claude Code's settings or a plugin's hooks/hooks.json."""
    config: dict[str, Any] = {}
    for event, timeout in HOOK_EVENTS.items():
        entry: dict[str, Any] = {"type": "command", "command": command}
        if timeout is not None:
            entry["timeout"] = timeout
        config[event] = [{"hooks": [entry]}]
    return config


def settings_path(scope: str, directory: str | Path | None = None) -> Path:
    if scope == "user":
        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / (
            "settings.json"
        )
    if scope == "project":
        return project_root(directory) / ".claude" / "settings.json"
    raise ConfigError(f"unknown scope {scope!r} (user or project)")


def _is_ours(entry: Any) -> bool:
    command = entry.get("command") if isinstance(entry, Mapping) else None
    return isinstance(command, str) and MARK in command and command.rstrip().endswith(" hook")


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


def install(scope: str, *, directory: str | Path | None = None, command: str | None = None) -> Path:
    """Add Lamina's hooks (replacing an older Lamina entry, keeping everything else)."""
    path = settings_path(scope, directory)
    data = _load(path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object")
    merged = _without_ours(hooks)
    for event, groups in hooks_config(command or hook_command()).items():
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
    if changed:
        _save(path, data)
    return path, changed


def installed_scopes(directory: str | Path | None = None) -> dict[str, bool]:
    """Where Lamina's hooks are installed now (for `lamina status`)."""
    found: dict[str, bool] = {}
    for scope in ("user", "project"):
        path = settings_path(scope, directory)
        try:
            hooks = _load(path).get("hooks", {})
        except ConfigError:
            found[scope] = False
            continue
        found[scope] = isinstance(hooks, dict) and any(
            _is_ours(entry)
            for groups in hooks.values()
            if isinstance(groups, list)
            for group in groups
            if isinstance(group, Mapping)
            for entry in group.get("hooks", [])
        )
    return found
