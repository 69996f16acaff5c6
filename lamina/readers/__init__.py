"""Readers turn transcript files into `Message`s; `detect_format` picks one by content.

Built-in formats: `claude-code` (JSONL session transcripts), `codex` (Codex CLI rollouts),
`gemini` (Gemini CLI chats), `copilot` (Copilot CLI events), `anthropic` and `openai` (message
lists as JSON or JSONL), `locomo` (LoCoMo conversations). Add a format with `register_reader`.
A message list held in memory (a Python list, or SDK objects) is read with
`read_message_list`, no file needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import ReadWarning, UnknownFormatError
from ..messages import Message
from .base import (
    Reader,
    WarningSink,
    get_reader,
    read_head,
    register_reader,
    registered_readers,
)

__all__ = [
    "Reader",
    "Transcript",
    "best_reader",
    "detect_format",
    "get_reader",
    "read_message_list",
    "read_messages",
    "read_transcript",
    "reader_for",
    "register_reader",
    "registered_readers",
]


def _looks_binary(head: bytes) -> bool:
    """Many NUL bytes, or many bytes that are not UTF-8: a binary file, not a damaged
    transcript (a transcript with a few bad lines, a stray NUL among them, is read, with a
    warning for each such line)."""
    sample = head[:8192]
    if not sample:
        return False
    if sample.count(b"\x00") > max(8, len(sample) // 100):
        return True
    text = sample.decode("utf-8", errors="replace")
    return text.count("\ufffd") > max(8, len(text) // 20)


def best_reader(head: bytes, path: str) -> Reader | None:
    """The registered reader most confident about a source starting with `head`, if any is."""
    best: tuple[float, Reader] | None = None
    for reader in registered_readers().values():
        try:
            score = reader.sniff(head, path)
        except Exception:
            if type(reader).__module__.startswith("lamina."):
                raise  # a bug of ours must be loud
            continue  # a third-party sniffer must not break detection of every file
        if score > 0 and (best is None or score > best[0]):
            best = (score, reader)
    return None if best is None else best[1]


def _only_claude_code(head: bytes, path: str) -> Reader | None:
    """The Claude Code reader when it recognises `head` and no reader is registered yet, so
    that a hook reading its session does not load the other readers: it is the first built-in
    reader, and its score for a file it recognises (0.95) is above any other built-in's
    highest (0.9), so detection among all would pick it too."""
    from . import base

    if base._REGISTRY:
        return None
    from .claude_code import ClaudeCodeReader

    reader = ClaudeCodeReader()
    return reader if reader.sniff(head, path) > 0 else None


def detect_format(path: str) -> Reader:
    """The registered reader most confident about this file; UnknownFormatError if none is."""
    head = read_head(path)
    if not head.strip():
        raise UnknownFormatError(path, "file is empty")
    if _looks_binary(head):
        raise UnknownFormatError(path, "binary data, not a transcript")
    found = _only_claude_code(head, path) or best_reader(head, path)
    if found is None:
        known = ", ".join(sorted(registered_readers()))
        raise UnknownFormatError(
            path, f"not a transcript format Lamina knows (pass --format; known: {known})"
        )
    return found


def reader_for(path: str, format: str | None = None, *, option: str = "--format") -> Reader:
    """The reader for this file: the one named `format`, else the detected one
    (`detect_format`). A named format the file plainly is not (its reader does not recognise
    the file and another reader does) is an `UnknownFormatError` naming the file, the format
    and the one the file looks like, before anything is read or written: a Claude Code session
    read as OpenAI messages would only give warnings and no messages. A file that no reader
    recognises is left to the named one: that is what `--format` is for. `option` is how the
    error names the caller's way to name a format."""
    if format is None:
        return detect_format(path)
    reader = get_reader(format, path)
    head = read_head(path)
    if not head.strip() or _looks_binary(head) or reader.sniff(head, path) > 0:
        return reader
    found = best_reader(head, path)
    if found is None or found.name == reader.name:
        return reader
    raise UnknownFormatError(
        path,
        f"not in the {format} format (it looks like {found.name}; leave out {option} to detect it)",
    )


def _collect(sink: list[ReadWarning]) -> WarningSink:
    return sink.append


def read_messages(
    path: str,
    *,
    format: str | None = None,
    warn: WarningSink | None = None,
) -> Iterator[Message]:
    """Stream the messages of a transcript file. Damaged records go to `warn` (default: dropped
    after counting nowhere, so pass a sink if you care) and reading goes on."""
    reader = get_reader(format, path) if format else detect_format(path)
    return reader.read(path, warn or (lambda _w: None))


@dataclass
class Transcript:
    """A whole transcript read into memory, with what went wrong along the way."""

    path: str
    format: str
    messages: list[Message]
    warnings: list[ReadWarning] = field(default_factory=list)


def read_transcript(
    path: str,
    *,
    format: str | None = None,
    on_warning: Callable[[ReadWarning], None] | None = None,
) -> Transcript:
    reader = get_reader(format, path) if format else detect_format(path)
    warnings: list[ReadWarning] = []

    def warn(w: ReadWarning) -> None:
        warnings.append(w)
        if on_warning is not None:
            on_warning(w)

    messages = list(reader.read(path, warn))
    return Transcript(path, reader.name, messages, warnings)


def read_message_list(
    data: Any,
    *,
    format: str | None = None,
    on_warning: Callable[[ReadWarning], None] | None = None,
) -> Transcript:
    """A message list held in memory, read like a transcript file: no temporary file.

        transcript = read_message_list(messages, format="openai")   # or "anthropic", or None

    `data` is a list of messages in the Anthropic or OpenAI shape (or Claude Code records), or
    an object with `messages` (and Anthropic's `system`); SDK objects (an OpenAI
    `ChatCompletionMessage`, an Anthropic response's content blocks) may stand for any part of
    it. `format` is detected as for a file when None. The transcript's `path` is `"messages"`;
    messages without an id of their own get `messages:<index>`."""
    from .values import DEFAULT_SOURCE, read_message_values

    warnings: list[ReadWarning] = []

    def warn(w: ReadWarning) -> None:
        warnings.append(w)
        if on_warning is not None:
            on_warning(w)

    name, messages = read_message_values(data, format=format, warn=warn)
    return Transcript(DEFAULT_SOURCE, name, messages, warnings)
