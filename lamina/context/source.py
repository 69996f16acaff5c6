"""Where a stored log's transcript file was read up to, so the next compile reads only what
was appended since (as retain does for a bank's documents, with a cursor of the same shape).

    cursor = FileCursor.of(state.get("source"))
    read = read_since(path, "claude-code", cursor)
    read.messages      # the messages of the bytes past the cursor (all of them when reread)
    read.cursor        # to keep with the log's state once those messages are stored

A Claude Code transcript (JSON Lines) is read from the first record of the last message read
last time, so a message whose streamed lines were still being written is read whole again (it
keeps its id, which the log holds once); the file's first and last bytes before the cursor
must be as they were (a fingerprint), else it is read from its start. A file in any other
format is one document: it is read again only when its bytes changed. Either way a message
read twice is stored once (the log skips ids it holds), so a cursor that lags behind what was
stored (a process killed between the two) costs a re-read, never a duplicate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ReadWarning
from ..fingerprint import file_hash, prefix_fingerprint
from ..messages import JSONValue, Message

__all__ = ["FileCursor", "SourceRead", "read_since", "unchanged_format"]

CURSOR_VERSION = 1


@dataclass(frozen=True, slots=True)
class FileCursor:
    """How far a log's source file was read: `path` (resolved), `resume` (the byte offset of
    the last message's first record) and its `line`, `size` of the file then, a `fingerprint`
    of the bytes up to `resume` (JSON Lines) or of the whole file (other formats), the
    `format`, and whether the file is a subagent's own transcript."""

    path: str
    format: str
    resume: int = 0
    line: int = 1
    size: int = 0
    fingerprint: str = ""
    subagent: bool | None = None

    @classmethod
    def of(cls, value: Any) -> FileCursor | None:
        """The cursor kept in a log's state (None when there is none, or it is unreadable)."""
        if not isinstance(value, Mapping) or value.get("version") != CURSOR_VERSION:
            return None
        try:
            subagent = value.get("subagent")
            return cls(
                path=str(value["path"]),
                format=str(value["format"]),
                resume=int(value["resume"]),
                line=int(value["line"]),
                size=int(value["size"]),
                fingerprint=str(value["fingerprint"]),
                subagent=subagent if isinstance(subagent, bool) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "version": CURSOR_VERSION,
            "path": self.path,
            "format": self.format,
            "resume": self.resume,
            "line": self.line,
            "size": self.size,
            "fingerprint": self.fingerprint,
            "subagent": self.subagent,
        }


@dataclass
class SourceRead:
    """What `read_since` read: the new `messages`, the `cursor` after them, whether the file
    was `reread` from its start, and the reader's `warnings`."""

    messages: list[Message]
    cursor: FileCursor
    reread: bool
    warnings: list[ReadWarning] = field(default_factory=list)


def _subagent(messages: list[Message]) -> bool | None:
    """What the Claude Code reader decided from the first user or assistant record."""
    for message in messages:
        if message.record_type in ("user", "assistant"):
            return message.is_sidechain
    return None


def unchanged_format(path: str, cursor: FileCursor | None) -> str | None:
    """The format `cursor` read `path` in, when the file is still as it was then (the same
    size, the same bytes before the cursor; for a format other than JSON Lines, the same
    hash): detecting it again would find the same reader, and `read_since` reads nothing.
    None otherwise."""
    if cursor is None or cursor.path != str(Path(path).resolve()):
        return None
    try:
        if Path(path).stat().st_size != cursor.size:
            return None
        if cursor.format != "claude-code":
            same = file_hash(path) == cursor.fingerprint
        else:
            same = prefix_fingerprint(path, cursor.resume) == cursor.fingerprint
    except OSError:
        return None
    return cursor.format if same else None


def read_since(path: str, format: str, cursor: FileCursor | None) -> SourceRead:
    """The messages of `path` (in `format`, a reader's name) past `cursor` (see the module's
    doc); all of them when there is no usable cursor."""
    resolved = str(Path(path).resolve())
    size = Path(path).stat().st_size
    usable = cursor if cursor is not None and cursor.path == resolved else None
    if usable is not None and usable.format != format:
        usable = None
    warnings: list[ReadWarning] = []
    if format != "claude-code":
        digest = file_hash(path)
        after = FileCursor(resolved, format, size=size, fingerprint=digest)
        if usable is not None and usable.fingerprint == digest:
            return SourceRead([], after, reread=False)
        from ..readers import read_transcript

        transcript = read_transcript(path, format=format, on_warning=warnings.append)
        return SourceRead(transcript.messages, after, reread=usable is not None, warnings=warnings)
    start, line, subagent = 0, 1, None
    if (
        usable is not None
        and usable.resume <= size
        and prefix_fingerprint(path, usable.resume) == usable.fingerprint
    ):
        if size == usable.size:
            return SourceRead([], usable, reread=False)
        start, line, subagent = usable.resume, usable.line, usable.subagent
    from ..readers.claude_code import read_claude_code

    messages = list(
        read_claude_code(path, warnings.append, start=start, first_line=line, subagent=subagent)
    )
    if start == 0:
        subagent = _subagent(messages)
    last = messages[-1] if messages else None
    resume = start
    resume_line = line
    if last is not None and last.source.offset is not None:
        resume = last.source.offset
        resume_line = last.source.line or line
    after = FileCursor(
        resolved,
        format,
        resume=resume,
        line=resume_line,
        size=size,
        fingerprint=prefix_fingerprint(path, resume),
        subagent=subagent,
    )
    reread = usable is not None and start == 0
    return SourceRead(messages, after, reread=reread, warnings=warnings)
