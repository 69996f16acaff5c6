"""The injection log: what the prompt hook injected on which prompt, and why nothing when it
injected nothing. `lamina injections` lists it, `lamina status` sums it up, and the inspector
shows it beside the hooks' recent runs.

One JSON object per UserPromptSubmit the hook answers (the cold path, the warm client, the warm
server's `hook` op: each writes through `record`), in `<data dir>/logs/injections.jsonl` (mode
0600). When the file passes `MAX_BYTES` it becomes `injections.jsonl.1` (the one before is
dropped): the log keeps the newest 2 to 4 MB, some thousands of prompts. A file works for
SQLite and PostgreSQL users alike and costs the hook one append, not a database write.

Fields: `at` (UTC, ISO 8601), `session`, `bank`, `prompt` (its first `PROMPT_CHARS` characters,
`<private>` spans left out and secrets redacted by the rules retain uses, before it is cut; None
when the project is excluded or memory is paused: what the user keeps out is not written here
either), `prompt_chars`, `injected` (whether a block was printed), `memories` (each injected
memory's `id`, `kind`, `document`, `score`, `tokens`, and the ids it `replaces`), `tokens`
(theirs, summed), `chars` (of the printed block), `ms` (since the hook process started), `path`
(`cold`, `warm`, or `lexical-only` when the query was not embedded in time), and `reason`, why
nothing was injected: the relevance floor's reason, the time limit, a missing bank, a pause, an
exclusion, a trivial prompt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ...owned import private_dir, private_opener

__all__ = ["MAX_BYTES", "PROMPT_CHARS", "injections_path", "preview", "read_injections", "record"]

MAX_BYTES = 2_000_000
"""Past this size the log is rotated (one older file is kept)."""
PROMPT_CHARS = 160
"""How much of a prompt the log keeps."""


def injections_path(home: Path) -> Path:
    return home / "logs" / "injections.jsonl"


_redactor: Any = None
_redactor_lock = threading.Lock()


def _redact(text: str) -> str:
    """`text` with its secrets replaced, by the rules retain uses (compiled once a process:
    the warm server pays for them once)."""
    global _redactor
    with _redactor_lock:
        if _redactor is None:
            from ...text.redact import Redactor

            _redactor = Redactor()
        redactor = _redactor
    redacted: str = redactor.redact(text)[0]
    return redacted


def preview(prompt: str) -> str:
    """What the log keeps of a prompt: private spans out, secrets redacted (of the whole
    prompt, so a cut never splits a secret in two), whitespace folded, then cut short."""
    from ...private import strip_private

    text = strip_private(prompt)[0]
    text = " ".join(_redact(text).split())
    return text if len(text) <= PROMPT_CHARS else text[: PROMPT_CHARS - 1] + "…"


def preview_ahead(prompt: str) -> Callable[[], str | None]:
    """`preview` computed on a thread of its own (the cold path's recall runs meanwhile);
    the returned function waits for it (None when it failed)."""
    box: dict[str, str] = {}

    def work() -> None:
        with contextlib.suppress(Exception):
            box["text"] = preview(prompt)

    thread = threading.Thread(target=work, name="lamina-preview", daemon=True)
    thread.start()

    def result() -> str | None:
        thread.join(2.0)
        return box.get("text")

    return result


def record(home: Path, entry: dict[str, Any]) -> None:
    """Append one prompt's entry (never raises: the hook fails open)."""
    path = injections_path(home)
    line = orjson.dumps({"at": datetime.now(UTC).isoformat(), **entry}) + b"\n"
    with contextlib.suppress(OSError):
        private_dir(path.parent)
        with open(path, "ab", opener=private_opener) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.write(line)
                handle.flush()
                size = os.fstat(handle.fileno()).st_size
                # Rotate once: only while the file at `path` is still the one written here.
                if size > MAX_BYTES and path.stat().st_ino == os.fstat(handle.fileno()).st_ino:
                    path.replace(path.with_name(path.name + ".1"))
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def read_injections(
    home: Path, *, session: str | None = None, last: int | None = None
) -> list[dict[str, Any]]:
    """The log's entries, oldest first (`session`: that session's only; `last`: the newest
    that many). A line cut short (a hook killed while writing) is skipped."""
    path = injections_path(home)
    entries: list[dict[str, Any]] = []
    for source in (path.with_name(path.name + ".1"), path):
        try:
            data = source.read_bytes()
        except OSError:
            continue
        for raw in data.splitlines():
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            if session is not None and entry.get("session") != session:
                continue
            entries.append(entry)
    if last is not None:
        entries = entries[-last:] if last > 0 else []
    return entries
