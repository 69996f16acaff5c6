"""GitHub Copilot CLI sessions (`~/.copilot/session-state/<session id>/events.jsonl`).

Each line is an event `{type, data, id, timestamp, parentId}`. What becomes what:

- `user.message`: `data.content` is what the person typed; `data.transformedContent` (the same
  text with the current time, `<system_reminder>` hook context and other reminders the CLI adds)
  is kept as a `context` block (lamina.readers.agents). A message the CLI sends on its own (an
  autopilot nudge: empty `content`) starts no turn.
- `assistant.message`: `content` (text), `reasoningText` (a thinking block), `toolRequests`
  (tool-use blocks).
- `tool.execution_complete`: a user-role message holding the tool result (an error unless
  `success`).
- `system.message`: the system prompt (`instructions`).
- `session.*` events are notices; `tool.execution_start`, `hook.*`, `assistant.turn_*` and
  usage records are `progress`. Both are kept without text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import ReadWarning
from ..messages import (
    Block,
    Kind,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)
from .agents import (
    AgentBuilder,
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
    read_head,
    read_lines_tail,
)

__all__ = ["CopilotReader", "read_copilot"]

_PROGRESS_PREFIXES = ("tool.", "hook.", "assistant.", "skill.", "subagent.")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _result_text(data: Mapping[str, Any]) -> str:
    result = data.get("result")
    if isinstance(result, Mapping):
        content = result.get("content")
        if isinstance(content, str):
            return content
        if content is not None:
            return orjson.dumps(content, default=str).decode()
    if isinstance(result, str):
        return result
    error = data.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"])
    return error if isinstance(error, str) else ""


class _Builder(AgentBuilder):
    def __init__(self, path: str, warn: WarningSink) -> None:
        super().__init__(path, warn)
        self.model: str | None = None

    def _message(
        self,
        line: Line,
        record: Mapping[str, Any],
        *,
        role: Role,
        blocks: list[Block],
        kind: Kind | None,
        rtype: str,
        model: str | None = None,
    ) -> Message:
        ident = text_or_none(record.get("id")) or record_digest(record, rtype or "event")
        return self.from_line(
            line, record, id=ident, role=role, blocks=blocks, kind=kind, record_type=rtype,
            model=model,
        )  # fmt: skip

    def feed(self, line: Line) -> Iterator[Message]:
        record = json_object(line, self.path, self.warn)
        if record is None:
            return
        rtype = record.get("type")
        data = record.get("data")
        if not isinstance(rtype, str) or not isinstance(data, Mapping):
            what = "an event without a type" if not isinstance(rtype, str) else "no data object"
            self.warn(ReadWarning(self.path, line.number, f"{what}; kept as unknown"))
            yield self._message(line, record, role=Role.SYSTEM, blocks=[], kind=Kind.UNKNOWN,
                                rtype=str(rtype or ""))  # fmt: skip
            return
        if rtype == "session.start":
            self.session = self.session or text_or_none(data.get("sessionId"))
            self.model = text_or_none(data.get("selectedModel")) or self.model
        elif rtype == "session.model_change":
            self.model = text_or_none(data.get("newModel")) or self.model
        if rtype == "user.message":
            yield self._message(line, record, role=Role.USER, blocks=self._user(data),
                                kind=None, rtype=rtype)  # fmt: skip
        elif rtype == "assistant.message":
            model = text_or_none(data.get("model")) or self.model
            yield self._message(line, record, role=Role.ASSISTANT, blocks=self._assistant(data),
                                kind=None, rtype=rtype, model=model)  # fmt: skip
        elif rtype == "tool.execution_complete":
            call_id = text_or_none(data.get("toolCallId")) or ""
            failed = data.get("success") is False
            result = ToolResultBlock(call_id, (TextBlock(_result_text(data)),), failed)
            yield self._message(line, record, role=Role.USER, blocks=[result],
                                kind=Kind.TOOL_ACTIVITY, rtype=rtype)  # fmt: skip
        elif rtype == "system.message":
            content = data.get("content")
            blocks: list[Block] = [TextBlock(content)] if isinstance(content, str) else []
            yield self._message(line, record, role=Role.SYSTEM, blocks=blocks,
                                kind=Kind.INSTRUCTIONS, rtype=rtype)  # fmt: skip
        else:
            if rtype.startswith(_PROGRESS_PREFIXES) or rtype.endswith("usage_record"):
                kind = Kind.PROGRESS
            elif "." in rtype:
                kind = Kind.SYSTEM_NOTICE
            else:
                self.warn(ReadWarning(self.path, line.number, f"unknown event {rtype!r}; kept"))
                kind = Kind.UNKNOWN
            yield self._message(line, record, role=Role.SYSTEM, blocks=[], kind=kind,
                                rtype=rtype)  # fmt: skip

    def _user(self, data: Mapping[str, Any]) -> list[Block]:
        blocks: list[Block] = []
        content = data.get("content")
        if isinstance(content, str) and content.strip():
            rest, tagged = strip_context_tags(content)
            blocks.extend(context_block(block, tag) for tag, block in tagged)
            if rest.strip():
                blocks.append(TextBlock(rest.strip() if tagged else rest))
        transformed = data.get("transformedContent")
        if isinstance(transformed, str) and transformed.strip() and transformed != content:
            blocks.append(context_block(transformed, "transformed_prompt"))
        for attachment in data.get("attachments") or []:
            blocks.append(UnknownBlock("attachment", dict(mapping(attachment))))
        return blocks

    def _assistant(self, data: Mapping[str, Any]) -> list[Block]:
        blocks: list[Block] = []
        reasoning = data.get("reasoningText")
        if isinstance(reasoning, str) and reasoning:
            blocks.append(ThinkingBlock(reasoning))
        content = data.get("content")
        if isinstance(content, str) and content:
            blocks.append(TextBlock(content))
        for n, request in enumerate(data.get("toolRequests") or []):
            request = mapping(request)
            call_id = text_or_none(request.get("toolCallId")) or f"call{n}"
            args = request.get("arguments")
            args = dict(args) if isinstance(args, Mapping) else {"input": args}
            blocks.append(ToolUseBlock(call_id, text_or_none(request.get("name")) or "", args))
        return blocks


def read_copilot(
    path: str, warn: WarningSink, *, start: int = 0, stop: int | None = None
) -> Iterator[Message]:
    """Stream the messages of a Copilot CLI `events.jsonl`, or of its events from byte `start`
    (a line start) on, up to byte `stop` (a line start). Each event's message comes from that
    event alone (earlier ones add the session id and model)."""
    builder = _Builder(path, warn)
    lines = iter_json_lines(path, warn, start=start, stop=stop, first_line=None if start else 1)
    for line in lines:
        yield from builder.feed(line)


def _looks_like_copilot(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    rtype = value.get("type")
    return (
        isinstance(rtype, str)
        and "." in rtype
        and isinstance(value.get("data"), Mapping)
        and isinstance(value.get("id"), str)
        and "parentId" in value
    )


class CopilotReader:
    name = "copilot"
    description = "GitHub Copilot CLI session events (events.jsonl)"
    agent = "copilot"

    def sniff(self, head: bytes, path: str) -> float:
        values = first_json_lines(head)
        if not values:
            return 0.0
        # Its line shapes are distinctive enough for one to decide, as for Claude Code: a file
        # with damaged lines among them is still recognised.
        return 0.9 if any(_looks_like_copilot(v) for v in values) else 0.0

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_copilot(path, warn)

    def read_tail(self, path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
        return read_lines_tail(read_copilot, path, window, warn)

    def read_span(
        self, path: str, start: int, stop: int | None, warn: WarningSink
    ) -> Iterator[Message]:
        return read_copilot(path, warn, start=start, stop=stop)

    def document_metadata(self, path: str) -> dict[str, Any]:
        """The agent, session, version and working directory (from `session.start`)."""
        meta: dict[str, Any] = {"agent": self.agent}
        for value in first_json_lines(read_head(path), limit=10):
            if isinstance(value, Mapping) and value.get("type") == "session.start":
                data = mapping(value.get("data"))
                if text_or_none(data.get("sessionId")):
                    meta["session_id"] = data["sessionId"]
                if text_or_none(data.get("copilotVersion")):
                    meta["agent_version"] = data["copilotVersion"]
                cwd = mapping(data.get("context")).get("cwd")
                if isinstance(cwd, str) and cwd:
                    meta["cwd"] = cwd
                break
        folder = Path(path).parent.name
        if "session_id" not in meta and _UUID.match(folder):
            meta["session_id"] = folder
        return meta
