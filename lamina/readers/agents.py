"""What the readers of other coding agents' sessions (Codex, Gemini CLI, Copilot CLI) share.

Those agents put text into user-role messages that nobody typed: the environment
(`<environment_context>`), project instructions (AGENTS.md, `<user_instructions>`), hook output
(`<hook_context>`), IDE state ("# Context from my IDE setup"). Such text is kept in the message
as a `context` block (an `UnknownBlock` whose data holds `source` and `text`), never as a
`TextBlock`: conversational text (lamina.turns) reads only text blocks, so injected context never
starts a turn and is never retained as the user's words, while the message still holds
everything the record held.

Each of these readers can also say which agent and session a file is from
(`document_metadata`), which retain stores with the document.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NotRequired, TypedDict, Unpack

import orjson

from ..messages import Block, Kind, Message, Role, Source, TextBlock, UnknownBlock, parse_timestamp
from ..turns import classify
from .base import IdMaker, Line, WarningSink, line_source

__all__ = [
    "CONTEXT_BLOCK",
    "IdMaker",
    "MessageParts",
    "context_block",
    "injected_sources",
    "line_source",
    "record_digest",
    "said_text",
    "strip_context_tags",
    "text_or_none",
]

CONTEXT_BLOCK = "context"
"""The `UnknownBlock.type` of text a host injected into a user-role message."""


def context_block(text: str, source: str) -> UnknownBlock:
    """Injected text kept in a message without being anyone's words."""
    return UnknownBlock(CONTEXT_BLOCK, {"source": source, "text": text})


def injected_sources(blocks: tuple[Block, ...]) -> list[str]:
    """The sources of the context blocks among `blocks`, in order."""
    return [
        str(b.data.get("source"))
        for b in blocks
        if isinstance(b, UnknownBlock) and b.type == CONTEXT_BLOCK
    ]


def said_text(blocks: tuple[Block, ...]) -> str:
    """The text blocks joined (what a reader kept as someone's words)."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


_CONTEXT_TAGS = (
    "hook_context",
    "session_context",
    "environment_context",
    "user_instructions",
)
_TAGGED = re.compile(
    r"<(" + "|".join(_CONTEXT_TAGS) + r")(?:\s[^<>]*)?>.*?</\1\s*>", re.DOTALL | re.IGNORECASE
)


def strip_context_tags(text: str) -> tuple[str, list[tuple[str, str]]]:
    """`text` without the tagged blocks agents inject (`<hook_context>`, `<system_reminder>`,
    ...), and those blocks as (tag, block text)."""
    if "<" not in text:
        return text, []
    found = [(m.group(1).lower(), m.group(0)) for m in _TAGGED.finditer(text)]
    if not found:
        return text, []
    return _TAGGED.sub("", text), found


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def record_digest(record: Any, kind: str) -> str:
    """A stable id for a record that has none of its own."""
    raw = orjson.dumps(record, option=orjson.OPT_SORT_KEYS, default=str)
    return f"{kind}:{hashlib.sha1(raw).hexdigest()[:20]}"


class MessageParts(TypedDict):
    """What a reader decides of each message it builds (`AgentBuilder.make` adds where and
    when it was found, and the session)."""

    id: str
    """Wanted id (made unique within the file)."""
    role: Role
    blocks: Sequence[Block]
    kind: Kind | None
    """None: classified from what the message holds."""
    record_type: str
    subtype: NotRequired[str | None]
    model: NotRequired[str | None]


class AgentBuilder:
    """What the Codex, Gemini and Copilot readers share while turning records into messages:
    the file, where warnings go, each message's position, ids unique within the file and the
    session the file belongs to (once a record names it)."""

    def __init__(self, path: str, warn: WarningSink) -> None:
        self.path = path
        self.warn = warn
        self.index = 0
        self.ids = IdMaker()
        self.session: str | None = None

    def make(
        self,
        *,
        timestamp: datetime | None,
        source: Source,
        records: tuple[Mapping[str, Any], ...],
        **parts: Unpack[MessageParts],
    ) -> Message:
        """The next message of the file (`kind` None: classified from what it holds)."""
        kind = parts["kind"]
        message = Message(
            id=self.ids(parts["id"]),
            role=parts["role"],
            blocks=tuple(parts["blocks"]),
            kind=kind or Kind.META,
            timestamp=timestamp,
            source=source,
            record_type=parts["record_type"],
            subtype=parts.get("subtype"),
            session_id=self.session,
            model=parts.get("model"),
            records=records,
        )
        if kind is None:
            message = replace(message, kind=classify(message))
        self.index += 1
        return message

    def from_line(
        self, line: Line, record: Mapping[str, Any], **parts: Unpack[MessageParts]
    ) -> Message:
        """The next message, built from the one JSON line that holds `record`."""
        return self.make(
            timestamp=parse_timestamp(record.get("timestamp")),
            source=line_source(self.path, self.index, line),
            records=(record,),
            **parts,
        )


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}
