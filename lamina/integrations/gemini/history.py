"""What a Gemini chat's history already holds of a memory block.

Gemini CLI keeps a BeforeAgent hook's context in the chat: it is an extra part of the user's
content (`<hook_context>...</hook_context>`, HTML-escaped by 0.61), stored in the session's
`chats/session-*.jsonl`, and sent again with every later request of the session, a resumed one
included. A memory block whose memories that history already holds would only repeat them: the
prompt hook gives none (`held_in_history`), so a resumed session's request carries one block.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import orjson

from ...tags import MEMORY_TAG

__all__ = ["held_in_history", "memory_entries"]

_MARK = MEMORY_TAG.encode()
"""In every line that holds a memory block, its tag escaped by Gemini 0.61 or not."""


def memory_entries(block: str) -> list[str]:
    """The memories of a `<lamina_memories>` block as rendered (lamina.tags.format_memory_block):
    each `- [day] text` line with its indented continuation lines."""
    entries: list[str] = []
    for line in block.splitlines():
        if line.startswith("- ["):
            entries.append(line)
        elif entries and line.startswith("  "):
            entries[-1] += "\n" + line
    return entries


def _user_texts(record: Any) -> list[str]:
    """The text of every user part of a chat line (a message, or a `$set` checkpoint's
    messages) that holds a memory block, unescaped."""
    messages = [record] if isinstance(record, dict) else []
    checkpoint = record.get("$set") if isinstance(record, dict) else None
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("messages"), list):
        messages = [m for m in checkpoint["messages"] if isinstance(m, dict)]
    held: list[str] = []
    for message in messages:
        if message.get("type") != "user" or not isinstance(message.get("content"), list):
            continue
        for part in message["content"]:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and MEMORY_TAG in html.unescape(text):
                held.append(html.unescape(text))
    return held


def _held(transcript: Path, entries: list[str]) -> bool:
    """Whether every entry is in the text of the chat's user parts that hold a memory block
    (joined in the order of the file). The lines naming the tag are read from the end back,
    and reading stops once the ones read hold every entry: they are the later part of that
    text, so what they hold it holds."""
    import mmap

    try:
        with (
            transcript.open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            later: list[list[str]] = []  # per line read, the last line first
            high = len(data)
            while (at := data.rfind(_MARK, 0, high)) >= 0:
                line = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                high = line
                try:
                    texts = _user_texts(orjson.loads(data[line : end if end >= 0 else len(data)]))
                except orjson.JSONDecodeError:
                    continue
                if not texts:
                    continue
                later.append(texts)
                held = "\n".join(text for texts in reversed(later) for text in texts)
                if all(entry in held for entry in entries):
                    return True
    except (OSError, ValueError):  # unreadable, or empty (nothing to map)
        return False
    return False


def held_in_history(transcript: str, block: str) -> bool:
    """Whether every memory of `block` is already in a memory block of the chat `transcript`
    (Gemini sends that history with the request: injecting them again would repeat them)."""
    entries = memory_entries(block)
    if not transcript or not entries:
        return False
    return _held(Path(transcript), entries)
