"""Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json` or `.jsonl`).

Two forms:

- before 0.39, one JSON object `{sessionId, projectHash, startTime, lastUpdated, messages[]}`;
- from 0.39 on, JSON Lines: a header line (the same fields without `messages`; a resume
  appends another), message records, `{"$set": {...}}` and `{"$rewindTo": id}`. A message id
  appended again replaces the earlier copy (a tool call completing rewrites its message): the
  last copy is read, at the place of the first. `$set` and `$rewindTo` are not replayed: a
  `$set.messages` checkpoint written on resume drops user messages the CLI ignores (those
  starting with `<hook_context>`, `/` or `?`), so the raw lines are the record of what was said.

Message records are `{id, timestamp, type, content, displayContent?, toolCalls?, thoughts?,
tokens?, model?}` with `type` user, gemini, info, error or warning:

- `user`: what the person typed is `displayContent` when present (the CLI expands `/init` or
  `@file` into `content`), else `content`. `<hook_context>` blocks (hook output, prepended to
  the prompt or sent as an extra part), a bare slash command, the CLI's "System: Please
  continue." and the older `[Function Response: ...]` text are kept as `context` blocks
  (lamina.readers.agents), never as words. `functionResponse` parts are tool results.
- `gemini`: text, `thoughts` (thinking blocks) and `toolCalls` (tool-use blocks, each call's
  `result` in a user-role message right after it, an error unless `status` is success).
- `info`, `error`, `warning`: the CLI's notices (`system_notice`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Unpack

import orjson

from ..errors import ReadWarning
from ..messages import (
    Block,
    Kind,
    Message,
    Role,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
    parse_timestamp,
)
from .agents import (
    AgentBuilder,
    MessageParts,
    context_block,
    mapping,
    record_digest,
    strip_context_tags,
    text_or_none,
)
from .base import (
    Line,
    WarningSink,
    first_json_lines,
    iter_json_lines,
    json_object,
    load_json_document,
    open_source,
    read_head,
    tail_start,
)

__all__ = [
    "GeminiReader",
    "chat_messages",
    "first_mentions",
    "is_jsonl",
    "read_gemini",
    "read_gemini_tail",
    "record_ids",
]

MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})

_BARE_COMMAND = re.compile(r"^[/?]\S*$")


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    return list(content) if isinstance(content, list) else [content]


def _injected_source(text: str) -> str | None:
    """Why a user part's text is not the person's words, or None when it is."""
    if text.startswith("[Function Response:"):
        return "function_response"
    if text == "System: Please continue.":
        return "continuation"
    if _BARE_COMMAND.match(text):
        return "slash_command"
    return None


def _text_blocks(text: str) -> list[Block]:
    """A user text part: the person's words, and the context blocks injected into it."""
    rest, tagged = strip_context_tags(text)
    blocks: list[Block] = [context_block(block, tag) for tag, block in tagged]
    words = rest.strip() if tagged else rest
    if words.strip():
        source = _injected_source(words.strip())
        blocks.append(context_block(words, source) if source else TextBlock(words))
    return blocks


def _result_text(call: Mapping[str, Any]) -> str:
    texts: list[str] = []
    for item in _parts(call.get("result")):
        response = mapping(mapping(mapping(item).get("functionResponse")).get("response"))
        for key in ("output", "error", "content"):
            value = response.get(key)
            if isinstance(value, str):
                texts.append(value)
                break
        else:
            if response:
                texts.append(orjson.dumps(response, default=str).decode())
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(texts)


@dataclass
class _Entry:
    """One message id of a JSONL chat: where it first appeared, its last copy."""

    first: Line
    last: Line
    records: list[Mapping[str, Any]] = field(default_factory=list)


class _Builder(AgentBuilder):
    def __init__(self, path: str, warn: WarningSink) -> None:
        super().__init__(path, warn)
        self.answered: set[str] = set()

    def _message(
        self,
        record: Mapping[str, Any],
        source: Source,
        *,
        records: tuple[Mapping[str, Any], ...] | None = None,
        **parts: Unpack[MessageParts],
    ) -> Message:
        parts["model"] = text_or_none(record.get("model"))
        return self.make(
            timestamp=parse_timestamp(record.get("timestamp") or record.get("startTime")),
            source=replace(source, index=self.index),
            records=records if records is not None else (record,),
            **parts,
        )

    def header(self, record: Mapping[str, Any], source: Source) -> Message:
        self.session = text_or_none(record.get("sessionId")) or self.session
        kept = {k: v for k, v in record.items() if k != "messages"}
        return self._message(
            kept, source, id=record_digest(kept, "session"), role=Role.SYSTEM, blocks=[],
            kind=Kind.SYSTEM_NOTICE, record_type="session",
        )  # fmt: skip

    def record(
        self,
        record: Mapping[str, Any],
        source: Source,
        records: tuple[Mapping[str, Any], ...] | None = None,
    ) -> Iterator[Message]:
        rtype = record.get("type")
        ident = text_or_none(record.get("id")) or record_digest(record, str(rtype))
        common: dict[str, Any] = {"id": ident, "record_type": str(rtype), "records": records}
        if rtype == "user":
            blocks, kind = self._user(record)
            yield self._message(record, source, role=Role.USER, blocks=blocks, kind=kind,
                                **common)  # fmt: skip
        elif rtype == "gemini":
            yield from self._gemini(record, source, common)
        elif rtype in MESSAGE_TYPES:
            content = record.get("content")
            text = content if isinstance(content, str) else ""
            yield self._message(record, source, role=Role.SYSTEM,
                                blocks=[TextBlock(text)] if text else [],
                                kind=Kind.SYSTEM_NOTICE, **common)  # fmt: skip
        else:
            yield self._message(record, source, role=Role.SYSTEM, blocks=[],
                                kind=Kind.UNKNOWN, **common)  # fmt: skip

    def _user(self, record: Mapping[str, Any]) -> tuple[list[Block], Kind | None]:
        display = record.get("displayContent")
        blocks: list[Block] = []
        if display is not None:
            for part in _parts(display):
                text = mapping(part).get("text") if not isinstance(part, str) else part
                if isinstance(text, str):
                    blocks.extend(_text_blocks(text))
        shown = {b.text for b in blocks if isinstance(b, TextBlock)} | {
            str(b.data.get("text")) for b in blocks if isinstance(b, UnknownBlock)
        }
        only_results = True
        for part in _parts(record.get("content")):
            part = {"text": part} if isinstance(part, str) else mapping(part)
            text = part.get("text")
            if isinstance(text, str):
                only_results = False
                if display is None:
                    blocks.extend(_text_blocks(text))
                    continue
                rest, tagged = strip_context_tags(text)
                if rest.strip() and rest.strip() not in shown:
                    blocks.append(context_block(text, "expanded_prompt"))
                    continue
                blocks.extend(context_block(b, tag) for tag, b in tagged if b not in shown)
            elif isinstance(part.get("functionResponse"), Mapping):
                blocks.append(self._function_response(part))
            else:
                only_results = False
                key = next(iter(part), "") if part else ""
                blocks.append(UnknownBlock(str(key), dict(part)))
        kind = Kind.TOOL_ACTIVITY if only_results and blocks else None
        return blocks, kind

    def _function_response(self, part: Mapping[str, Any]) -> Block:
        response = mapping(part.get("functionResponse"))
        call_id = text_or_none(response.get("id")) or ""
        if call_id in self.answered:
            return UnknownBlock("function_response", dict(part))  # already read with its call
        self.answered.add(call_id)
        text = _result_text({"result": [part]})
        return ToolResultBlock(
            call_id, (TextBlock(text),), "error" in mapping(response.get("response"))
        )

    def _gemini(
        self, record: Mapping[str, Any], source: Source, common: dict[str, Any]
    ) -> Iterator[Message]:
        blocks: list[Block] = []
        for thought in _parts(record.get("thoughts")):
            thought = mapping(thought)
            subject, about = thought.get("subject"), thought.get("description")
            words = [w for w in (subject, about) if isinstance(w, str) and w]
            if words:
                blocks.append(ThinkingBlock("\n".join(words)))
        for part in _parts(record.get("content")):
            part = {"text": part} if isinstance(part, str) else mapping(part)
            call = mapping(part.get("functionCall"))
            if isinstance(part.get("text"), str):
                text = part["text"]
                blocks.append(ThinkingBlock(text) if part.get("thought") else TextBlock(text))
            elif call:
                name = text_or_none(call.get("name")) or ""
                blocks.append(ToolUseBlock(text_or_none(call.get("id")) or "", name,
                                           call.get("args")))  # fmt: skip
            elif part:
                blocks.append(UnknownBlock(str(next(iter(part))), dict(part)))
        results: list[Block] = []
        for n, call in enumerate(_parts(record.get("toolCalls"))):
            call = mapping(call)
            call_id = text_or_none(call.get("id")) or f"{common['id']}:call{n}"
            name = text_or_none(call.get("name")) or ""
            args = call.get("args")
            blocks.append(ToolUseBlock(call_id, name, dict(args) if isinstance(args, Mapping)
                                       else {"input": args}))  # fmt: skip
            if call.get("result") is not None or call.get("status") not in (None, "executing"):
                failed = call.get("status") not in ("success", None)
                results.append(ToolResultBlock(call_id, (TextBlock(_result_text(call)),), failed))
                self.answered.add(call_id)
        yield self._message(record, source, role=Role.ASSISTANT, blocks=blocks, kind=None,
                            **common)  # fmt: skip
        if results:
            yield self._message(
                record, source, id=f"{common['id']}:results", role=Role.USER, blocks=results,
                kind=Kind.TOOL_ACTIVITY, record_type="gemini", records=(),
            )  # fmt: skip


def _is_header(value: Mapping[str, Any]) -> bool:
    return "sessionId" in value and "type" not in value


def _read_lines(path: str, warn: WarningSink, start: int = 0) -> Iterator[Message]:
    """The messages of a JSON Lines chat, or of its lines from byte `start` (a line start) on."""
    lines = iter_json_lines(path, warn, start=start, first_line=None if start else 1)
    return chat_messages(path, lines, warn)


def chat_messages(path: str, lines: Iterable[Line], warn: WarningSink) -> Iterator[Message]:
    """The messages of a JSON Lines chat's `lines` (parsed, in order): each message id at the
    place of its first copy among them, read from its last."""
    builder = _Builder(path, warn)
    order: list[str | Line] = []
    entries: dict[str, _Entry] = {}
    for line in lines:
        value = json_object(line, path, warn)
        if value is None:
            continue
        if "$set" in value or "$rewindTo" in value:
            continue  # checkpoints, never replayed (see the module's doc)
        if _is_header(value):
            order.append(line)
            continue
        ident = text_or_none(value.get("id"))
        if ident is None or value.get("type") not in MESSAGE_TYPES:
            what = "a record without an id" if ident is None else f"type {value.get('type')!r}"
            warn(ReadWarning(path, line.number, f"unknown record ({what}); kept as unknown"))
            order.append(line)
            continue
        entry = entries.get(ident)
        if entry is None:
            entries[ident] = _Entry(line, line, [value])
            order.append(ident)
        else:
            entry.last = line
            entry.records.append(value)
    for item in order:
        if isinstance(item, Line):
            source = Source(path, 0, item.number, item.number, item.offset, item.end)
            if _is_header(item.value):
                yield builder.header(item.value, source)
                yield from _whole_messages(builder, item.value, path, None)
            else:
                yield from builder.record(item.value, source)
            continue
        entry = entries[item]
        first, last = entry.first, entry.last
        source = Source(path, 0, first.number, last.number, first.offset, last.end)
        yield from builder.record(entry.records[-1], source, tuple(entry.records))


def _message_lines(path: str) -> dict[str, tuple[int, int]]:
    """Line and byte offset of each message id's first mention in a JSON document."""
    with open_source(path) as handle:
        data = handle.read()
    found: dict[str, tuple[int, int]] = {}
    line, last = 1, 0
    for match in re.finditer(rb'"id"\s*:\s*"([^"\\]{1,200})"', data):
        line += data.count(b"\n", last, match.start())
        last = match.start()
        found.setdefault(match.group(1).decode("utf-8", "replace"), (line, match.start()))
    return found


def _whole_messages(
    builder: _Builder,
    document: Mapping[str, Any],
    path: str,
    lines: dict[str, tuple[int, int]] | None,
) -> Iterator[Message]:
    messages = document.get("messages")
    if not isinstance(messages, list):
        return
    for n, record in enumerate(messages):
        if not isinstance(record, Mapping):
            builder.warn(ReadWarning(path, None, f"message {n} is not a JSON object; skipped"))
            continue
        at = (lines or {}).get(str(record.get("id")))
        source = Source(path, 0, at[0] if at else None, at[0] if at else None,
                        at[1] if at else None, None)  # fmt: skip
        if record.get("type") not in MESSAGE_TYPES:
            builder.warn(ReadWarning(path, source.line, f"message {n} has unknown type "
                                     f"{record.get('type')!r}; kept as unknown"))  # fmt: skip
        yield from builder.record(record, source)


def is_jsonl(path: str) -> bool:
    """Whether the chat is JSON Lines: its first line is a whole JSON object."""
    with open_source(path) as handle:
        first = handle.readline()
    try:
        return isinstance(orjson.loads(first), dict)
    except orjson.JSONDecodeError:
        return False


_MESSAGE_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,200})"')


def record_ids(messages: Iterable[Message]) -> set[bytes]:
    """The ids of the records the messages were read from, as they are written in the file."""
    return {
        str(record["id"]).encode()
        for message in messages
        for record in message.records
        if isinstance(record, Mapping) and isinstance(record.get("id"), str)
    }


def first_mentions(data: bytes, offset: int, found: dict[bytes, int]) -> None:
    """Add where each id named in `data` (at byte `offset` of the file) is first named, as
    `read_gemini_tail` looks for a message's first copy (bytes scanned, not parsed); an id
    already in `found` keeps its earlier place."""
    for match in _MESSAGE_ID.finditer(data):
        found.setdefault(match.group(1), offset + match.start())


def read_gemini_tail(path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
    """`GeminiReader.read_tail`. JSON Lines: the messages of the lines from the first one
    starting in the last `window` bytes. A message appended again there whose first copy was
    written before those lines (a tool call completing) is read, as a whole read reads it, at
    the place of its first copy: the read then starts at that copy's line instead. Telling
    that scans the earlier bytes for ids, without parsing them. The single JSON document
    (before 0.39), rewritten whole every turn, is parsed whole, and only its last records,
    about `window` bytes' share of them, are built into messages (records are not long lines
    there, so what they cost is their number)."""
    if not is_jsonl(path):
        return _document_tail(path, window, warn)
    start = tail_start(path, window)
    while start:
        messages = list(_read_lines(path, warn, start))
        ids = record_ids(messages)
        with open_source(path) as handle:
            before = handle.read(start)
        earlier = [m.start() for m in _MESSAGE_ID.finditer(before) if m.group(1) in ids]
        if not earlier:
            return messages, False
        start = before.rfind(b"\n", 0, min(earlier)) + 1
    return list(_read_lines(path, warn)), True


def _document_tail(path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
    document = load_json_document(path)
    messages = document.get("messages") if isinstance(document, Mapping) else None
    if not isinstance(messages, list):
        return list(read_gemini(path, warn)), True
    size = max(1, Path(path).stat().st_size)
    keep = -(-len(messages) * window // size)  # records in about `window` bytes' share
    if keep >= len(messages):
        return list(read_gemini(path, warn)), True
    builder = _Builder(path, warn)
    head = builder.header(document, Source(path, 0, 1, 1, 0, None))
    tail = {**document, "messages": messages[len(messages) - keep :]}
    return [head, *_whole_messages(builder, tail, path, None)], False


def read_gemini(path: str, warn: WarningSink) -> Iterator[Message]:
    """The messages of a Gemini CLI chat, in either form."""
    if is_jsonl(path):
        yield from _read_lines(path, warn)
        return
    document = load_json_document(path)
    if not isinstance(document, Mapping):
        warn(ReadWarning(path, None, "not a Gemini chat object; nothing read"))
        return
    builder = _Builder(path, warn)
    yield builder.header(document, Source(path, 0, 1, 1, 0, None))
    yield from _whole_messages(builder, document, path, _message_lines(path))


_SINGLE_JSON = re.compile(
    rb'^\s*\{\s*"sessionId"\s*:\s*"[^"]{1,200}"\s*,\s*"projectHash"\s*:\s*"[0-9a-f]{8,}"'
)


def _looks_like_gemini(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    if _is_header(value):
        return "projectHash" in value
    if "$set" in value or "$rewindTo" in value:
        return len(value) == 1
    return (
        value.get("type") in MESSAGE_TYPES
        and isinstance(value.get("id"), str)
        and "content" in value
        and "uuid" not in value
        and "sessionId" not in value
    )


class GeminiReader:
    name = "gemini"
    description = "Gemini CLI chat (session JSON, or JSON Lines from 0.39 on)"
    agent = "gemini"

    def sniff(self, head: bytes, path: str) -> float:
        if _SINGLE_JSON.match(head):
            return 0.9
        values = first_json_lines(head)
        if not values:
            return 0.0
        hits = sum(1 for v in values if _looks_like_gemini(v))
        if any(isinstance(v, Mapping) and _is_header(v) and "projectHash" in v for v in values):
            return 0.9
        return 0.7 if hits * 2 > len(values) else 0.0

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_gemini(path, warn)

    def read_tail(self, path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
        return read_gemini_tail(path, window, warn)

    def document_metadata(self, path: str) -> dict[str, Any]:
        """The agent and session of a chat (from its header)."""
        meta: dict[str, Any] = {"agent": self.agent}
        head = read_head(path)
        found = re.search(rb'"sessionId"\s*:\s*"([^"\\]{1,200})"', head)
        if found:
            meta["session_id"] = found.group(1).decode("utf-8", "replace")
        project = re.search(rb'"projectHash"\s*:\s*"([0-9a-f]{8,})"', head)
        if project:
            meta["project_hash"] = project.group(1).decode()
        return meta
