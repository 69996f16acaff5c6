"""What a caller hands over in code or over the wire, as messages to retain: a note (one plain
text) or a message list (plain dicts in the OpenAI or Anthropic shape, SDK objects, Claude Code
records). The Python API, HTTP and MCP all retain through these, so a note or a message gets the
same id whichever way it came, and retaining it again adds nothing.

    message = note("We chose SQLite for the embedded default.", "decisions")
    transcript = message_list([{"role": "user", "content": "Which database?"}], "chat-1")
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ..errors import InputError, ReadWarning
from ..messages import Kind, Message, Role, TextBlock
from ..readers import Transcript
from ..readers.values import DEFAULT_SOURCE, plain_values, read_message_values, with_content_ids

__all__ = ["is_messages", "message_list", "note"]


def note(
    text: str, document: str, *, speaker: str | None = None, when: datetime | None = None
) -> Message:
    """A note as a user message of `document`: its id comes from the document and the text
    (the same note twice is one record), its time is `when` (now by default), and `speaker`
    says who said or decided it. `InputError` for a text of only whitespace."""
    if not text.strip():
        raise InputError("text is empty")
    from ..turns import classify

    digest = hashlib.sha1(f"{document}\x00{text}".encode()).hexdigest()[:20]
    message = Message(
        id=f"note:{digest}",
        role=Role.USER,
        blocks=(TextBlock(text),),
        kind=Kind.PROMPT,
        timestamp=when or datetime.now(UTC),
        speaker=speaker,
    )
    return replace(message, kind=classify(message))


def is_messages(messages: Any) -> bool:
    """`messages` is a sequence of Lamina `Message`s already (empty included)."""
    return (
        isinstance(messages, Sequence)
        and not isinstance(messages, str | bytes)
        and all(isinstance(m, Message) for m in messages)
    )


def message_list(messages: Any, document: str, format: str | None = None) -> Transcript:
    """Messages as a caller holds them, read. A sequence of Lamina `Message`s (an empty one
    too) passes as it is; anything else (plain dicts in the OpenAI or Anthropic shape, SDK
    objects, Claude Code records, or an object with `messages`) is read as
    `lamina.read_message_list` reads it, `format` detected when None. A message without an id
    of its own gets one from its content, scoped by `document`
    (lamina.readers.values.with_content_ids), so retaining the whole conversation again, or
    only its new messages, stores each message once.

    `InputError` when what is read holds no message at all (the error names the first
    reason), so nothing is retained as an empty document."""
    if is_messages(messages):
        return Transcript(DEFAULT_SOURCE, format or "", list(messages), [])
    values = plain_values(messages)
    if format != "claude-code":
        values = with_content_ids(document, values)
    warnings: list[ReadWarning] = []
    name, read = read_message_values(values, format=format, warn=warnings.append)
    if not read:
        why = f": {warnings[0].reason}" if warnings else ""
        raise InputError(f"none of the {len(values)} values given read as a message{why}")
    return Transcript(DEFAULT_SOURCE, name, read, warnings)
