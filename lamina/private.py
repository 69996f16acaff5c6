"""What a user marks `<private>...</private>` is never kept: not in memories, the search
indexes, context logs, summaries or exports.

The tag is matched case-insensitively (`<PRIVATE>`, `< private >`); a span may run over many
lines; a `<private>` never closed hides the rest of its message, blocks after it included. A
message with nothing left once its private spans are gone (only private text) leaves no trace:
`hide_private` returns None for it. Tool calls and their results stay (so a request built from a
context log still pairs every tool_use with its tool_result), with their private text gone.

Every text a reader produces passes `hide_private_all` before it is kept: retain (files, message
lists, the hooks' incremental retain), context-log appends (compile with `--bank`, HTTP, MCP),
import, and export (for data kept before this rule existed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import orjson

from ._json import map_strings
from .messages import (
    Block,
    ImageBlock,
    Kind,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)

__all__ = ["has_private", "hide_private", "hide_private_all", "strip_private"]

_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.IGNORECASE)
_CONVERSATIONAL = frozenset({Kind.PROMPT, Kind.REPLY, Kind.TOOL_ACTIVITY})


def has_private(text: str) -> bool:
    """Whether a text holds a private tag (opening or closing)."""
    return _TAG.search(text) is not None


def strip_private(text: str, hidden: bool = False) -> tuple[str, bool]:
    """The text without its private spans, and whether a span is still open at its end.
    `hidden`: the text starts inside a span (one opened earlier in the message)."""
    if not hidden and _TAG.search(text) is None:
        return text, False
    if hidden and _TAG.search(text) is None:
        return "", True
    out: list[str] = []
    at = 0
    for match in _TAG.finditer(text):
        closing = bool(match.group(1))
        if hidden:
            if closing:
                hidden = False
                at = match.end()
        else:
            out.append(text[at : match.start()])
            at = match.end()
            hidden = not closing  # a stray closing tag is dropped, nothing else
    if not hidden:
        out.append(text[at:])
    kept = "".join(out)
    return ("" if not kept.strip() else kept), hidden


def _walk_json(value: Any, text: Callable[[str], str]) -> Any:
    """A JSON value with `text` applied to every string, keys left as they are."""
    return map_strings(value, lambda item, _key: text(item))


def _mentions(message: Message) -> bool:
    """Whether anything the message carries holds a private tag (one serialisation of its
    blocks and records; orjson leaves `<` and `>` as they are)."""
    for block in message.blocks:
        if isinstance(block, TextBlock):
            if _TAG.search(block.text):
                return True
        elif isinstance(block, ThinkingBlock):
            if _TAG.search(block.thinking):
                return True
        elif not isinstance(block, ImageBlock):
            data = block.input if isinstance(block, ToolUseBlock) else _block_data(block)
            if _TAG.search(orjson.dumps(data, default=str).decode()):
                return True
    rest = [message.tool_use_result, list(message.records)]
    return bool(_TAG.search(orjson.dumps(rest, default=str).decode()))


def _block_data(block: Block) -> Any:
    if isinstance(block, ToolResultBlock):
        return [_block_data(b) for b in block.content]
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return block.thinking
    if isinstance(block, UnknownBlock):
        return block.data
    return None


class _Hider:
    """Walks one message's texts in order, carrying an unclosed span from one to the next, and
    remembers what each text became so the same text in the source records becomes the same."""

    def __init__(self) -> None:
        self.hidden = False
        self.seen: dict[str, str] = {}

    def text(self, value: str) -> str:
        clean, self.hidden = strip_private(value, self.hidden)
        if clean != value:
            self.seen[value] = clean
        return clean

    def again(self, value: str) -> str:
        """A copy of a text seen in the blocks (records, Claude Code's tool result): what it
        became there, else the text without its own spans (hidden whole after an unclosed
        span in the blocks)."""
        if value in self.seen:
            return self.seen[value]
        if self.hidden:
            return ""
        return strip_private(value)[0]

    def block(self, item: Block) -> Block | None:
        """The block without private text; None for a text or thinking block left empty (and
        for an image inside a span)."""
        if isinstance(item, TextBlock):
            text = self.text(item.text)
            return TextBlock(text) if text else None
        if isinstance(item, ThinkingBlock):
            thinking = self.text(item.thinking)
            return replace(item, thinking=thinking) if thinking else None
        if isinstance(item, ToolUseBlock):
            return replace(item, input=_walk_json(item.input, self.text))
        if isinstance(item, ToolResultBlock):
            content = tuple(b for b in (self.block(c) for c in item.content) if b is not None)
            return replace(item, content=content)
        if isinstance(item, UnknownBlock):
            return replace(item, data=_walk_json(item.data, self.text))
        return None if self.hidden else item


def hide_private(message: Message) -> Message | None:
    """The message without its private spans; None when nothing of it is left."""
    if not _mentions(message):
        return message
    hider = _Hider()
    blocks = tuple(b for b in (hider.block(item) for item in message.blocks) if b is not None)
    if message.blocks and not blocks:
        return None
    clean = replace(
        message,
        blocks=blocks,
        tool_use_result=_walk_json(message.tool_use_result, hider.again),
        records=tuple(_walk_json(r, hider.again) for r in message.records),
    )
    if clean.kind in _CONVERSATIONAL:
        from .turns import classify  # a prompt whose words were all private is one no longer

        clean = replace(clean, kind=classify(clean))
    return clean


def hide_private_all(messages: Iterable[Message]) -> list[Message]:
    """The messages without their private spans, those left empty dropped."""
    return [m for m in (hide_private(message) for message in messages) if m is not None]
