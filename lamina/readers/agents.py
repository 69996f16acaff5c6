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
from collections.abc import Mapping
from typing import Any

import orjson

from ..messages import Block, Source, TextBlock, UnknownBlock
from .base import Line

__all__ = [
    "CONTEXT_BLOCK",
    "IdMaker",
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


class IdMaker:
    """Message ids unique within one file: a repeated id gets `#2`, `#3`, ..."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, wanted: str) -> str:
        candidate, n = wanted, 1
        while candidate in self.seen:
            n += 1
            candidate = f"{wanted}#{n}"
        self.seen.add(candidate)
        return candidate


def line_source(path: str, index: int, first: Line, last: Line | None = None) -> Source:
    """Where a message built from one line (or from `first` through `last`) came from."""
    end = last or first
    return Source(
        path=path,
        index=index,
        line=first.number,
        end_line=end.number,
        offset=first.offset,
        end_offset=end.end,
    )


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}
