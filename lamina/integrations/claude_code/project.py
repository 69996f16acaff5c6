"""Which project, and so which bank, a Claude Code hook event belongs to.

The payload's `cwd` follows the agent's own `cd` (a Stop after `cd /tmp` says `cwd=/tmp`), so it
cannot name the project. Claude Code gives every hook `CLAUDE_PROJECT_DIR`, the directory the
session was started in, which stays put: that is the project when it is set. Otherwise the
directory of the session's first event is used, and remembered for the rest of the session, so
one session never spreads over two banks. Either way the bank is the rule of
`lamina.config.default_bank` (the git root, `LAMINA_BANK` and the config file's `[banks]` win).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config import default_bank
from ...owned import private_dir, write_private

if TYPE_CHECKING:
    from ...config import Settings

__all__ = ["hook_bank", "session_directory"]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120] or "session"


def session_directory(
    payload: Mapping[str, Any], home: Path, env: Mapping[str, str] | None = None
) -> str | None:
    """The project directory of this event's session (None: the current directory)."""
    environ = os.environ if env is None else env
    project = environ.get("CLAUDE_PROJECT_DIR") or ""
    if project and Path(project).is_dir():
        return project
    cwd = str(payload.get("cwd") or "") or None
    session = str(payload.get("session_id") or "")
    if not session:
        return cwd
    pinned = home / "sessions" / f"{_safe(session)}.project"
    with contextlib.suppress(OSError):
        known = pinned.read_text(encoding="utf-8").strip()
        if known:
            return known
    if cwd:
        with contextlib.suppress(OSError):
            private_dir(pinned.parent)
            write_private(pinned, cwd + "\n")
    return cwd


def hook_bank(
    payload: Mapping[str, Any],
    settings: Settings,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> str:
    """The bank this event's session reads and writes, by the hook's settings (`cwd`: the
    hook process's working directory, when another process answers for it)."""
    return default_bank(session_directory(payload, settings.home, env) or cwd, settings)
