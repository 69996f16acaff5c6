"""Tagged blocks inside message text: memory blocks Lamina (or another tool) injects, and
transport envelopes around real conversation.

Recall puts memories into a prompt as a `<lamina_memories>` block. Whatever injected it, such a
block must never flow back: retain strips it before storing, and recall-query composition strips
it before querying. Other memory tools inject their own blocks (`<hindsight_memories>`,
`<relevant_memories>`); they are stripped the same way. Hosts also wrap real messages in
envelopes (`<channel source="telegram">hi</channel>`): those are unwrapped, keeping the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol

__all__ = [
    "DEFAULT_STRIP_TAGS",
    "MEMORY_TAG",
    "MemoryLike",
    "format_memory_block",
    "inject_memory_block",
    "strip_tagged_blocks",
    "unwrap_envelopes",
]

MEMORY_TAG = "lamina_memories"

DEFAULT_STRIP_TAGS: tuple[str, ...] = (
    MEMORY_TAG,
    "hindsight_memories",
    "relevant_memories",
    "system-reminder",
)
"""Blocks removed from conversational text: memory blocks of Lamina and other memory tools, and
the reminders hosts append to user messages (context the host injected, not what anyone said)."""

DEFAULT_ENVELOPE_TAGS: tuple[str, ...] = ("channel",)
"""Envelopes unwrapped (the tags removed, the text between them kept)."""

_TAG_NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")


class MemoryLike(Protocol):
    """What a memory needs to be shown in a memory block."""

    @property
    def text(self) -> str: ...

    @property
    def time(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class _Patterns:
    block: re.Pattern[str]
    orphan: re.Pattern[str]


@lru_cache(maxsize=64)
def _patterns(tags: tuple[str, ...]) -> _Patterns:
    for tag in tags:
        if not _TAG_NAME.match(tag):
            raise ValueError(f"not a valid tag name: {tag!r}")
    names = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    # An opening tag (attributes allowed), a body that opens no block of the same tag (so the
    # innermost of nested blocks goes first), the matching closing tag.
    block = re.compile(
        rf"<({names})(?:\s[^<>]*)?>(?:(?!<\1[\s>]).)*?</\1\s*>", re.DOTALL | re.IGNORECASE
    )
    # A lone opening or closing tag left over from a truncated block.
    orphan = re.compile(rf"</?(?:{names})(?:\s[^<>]*)?>", re.IGNORECASE)
    return _Patterns(block, orphan)


def strip_tagged_blocks(text: str, tags: Sequence[str] = DEFAULT_STRIP_TAGS) -> str:
    """Remove every `<tag ...>...</tag>` block of the given tags, nested ones included.

    A lone opening or closing tag (a truncated block) is removed too, but not the text after it:
    losing a user's real words would be worse than keeping a stray fragment of a memory.
    """
    if not tags or "<" not in text:
        return text
    pats = _patterns(tuple(tags))
    return pats.orphan.sub("", _until_stable(text, lambda t: pats.block.sub("", t)))


def _until_stable(text: str, step: Callable[[str], str]) -> str:
    """`step` applied to `text` until it changes nothing (nested blocks, inside out)."""
    previous = None
    while previous != text:
        previous = text
        text = step(text)
    return text


@lru_cache(maxsize=16)
def _envelope_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    for tag in tags:
        if not _TAG_NAME.match(tag):
            raise ValueError(f"not a valid tag name: {tag!r}")
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<({names})(?:\s[^<>]*)?>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)


def unwrap_envelopes(text: str, tags: Sequence[str] = DEFAULT_ENVELOPE_TAGS) -> str:
    """Replace each `<tag attrs>body</tag>` envelope by its body."""
    if not tags or "<" not in text:
        return text
    pattern = _envelope_pattern(tuple(tags))
    return _until_stable(text, lambda t: pattern.sub(lambda m: m.group(2), t))


def _escape(text: str, tag: str) -> str:
    # A memory that itself mentions the tag must not close the block early.
    return re.sub(rf"<(/?)({re.escape(tag)})", r"&lt;\1\2", text, flags=re.IGNORECASE)


def _day(moment: datetime | None) -> str:
    if moment is None:
        return "undated"
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


BLOCK_TOKENS = 42
"""Tokens a memory block takes beyond its memories' lines (its tags, the current time and
the heading): an upper bound, measured with lamina.tokens over varied blocks."""

ITEM_TOKENS = 11
"""Tokens a memory's line in a block adds to its text (the bullet and the date), plus one per
line break (the indent): an upper bound, measured alike."""


def framing_tokens(text: str) -> int:
    """Tokens a memory with this text costs in a block beyond the text itself."""
    return ITEM_TOKENS + text.count("\n")


def format_memory_block(
    memories: Iterable[MemoryLike],
    *,
    now: datetime | None = None,
    tag: str = MEMORY_TAG,
) -> str:
    """Render recalled memories as one tagged block, newest context first in mind of the reader:
    the current UTC time on top, then each memory with the date it happened. Returns "" when
    there is nothing to show, so callers can inject unconditionally."""
    items = list(memories)
    if not items:
        return ""
    current = (now or datetime.now(UTC)).astimezone(UTC)
    lines = [
        f"<{tag}>",
        f"Current time: {current.strftime('%Y-%m-%d %H:%M')} UTC",
        "Memories from earlier conversations, which may help with this prompt:",
    ]
    for memory in items:
        body = _escape(memory.text.strip(), tag).replace("\n", "\n  ")
        lines.append(f"- [{_day(memory.time)}] {body}")
    lines.append(f"</{tag}>")
    return "\n".join(lines)


def inject_memory_block(prompt: str, block: str) -> str:
    """Put a memory block before the prompt (an empty block leaves the prompt unchanged)."""
    if not block:
        return prompt
    return f"{block}\n\n{prompt}"
