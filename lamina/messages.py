"""The message model every reader produces and every later stage consumes.

A *record* is one entry of a source transcript as stored there (a Claude Code JSONL line, one
OpenAI message, one LoCoMo dialog turn). A `Message` is Lamina's normalised view of one record, or
of the several records a source writes for one API response (Claude Code writes one line per
content block of a streamed response, all with the same message id). The source records are kept
untouched in `Message.records`; nothing here rewrites them.

Blocks are small frozen dataclasses. Block types Lamina does not know (documents, redacted
thinking, server tool results, ...) are kept as `UnknownBlock` with their data, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeAlias

__all__ = [
    "SYNTHETIC_KINDS",
    "Block",
    "ImageBlock",
    "JSONValue",
    "Kind",
    "Message",
    "Role",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownBlock",
    "block_from_dict",
    "blocks_from_content",
    "message_from_json",
    "message_to_json",
    "parse_timestamp",
]

JSONValue: TypeAlias = Any
"""A value decoded from JSON (dict, list, str, int, float, bool or None)."""


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class Kind(StrEnum):
    """What a message is, as far as conversation is concerned.

    Readers set the structural kinds (meta, compact_summary, sidechain, system_notice, ...). For
    ordinary user and assistant records the kind follows from the message's conversational text
    (`lamina.turns`): a user message with conversational text is a `prompt`, an assistant message
    with it a `reply`, and one with only tool calls, tool results or thinking is `tool_activity`.
    """

    PROMPT = "prompt"
    """A user-role message with conversational text: it starts a turn."""
    REPLY = "reply"
    """An assistant message with conversational text (it may also call tools)."""
    TOOL_ACTIVITY = "tool_activity"
    """Tool calls, tool results or thinking only: traffic, not conversation."""
    INSTRUCTIONS = "instructions"
    """A system prompt or developer instructions given to the model."""
    META = "meta"
    """A synthetic user-role record the host wrote (isMeta, command wrappers, interruption
    markers, task notifications, system reminders, hook output, empty records)."""
    COMPACT_SUMMARY = "compact_summary"
    """The summary a host writes when it compacts a conversation."""
    SIDECHAIN = "sidechain"
    """A subagent's message found inline in its parent's transcript."""
    SYSTEM_NOTICE = "system_notice"
    """A host's system record: compaction boundary, API error, timing, hook summary."""
    PROGRESS = "progress"
    """A progress record (hook, tool or subagent progress)."""
    SNAPSHOT = "snapshot"
    """A file-history snapshot."""
    QUEUE = "queue"
    """A queued-input operation."""
    TITLE = "title"
    """A session title or summary line written by the host."""
    UNKNOWN = "unknown"
    """A record type Lamina has never seen; kept, never a crash."""


SYNTHETIC_KINDS: frozenset[Kind] = frozenset(
    {
        Kind.INSTRUCTIONS,
        Kind.META,
        Kind.COMPACT_SUMMARY,
        Kind.SIDECHAIN,
        Kind.SYSTEM_NOTICE,
        Kind.PROGRESS,
        Kind.SNAPSHOT,
        Kind.QUEUE,
        Kind.TITLE,
        Kind.UNKNOWN,
    }
)
"""Kinds that never start a turn, whatever text they hold."""


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: str = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    thinking: str
    signature: str | None = None
    type: str = field(default="thinking", init=False)


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: JSONValue
    type: str = field(default="tool_use", init=False)


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: tuple[Block, ...]
    is_error: bool = False
    type: str = field(default="tool_result", init=False)

    @property
    def text(self) -> str:
        """The text parts of the result, joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str | None
    source: JSONValue
    type: str = field(default="image", init=False)


@dataclass(frozen=True, slots=True)
class UnknownBlock:
    """A block type Lamina does not interpret, kept with all its data."""

    type: str
    data: Mapping[str, JSONValue]


Block: TypeAlias = (
    TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | ImageBlock | UnknownBlock
)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a message came from: a file (or stream) and the records that make it up.

    `line`/`end_line` are 1-based line numbers for line-based files; `index` is the position of the
    first record among all records of the source (0-based); `offset`/`end_offset` are byte offsets
    of the first record's start and just past the last record's line, where the format has them.
    """

    path: str | None = None
    index: int = 0
    line: int | None = None
    end_line: int | None = None
    offset: int | None = None
    end_offset: int | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One normalised message. Construct with keyword arguments; fields past `kind` are optional."""

    id: str
    role: Role
    blocks: tuple[Block, ...]
    kind: Kind
    timestamp: datetime | None = None
    source: Source = field(default_factory=Source)
    record_type: str = ""
    """The source's own name for the record type (`user`, `progress`, `dialog`, ...)."""
    subtype: str | None = None
    speaker: str | None = None
    """Who said it, where the source names people (LoCoMo speakers, OpenAI `name`)."""
    session_id: str | None = None
    agent_id: str | None = None
    """The subagent that wrote it, or the subagent a Task tool result reports on."""
    is_meta: bool = False
    is_sidechain: bool = False
    is_compact_summary: bool = False
    tool_use_result: JSONValue = None
    """Claude Code's structured `toolUseResult` of a tool-result record, as recorded."""
    model: str | None = None
    stop_reason: str | None = None
    records: tuple[Mapping[str, JSONValue], ...] = ()
    """The untouched source records this message was built from."""

    @property
    def text(self) -> str:
        """All text blocks joined by newlines (raw: nothing stripped; see `lamina.turns`)."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolResultBlock))

    @property
    def line(self) -> int | None:
        return self.source.line


def block_from_dict(data: Mapping[str, JSONValue]) -> Block:
    """Build a block from an Anthropic-style content block dict; unknown types are preserved."""
    kind = data.get("type")
    if kind == "text" and isinstance(data.get("text"), str):
        return TextBlock(data["text"])
    if kind == "thinking" and isinstance(data.get("thinking"), str):
        sig = data.get("signature")
        return ThinkingBlock(data["thinking"], sig if isinstance(sig, str) else None)
    if kind == "tool_use" and isinstance(data.get("id"), str):
        name = data.get("name")
        return ToolUseBlock(data["id"], name if isinstance(name, str) else "", data.get("input"))
    if kind == "tool_result" and isinstance(data.get("tool_use_id"), str):
        return ToolResultBlock(
            data["tool_use_id"],
            blocks_from_content(data.get("content")),
            bool(data.get("is_error", False)),
        )
    if kind == "image":
        source = data.get("source")
        media = source.get("media_type") if isinstance(source, Mapping) else None
        return ImageBlock(media if isinstance(media, str) else None, source)
    return UnknownBlock(str(kind) if kind is not None else "", dict(data))


def blocks_from_content(content: JSONValue) -> tuple[Block, ...]:
    """Blocks from a `content` field: a plain string, a list of block dicts, or nothing."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(content),)
    if isinstance(content, list):
        out: list[Block] = []
        for item in content:
            if isinstance(item, Mapping):
                out.append(block_from_dict(item))
            elif isinstance(item, str):
                out.append(TextBlock(item))
            else:
                out.append(UnknownBlock(type(item).__name__, {"value": item}))
        return tuple(out)
    if isinstance(content, Mapping):
        return (block_from_dict(content),)
    return (UnknownBlock(type(content).__name__, {"value": content}),)


def parse_timestamp(value: JSONValue) -> datetime | None:
    """An aware UTC datetime from an ISO 8601 string or a Unix time in seconds or milliseconds."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return None


# -- storage form ------------------------------------------------------------------------------
# A message as one JSON object, for stores: every field, blocks tagged by their class (an
# `UnknownBlock` may carry any `type`, even "text"), so `message_from_json(message_to_json(m))
# == m` for any message a reader builds from JSON.


def _block_to_json(block: Block) -> dict[str, JSONValue]:
    if isinstance(block, TextBlock):
        return {"b": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"b": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {"b": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return {
            "b": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": [_block_to_json(b) for b in block.content],
            "is_error": block.is_error,
        }
    if isinstance(block, ImageBlock):
        return {"b": "image", "media_type": block.media_type, "source": block.source}
    return {"b": "unknown", "type": block.type, "data": dict(block.data)}


def _block_from_json(data: Mapping[str, JSONValue]) -> Block:
    kind = data["b"]
    if kind == "text":
        return TextBlock(data["text"])
    if kind == "thinking":
        return ThinkingBlock(data["thinking"], data["signature"])
    if kind == "tool_use":
        return ToolUseBlock(data["id"], data["name"], data["input"])
    if kind == "tool_result":
        content = tuple(_block_from_json(b) for b in data["content"])
        return ToolResultBlock(data["tool_use_id"], content, data["is_error"])
    if kind == "image":
        return ImageBlock(data["media_type"], data["source"])
    return UnknownBlock(data["type"], data["data"])


def message_to_json(message: Message) -> dict[str, JSONValue]:
    """The message as one JSON-able object (see `message_from_json`)."""
    source = message.source
    return {
        "id": message.id,
        "role": message.role.value,
        "blocks": [_block_to_json(b) for b in message.blocks],
        "kind": message.kind.value,
        "timestamp": message.timestamp.isoformat() if message.timestamp else None,
        "source": {
            "path": source.path,
            "index": source.index,
            "line": source.line,
            "end_line": source.end_line,
            "offset": source.offset,
            "end_offset": source.end_offset,
        },
        "record_type": message.record_type,
        "subtype": message.subtype,
        "speaker": message.speaker,
        "session_id": message.session_id,
        "agent_id": message.agent_id,
        "is_meta": message.is_meta,
        "is_sidechain": message.is_sidechain,
        "is_compact_summary": message.is_compact_summary,
        "tool_use_result": message.tool_use_result,
        "model": message.model,
        "stop_reason": message.stop_reason,
        "records": [dict(r) for r in message.records],
    }


def message_from_json(data: Mapping[str, JSONValue]) -> Message:
    """The message `message_to_json` wrote, equal to the original."""
    timestamp = data["timestamp"]
    return Message(
        id=data["id"],
        role=Role(data["role"]),
        blocks=tuple(_block_from_json(b) for b in data["blocks"]),
        kind=Kind(data["kind"]),
        timestamp=datetime.fromisoformat(timestamp) if timestamp else None,
        source=Source(**data["source"]),
        record_type=data["record_type"],
        subtype=data["subtype"],
        speaker=data["speaker"],
        session_id=data["session_id"],
        agent_id=data["agent_id"],
        is_meta=data["is_meta"],
        is_sidechain=data["is_sidechain"],
        is_compact_summary=data["is_compact_summary"],
        tool_use_result=data["tool_use_result"],
        model=data["model"],
        stop_reason=data["stop_reason"],
        records=tuple(data["records"]),
    )
