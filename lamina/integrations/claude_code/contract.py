"""The limits of Claude Code's hook contract, kept in one place.

- `additionalContext` over 10,000 characters is moved to a file by Claude Code and the model
  sees only a preview, so what Lamina injects is clamped under that, whatever the token budget:
  whole memories are dropped from the lowest ranked up.
- stderr of a hook that exits 0 reaches only Claude Code's debug log; a `systemMessage` reaches
  the user. A failure the user can act on (a broken config file, a database that cannot be
  opened, a retain that keeps failing) is shown as a `systemMessage` once per session, not on
  every prompt; the details stay in the hook log.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ...errors import ConfigError, StoreError
from ...owned import private_dir, private_opener, write_private

if TYPE_CHECKING:
    from ...bank.recall import RecallResult

__all__ = [
    "MAX_CONTEXT_CHARS",
    "HookLog",
    "Notices",
    "clamp_block",
    "clamp_memories",
    "user_should_know",
    "with_system_message",
]

MAX_CONTEXT_CHARS = 9_500
"""What Lamina injects at most: under Claude Code's 10,000, with room for its own wrapping."""


def clamp_memories(result: RecallResult, limit: int = MAX_CONTEXT_CHARS) -> str:
    """The memory block of the best-ranked hits that fit in `limit` characters ("" for none):
    whole memories, dropped from the lowest ranked up; one memory alone too long is cut."""
    return clamped(result, limit)[0]


def clamped(result: RecallResult, limit: int = MAX_CONTEXT_CHARS) -> tuple[str, int]:
    """`clamp_memories`, with how many memories the block holds."""
    hits = list(result.hits)
    if not hits:
        return "", 0
    block = result.block()
    if len(block) <= limit:
        return block, len(hits)
    fitting = replace(result, hits=hits[:1]).block()
    if len(fitting) > limit:
        return clamp_block(fitting, limit), 1
    shown = 1
    for count in range(2, len(hits) + 1):
        candidate = replace(result, hits=hits[:count]).block()
        if len(candidate) > limit:
            break
        fitting, shown = candidate, count
    return fitting, shown


def clamp_block(block: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    """A tagged block cut to `limit` characters, its closing tag kept."""
    if len(block) <= limit:
        return block
    closing = block[block.rfind("\n</") :] if "\n</" in block else ""
    return block[: limit - len(closing) - 2] + " …" + closing


def user_should_know(exc: BaseException) -> bool:
    """Failures the user can fix (configuration, the database, a broken installation), as
    against a malformed event from Claude Code, which only the log needs to hear about."""
    return isinstance(exc, ConfigError | StoreError | ImportError | PermissionError) or (
        type(exc).__module__.startswith(("sqlite3", "psycopg"))
    )


def with_system_message(output: str, message: str | None) -> str:
    """The hook's JSON output with a `systemMessage` added (or made, when there was none)."""
    if not message:
        return output
    data: dict[str, Any] = {}
    if output:
        with contextlib.suppress(orjson.JSONDecodeError):
            parsed = orjson.loads(output)
            if isinstance(parsed, dict):
                data = parsed
    data["systemMessage"] = message
    return orjson.dumps(data).decode()


class Notices:
    """Messages for the user, each shown once per session: `post` files one (the detached
    retain worker does, as it cannot speak to the user itself), `take` returns what this
    session has not been shown yet and marks it shown."""

    def __init__(self, home: Path) -> None:
        self.root = home / "logs" / "notices"

    @staticmethod
    def _key(session: str) -> str:
        return hashlib.sha1(session.encode()).hexdigest()[:16] if session else "no-session"

    def post(self, session: str, message: str) -> None:
        with contextlib.suppress(OSError):
            private_dir(self.root)
            pending = self.root / f"{self._key(session)}.pending"
            with open(pending, "a", encoding="utf-8", opener=private_opener) as handle:
                handle.write(message.replace("\n", " ")[:500] + "\n")

    def take(self, session: str, fresh: Sequence[str] = ()) -> str | None:
        """What to show now: `fresh` messages and any posted for the session, minus those this
        session has been shown already."""
        key = self._key(session)
        pending = self.root / f"{key}.pending"
        shown_file = self.root / f"{key}.shown"
        messages = list(fresh)
        with contextlib.suppress(OSError):
            messages += pending.read_text(encoding="utf-8").splitlines()
            pending.unlink()
        if not messages:
            return None
        shown: set[str] = set()
        with contextlib.suppress(OSError):
            shown = set(shown_file.read_text(encoding="utf-8").splitlines())
        new: list[str] = []
        for message in messages:
            digest = hashlib.sha1(message.encode()).hexdigest()[:12]
            if message and digest not in shown and message not in new:
                shown.add(digest)
                new.append(message)
        if not new:
            return None
        with contextlib.suppress(OSError):
            private_dir(self.root)
            write_private(shown_file, "\n".join(sorted(shown)) + "\n")
        return "\n".join(new)


class HookLog:
    """`<data dir>/logs/hooks.log`: one line per event handled, with the details of failures
    (`lamina status` shows its tail)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "logs" / "hooks.log"

    def write(self, event: str, session: str, message: str) -> None:
        with contextlib.suppress(OSError):
            private_dir(self.path.parent)
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            line = f"{stamp} {event or '-'} {session or '-'} {message}".replace("\n", " | ")
            with open(self.path, "a", encoding="utf-8", opener=private_opener) as handle:
                handle.write(line[:4000] + "\n")
