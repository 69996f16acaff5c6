"""Anthropic Messages API message lists (JSON or JSON Lines).

A file holds one of:

- a JSON array of messages: `[{"role": "user", "content": "hi"}, ...]`;
- a JSON object with `messages` and an optional `system` (a string or a list of text blocks),
  as sent to the Messages API: `{"system": "Be brief.", "messages": [...]}`;
- JSON Lines with one message object a line (a line may also hold a whole
  `{"system": ..., "messages": [...]}` object, as a compact one-line document does).

A message has a `role` (`user`, `assistant`; `system` is accepted too) and `content`: a string
or a list of blocks (`text`, `thinking`, `redacted_thinking`, `tool_use`, `tool_result`, `image`,
`document`, ...). Blocks of types Lamina does not interpret are kept as `UnknownBlock`. The
top-level `system` prompt becomes a first message with role SYSTEM and kind INSTRUCTIONS.

Records are numbered in source order from 0 (the top-level `system` prompt, when present, is
record 0). A message keeps its own `id` (API responses have one); otherwise its id is
`"<file stem>:<record number>"`, so re-reading a file gives the same ids. A record that is not an
object or has an unknown role is reported as a warning and skipped.

The container handling and the format sniffing here are shared with the `openai` reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import orjson

from lamina.errors import ReadError, ReadWarning
from lamina.messages import (
    Block,
    Kind,
    Message,
    Role,
    Source,
    blocks_from_content,
    parse_timestamp,
)
from lamina.turns import classify

from .base import (
    IdMaker,
    Line,
    WarningSink,
    first_json_lines,
    iter_json_lines,
    line_source,
    load_json_document,
    read_head,
)

__all__ = [
    "AnthropicReader",
    "ListSniff",
    "MessageListReader",
    "MessageRecord",
    "RecordContext",
    "expand_container",
    "is_container",
    "iter_message_records",
    "message_from_record",
    "message_role",
    "read_anthropic",
    "score_message_list",
    "sniff_message_list",
]


# -- containers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One message record of a message-list file, with its place in the file."""

    index: int
    """Position among the records of the file (0-based)."""
    value: Any
    """The record as decoded (normally a message object; anything else is the caller's to
    report)."""
    line: Line | None
    """The JSON line it came from (JSON Lines files only)."""
    system_field: bool = False
    """True for the value of a top-level `system` field (a string or a list of blocks)."""


def _layout(head: bytes) -> Literal["document", "lines", "empty"]:
    """How a file starting with `head` is laid out: one JSON document, JSON Lines, or nothing."""
    body = head.lstrip()
    if not body:
        return "empty"
    if body.startswith(b"["):
        return "document"
    try:
        orjson.loads(body.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return "document"  # a pretty-printed object (or a damaged first line: see below)
    return "lines"


def _expand(
    container: Mapping[str, Any], first_index: int, line: Line | None
) -> Iterator[MessageRecord]:
    index = first_index
    system = container.get("system")
    if system is not None and system != "" and system != []:
        yield MessageRecord(index, system, line, system_field=True)
        index += 1
    for value in container["messages"]:
        yield MessageRecord(index, value, line)
        index += 1


def _is_container(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("messages"), list)
        and "role" not in value
    )


def _from_lines(path: str, warn: WarningSink) -> Iterator[MessageRecord]:
    index = 0
    for line in iter_json_lines(path, warn):
        if _is_container(line.value):
            for record in _expand(line.value, index, line):
                yield record
                index = record.index + 1
        else:
            yield MessageRecord(index, line.value, line)
            index += 1


def iter_message_records(path: str, warn: WarningSink) -> Iterator[MessageRecord]:
    """The message records of a message-list file (array, `{"messages": ...}` or JSON Lines).

    A damaged JSON line is a warning and reading goes on; a JSON document that cannot be parsed
    at all, or that holds no message list, raises ReadError.
    """
    head = read_head(path)
    layout = _layout(head)
    if layout == "empty":
        return
    if layout == "lines":
        yield from _from_lines(path, warn)
        return
    try:
        data = load_json_document(path)
    except ReadError:
        if head.lstrip().startswith(b"{") and first_json_lines(head):
            yield from _from_lines(path, warn)  # JSON Lines whose first line is damaged
            return
        raise
    if isinstance(data, list):
        for index, value in enumerate(data):
            yield MessageRecord(index, value, None)
    elif _is_container(data):
        yield from _expand(data, 0, None)
    elif isinstance(data, Mapping) and "role" in data:
        yield MessageRecord(0, data, None)
    else:
        raise ReadError(
            path, "not a message list (expected a JSON array or an object with 'messages')"
        )


# -- what readers share when they build messages ---------------------------------------------


class RecordContext:
    """Per-file state a message-list reader needs: the path, warnings and unique ids."""

    def __init__(self, path: str, warn: WarningSink) -> None:
        self.path = path
        self.stem = Path(path).stem
        self._warn = warn
        self._ids = IdMaker()

    def warn(self, record: MessageRecord, reason: str) -> None:
        line = record.line.number if record.line is not None else None
        self._warn(ReadWarning(self.path, line, f"message {record.index}: {reason}"))

    def message_id(self, record: MessageRecord) -> str:
        """The record's own `id` if it has one, else `<stem>:<index>`; made unique in the file."""
        own = record.value.get("id") if isinstance(record.value, Mapping) else None
        base = own if isinstance(own, str) and own else f"{self.stem}:{record.index}"
        return self._ids(base)

    def source(self, record: MessageRecord) -> Source:
        line = record.line
        if line is None:
            return Source(path=self.path, index=record.index)
        return line_source(self.path, record.index, line)

    def message(
        self,
        record: MessageRecord,
        value: Mapping[str, Any],
        role: tuple[str, Role],
        blocks: Sequence[Block],
        id: str | None = None,
        **fields: Any,
    ) -> Message:
        """The message of `record` (`value`: its object; `role`: as `message_role` found it;
        `id`: its `message_id`, when the blocks needed it first), its kind classified from
        what it holds (a system message stays instructions); `fields`: what else the
        provider's shape gives (`stop_reason`, `speaker`, ...)."""
        role_name, role_is = role
        message = Message(
            id=self.message_id(record) if id is None else id,
            role=role_is,
            blocks=tuple(blocks),
            kind=Kind.INSTRUCTIONS,
            timestamp=parse_timestamp(record_timestamp(value)),
            source=self.source(record),
            record_type=role_name,
            model=optional_str(value.get("model")),
            **fields,
        )
        return message if role_is is Role.SYSTEM else replace(message, kind=classify(message))


def record_timestamp(record: Mapping[str, Any]) -> Any:
    """The raw timestamp of a message record (`timestamp`, else `created_at`)."""
    value = record.get("timestamp")
    return value if value is not None else record.get("created_at")


def optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- the anthropic reader ----------------------------------------------------------------------

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}


def _system_message(ctx: RecordContext, record: MessageRecord) -> Message:
    return Message(
        id=ctx.message_id(record),
        role=Role.SYSTEM,
        blocks=blocks_from_content(record.value),
        kind=Kind.INSTRUCTIONS,
        source=ctx.source(record),
        record_type="system",
        records=({"system": record.value},),
    )


def message_role(
    ctx: RecordContext, record: MessageRecord, value: Any, roles: Mapping[str, Role]
) -> tuple[str, Role] | None:
    """The role of a message record, or None (with a warning naming the record) when the record
    is not an object or its role is missing or unknown."""
    if not isinstance(value, Mapping):
        ctx.warn(record, f"not a JSON object ({type(value).__name__}); skipped")
        return None
    role_name = value.get("role")
    role = roles.get(role_name) if isinstance(role_name, str) else None
    if role is None:
        what = "no role" if role_name is None else f"unknown role {role_name!r}"
        ctx.warn(record, f"{what}; skipped")
        return None
    return str(role_name), role


def _message(ctx: RecordContext, record: MessageRecord) -> Message | None:
    if record.system_field:
        return _system_message(ctx, record)
    value = record.value
    found = message_role(ctx, record, value, _ROLES)
    if found is None:
        return None
    blocks = blocks_from_content(value.get("content"))
    stop = optional_str(value.get("stop_reason"))
    return ctx.message(record, value, found, blocks, stop_reason=stop, records=(value,))


expand_container = _expand
"""The records of a `{"system": ..., "messages": [...]}` object, numbered from an index."""
is_container = _is_container
"""True for a `{"messages": [...]}` object (not a message itself)."""
message_from_record = _message
"""The Anthropic-shaped message of one record (None, with a warning, when it is not one)."""


def read_anthropic(path: str, warn: WarningSink) -> Iterator[Message]:
    """Stream the messages of an Anthropic message-list file."""
    ctx = RecordContext(path, warn)
    for record in iter_message_records(path, warn):
        message = _message(ctx, record)
        if message is not None:
            yield message


# -- sniffing (shared with the openai reader) ------------------------------------------------

_KNOWN_ROLES = frozenset({"user", "assistant", "system", "developer", "tool", "function"})
_OPENAI_ROLES = frozenset({"tool", "developer", "function"})
_OPENAI_KEYS = ("tool_calls", "tool_call_id", "function_call", "refusal")
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document", "server_tool_use"}
)
_ANTHROPIC_KEYS = ("stop_reason", "stop_sequence")

_ROLE_TEXT = re.compile(rb'"role"\s*:\s*"(?:user|assistant|system|developer|tool|function)"')
_OPENAI_TEXT = re.compile(
    rb'"role"\s*:\s*"(?:tool|developer|function)"'
    rb'|"(?:tool_calls|tool_call_id|function_call)"\s*:'
    rb'|"type"\s*:\s*"(?:image_url|input_audio)"'
)
_ANTHROPIC_TEXT = re.compile(
    rb'"type"\s*:\s*"(?:tool_use|tool_result|thinking|redacted_thinking)"|"system"\s*:'
)
_CLAUDE_CODE_TEXT = re.compile(rb'"(?:parentUuid|sessionId|leafUuid)"\s*:')


@dataclass(frozen=True, slots=True)
class ListSniff:
    """What the head of a message-list file shows: counts of format-specific markers."""

    openai: int
    anthropic: int


def _is_claude_code(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    if "type" in value and isinstance(value.get("message"), Mapping):
        return True
    return any(key in value for key in ("parentUuid", "sessionId", "leafUuid"))


def _markers(message: Mapping[str, Any]) -> ListSniff:
    openai = int(message.get("role") in _OPENAI_ROLES)
    openai += sum(1 for key in _OPENAI_KEYS if key in message)
    anthropic = sum(1 for key in _ANTHROPIC_KEYS if key in message)
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        ptype = part.get("type") if isinstance(part, Mapping) else None
        openai += ptype in _OPENAI_PARTS
        anthropic += ptype in _ANTHROPIC_BLOCKS or (ptype == "image" and "source" in part)
    return ListSniff(openai, anthropic)


def _sniff_values(values: Sequence[Any]) -> ListSniff | None:
    candidates: list[Any] = []
    system = 0
    for value in values:
        if _is_claude_code(value):
            return None
        if isinstance(value, list):
            candidates.extend(value)
        elif _is_container(value):
            candidates.extend(value["messages"])
            system += "system" in value
        else:
            candidates.append(value)
    messages = [m for m in candidates if isinstance(m, Mapping) and m.get("role") in _KNOWN_ROLES]
    if not messages or len(messages) * 2 < len(candidates):
        return None
    found = [_markers(m) for m in messages]
    return ListSniff(sum(f.openai for f in found), system + sum(f.anthropic for f in found))


def sniff_message_list(head: bytes) -> ListSniff | None:
    """Marker counts if `head` starts a message list (array, `{"messages": ...}` or JSON Lines
    of messages), None if it does not. The head may be a truncated document: then the text is
    scanned for `"role": "..."` and the markers instead of being parsed."""
    body = head.lstrip()
    if not body.startswith((b"[", b"{")):
        return None
    try:
        return _sniff_values([orjson.loads(body)])
    except orjson.JSONDecodeError:
        pass
    if body.startswith(b"{"):
        values = first_json_lines(head)
        if values:
            return _sniff_values(values)
    if _CLAUDE_CODE_TEXT.search(body) or not _ROLE_TEXT.search(body):
        return None
    return ListSniff(len(_OPENAI_TEXT.findall(body)), len(_ANTHROPIC_TEXT.findall(body)))


def score_message_list(found: ListSniff | None, mine: str) -> float:
    """A reader's confidence from the markers: its own markers only 0.9, the other format's
    only 0.2, both 0.8 for the side with more (anthropic on a tie) and 0.5 for the other, none
    0.6 for anthropic and 0.55 for openai (both read a plain role/content list the same way)."""
    if found is None:
        return 0.0
    ours, theirs = (
        (found.anthropic, found.openai) if mine == "anthropic" else (found.openai, found.anthropic)
    )
    if not ours and not theirs:
        return 0.6 if mine == "anthropic" else 0.55
    if not theirs:
        return 0.9
    if not ours:
        return 0.2
    wins = ours > theirs or (ours == theirs and mine == "anthropic")
    return 0.8 if wins else 0.5


class MessageListReader:
    """A reader of message-list files (a JSON array, an object holding `messages`, JSONL),
    which the Anthropic and OpenAI shapes share: it claims a file as far as its messages look
    like its own provider's (`score_message_list`)."""

    name = ""

    def sniff(self, head: bytes, path: str) -> float:
        return score_message_list(sniff_message_list(head), self.name)


class AnthropicReader(MessageListReader):
    name = "anthropic"
    description = "Anthropic Messages API message list (JSON array, {system, messages}, JSONL)"

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_anthropic(path, warn)
