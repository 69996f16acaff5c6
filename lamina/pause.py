"""Memory paused for a project (its bank) or one session: the hooks neither recall nor retain
for it until it is resumed.

The state is one small file in the data directory, `paused.json`, written by `lamina pause` /
`lamina resume` (and the MCP tools and the plugin's slash commands, which call the same
functions) and read by every hook event: a missing file (nothing paused) costs one failed
`open`. A file another user wrote, or one open to other users' writes, is not trusted and
pauses nothing.

    {"banks": {"inkwell-3f2a91c0": {"since": "2026-03-01T10:00:00+00:00",
                                    "directory": "/home/me/src/inkwell"}},
     "sessions": {"7c1e4b2a-...": {"since": "..."}}}
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .errors import InputError
from .owned import private_dir, read_owned, write_private

__all__ = ["PAUSE_FILE", "pause", "pause_reason", "paused", "resume"]

PAUSE_FILE = "paused.json"


def paused(home: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """What is paused: `{"banks": {name: info}, "sessions": {id: info}}` (both empty when
    nothing is, or when the file is damaged or not this user's)."""
    found: dict[str, dict[str, dict[str, Any]]] = {"banks": {}, "sessions": {}}
    try:
        data = orjson.loads(read_owned(home / PAUSE_FILE))
    except (OSError, orjson.JSONDecodeError):
        return found
    if isinstance(data, dict):
        for kind in found:
            entries = data.get(kind)
            if isinstance(entries, dict):
                found[kind] = {str(k): v if isinstance(v, dict) else {} for k, v in entries.items()}
    return found


def pause_reason(home: Path, bank: str, session: str = "") -> str | None:
    """Why the hooks do nothing for this bank and session ("session paused", "project paused"),
    or None when neither is paused."""
    state = paused(home)
    if session and session in state["sessions"]:
        return f"memory paused for session {session} (lamina resume --session {session})"
    if bank in state["banks"]:
        return f"memory paused for project bank {bank} (lamina resume)"
    return None


def _save(home: Path, state: dict[str, dict[str, dict[str, Any]]]) -> None:
    private_dir(home)
    temporary = home / f".{PAUSE_FILE}.{os.getpid()}"
    try:
        write_private(temporary, orjson.dumps(state, option=orjson.OPT_INDENT_2).decode())
        temporary.replace(home / PAUSE_FILE)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _target(bank: str | None, session: str | None) -> tuple[str, str]:
    if (bank is None) == (session is None):
        raise InputError("pause or resume either a project's bank or one session, not both")
    if session is not None:
        if not session.strip() or len(session) > 200 or any(ord(c) < 32 for c in session):
            raise InputError(f"not a session id: {session!r}")
        return "sessions", session
    assert bank is not None
    return "banks", bank


def pause(
    home: Path, *, bank: str | None = None, session: str | None = None, directory: str = ""
) -> dict[str, Any]:
    """Pause a bank (a project's) or a session; returns what is paused now (as `paused`
    describes it, with `already` when it was before)."""
    kind, name = _target(bank, session)
    state = paused(home)
    already = name in state[kind]
    if not already:
        info: dict[str, Any] = {"since": datetime.now(UTC).isoformat(timespec="seconds")}
        if directory:
            info["directory"] = directory
        state[kind][name] = info
        _save(home, state)
    return {"paused": kind[:-1], "name": name, "already": already, **state[kind][name]}


def resume(home: Path, *, bank: str | None = None, session: str | None = None) -> bool:
    """Resume a bank or a session; False when it was not paused."""
    kind, name = _target(bank, session)
    state = paused(home)
    if name not in state[kind]:
        return False
    del state[kind][name]
    _save(home, state)
    return True
