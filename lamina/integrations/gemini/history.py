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

import orjson

from ...tags import MEMORY_TAG

__all__ = ["held_in_history", "memory_entries"]

_MARKS = (MEMORY_TAG.encode(), html.escape(f"<{MEMORY_TAG}>").encode())


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


def _held_text(transcript: Path) -> str:
    """The text of every user part of the chat that holds a memory block, unescaped."""
    try:
        data = transcript.read_bytes()
    except OSError:
        return ""
    if not any(mark in data for mark in _MARKS):
        return ""
    held: list[str] = []
    for raw in data.splitlines():
        if not any(mark in raw for mark in _MARKS):
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        messages = [record] if isinstance(record, dict) else []
        checkpoint = record.get("$set") if isinstance(record, dict) else None
        if isinstance(checkpoint, dict) and isinstance(checkpoint.get("messages"), list):
            messages = [m for m in checkpoint["messages"] if isinstance(m, dict)]
        for message in messages:
            if message.get("type") != "user" or not isinstance(message.get("content"), list):
                continue
            for part in message["content"]:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and MEMORY_TAG in html.unescape(text):
                    held.append(html.unescape(text))
    return "\n".join(held)


def held_in_history(transcript: str, block: str) -> bool:
    """Whether every memory of `block` is already in a memory block of the chat `transcript`
    (Gemini sends that history with the request: injecting them again would repeat them)."""
    entries = memory_entries(block)
    if not transcript or not entries:
        return False
    held = _held_text(Path(transcript))
    return bool(held) and all(entry in held for entry in entries)
