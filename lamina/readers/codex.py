"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`).

Each line is `{timestamp, type, payload}` (0.171 adds `ordinal`). What becomes what:

- `response_item` is the conversation as the model saw it, and the source of messages:
  `message` (role user, assistant, developer or system), `reasoning` (its summary becomes a
  thinking block), `function_call` / `custom_tool_call` / `local_shell_call` /
  `web_search_call` (tool-use blocks, arguments parsed) and `function_call_output` /
  `custom_tool_call_output` (a user-role message holding the tool result, an error when the
  output says a non-zero exit code), `ghost_snapshot` (a snapshot).
- A user-role message is what the person typed only in the parts that are theirs: the
  environment (`<environment_context>`), AGENTS.md (`# AGENTS.md instructions for ...`),
  `<user_instructions>`, skills, aborted-turn markers and shell-command echoes are kept as
  `context` blocks (lamina.readers.agents), and so is the IDE state of "# Context from my IDE
  setup:" (only the text after "## My request for Codex:" is the person's). From 0.171 on, each
  part says what it is (`content_item_kinds`: `user.text` is typed, the rest is not).
- Developer and system messages (the harness's instructions, hook context tagged
  `hooks.additional_context`) are `instructions`.
- `compacted` is a compaction: its summary becomes a `compact_summary` message; the items of its
  `replacement_history` that are copies of earlier items of the file are not repeated, and any
  other (carried over from a session this file does not hold) become `compact_summary`
  messages too: what the host carried into the new window, never a new turn. An assistant
  message written as compaction output (`metadata.compaction_output`) is a summary as well.
- `event_msg` (both the 0.39-0.142 `user_message` / `agent_message` / `exec_command_end` /
  `token_count` events and 0.171's `item_completed` items), `turn_context`, `session_meta`,
  `world_state` and `token_usage_record` are the UI's stream and settings: they repeat what the
  response items hold, and are kept as `progress` or `system_notice` messages without text.
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
    ImageBlock,
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
    said_text,
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
    tool_arguments,
)

__all__ = ["CodexReader", "read_codex"]

LINE_TYPES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "world_state",
        "token_usage_record",
    }
)

_INJECTED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("<environment_context>", "environment_context"),
    ("<user_instructions>", "user_instructions"),
    ("# AGENTS.md instructions for", "agents_md"),
    ("<INSTRUCTIONS>", "agents_md"),
    ("<user_shell_command>", "user_shell_command"),
    ("<turn_aborted>", "turn_aborted"),
    ("<subagent_notification>", "subagent_notification"),
    ("<skill>", "skill"),
    ("<hook_context>", "hook_context"),
)

_IDE_CONTEXT = "# Context from my IDE setup:"
_IDE_REQUEST = re.compile(r"^## My request for Codex:[ \t]*\n?", re.MULTILINE)
_EXIT_CODE = re.compile(
    r"^(?:Exit code:?|Process exited with code)\s*(-?\d+)", re.MULTILINE | re.IGNORECASE
)


def _user_parts(text: str, kind: str | None) -> list[Block]:
    """One input_text part of a user-role message: the person's words as a text block, what
    the host injected as context blocks."""
    if kind is not None and not kind.startswith("user."):
        return [context_block(text, kind)]
    stripped = text.lstrip()
    for prefix, source in _INJECTED_PREFIXES:
        if stripped.startswith(prefix):
            return [context_block(text, source)]
    if stripped.startswith(_IDE_CONTEXT):
        found = _IDE_REQUEST.search(stripped)
        if found is None:
            return [context_block(text, "ide_context")]
        blocks: list[Block] = [context_block(stripped[: found.start()], "ide_context")]
        words = stripped[found.end() :]
        if words.strip():
            blocks.append(TextBlock(words))
        return blocks
    rest, tagged = strip_context_tags(text)
    blocks = [context_block(block, tag) for tag, block in tagged]
    if rest.strip():
        blocks.append(TextBlock(rest.strip() if tagged else rest))
    return blocks


def _content_kinds(payload: Mapping[str, Any]) -> list[Any]:
    meta = mapping(payload.get("internal_chat_message_metadata_passthrough"))
    kinds = meta.get("content_item_kinds")
    return list(kinds) if isinstance(kinds, list) else []


def _message_blocks(payload: Mapping[str, Any], role: str) -> list[Block]:
    content = payload.get("content")
    parts = content if isinstance(content, list) else [content] if content is not None else []
    kinds = _content_kinds(payload)
    blocks: list[Block] = []
    for n, part in enumerate(parts):
        kind = kinds[n] if n < len(kinds) and isinstance(kinds[n], str) else None
        if isinstance(part, str):
            part = {"type": "input_text", "text": part}
        if not isinstance(part, Mapping):
            blocks.append(UnknownBlock(type(part).__name__, {"value": part}))
            continue
        ptype = part.get("type")
        text = part.get("text")
        if ptype in ("input_text", "output_text", "text") and isinstance(text, str):
            if role == "user":
                blocks.extend(_user_parts(text, kind))
            else:
                blocks.append(TextBlock(text))
        elif ptype == "input_image":
            blocks.append(ImageBlock(None, dict(part)))
        else:
            blocks.append(UnknownBlock(str(ptype or ""), dict(part)))
    return blocks


def _output(raw: Any) -> tuple[str, bool]:
    """The text of a tool call's output and whether it reports a failure."""
    exit_code: Any = None
    if isinstance(raw, Mapping):
        raw = raw.get("content", raw.get("output", ""))
    if isinstance(raw, list):
        texts = [
            str(p.get("text"))
            for p in raw
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        raw = "\n".join(texts)
    text = raw if isinstance(raw, str) else orjson.dumps(raw, default=str).decode()
    if text.startswith("{") and '"output"' in text:
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, Mapping) and isinstance(parsed.get("output"), str):
            text = parsed["output"]
            exit_code = mapping(parsed.get("metadata")).get("exit_code")
    if exit_code is None:
        found = _EXIT_CODE.search(text[:2000])
        exit_code = int(found.group(1)) if found else None
    failed = (isinstance(exit_code, int) and exit_code != 0) or text.startswith(
        ("execution error:", "error:")
    )
    return text, failed


class _Builder(AgentBuilder):
    def __init__(self, path: str, warn: WarningSink) -> None:
        super().__init__(path, warn)
        self.model: str | None = None
        self.seen_items: set[str] = set()
        self.seen_user_texts: set[str] = set()
        self.unknown_types: set[str] = set()

    def feed(self, line: Line) -> Iterator[Message]:
        record = json_object(line, self.path, self.warn)
        if record is None:
            return
        rtype = record.get("type")
        payload = record.get("payload")
        if not isinstance(rtype, str) or not isinstance(payload, Mapping):
            what = "a line without a type" if not isinstance(rtype, str) else "no payload object"
            self.warn(ReadWarning(self.path, line.number, f"{what}; kept as unknown"))
            yield self.from_line(
                line, record, id=record_digest(record, "unknown"), role=Role.SYSTEM,
                blocks=(), kind=Kind.UNKNOWN, record_type=str(rtype or ""),
            )  # fmt: skip
            return
        if rtype == "session_meta":
            self.session = self.session or text_or_none(payload.get("id"))
        elif rtype == "turn_context":
            self.model = text_or_none(payload.get("model")) or self.model
        if rtype == "response_item":
            message = self._item(line, record, payload, carried=False)
            if message is not None:
                yield message
            return
        if rtype == "compacted":
            yield from self._compacted(line, record, payload)
            return
        if rtype not in LINE_TYPES and rtype not in self.unknown_types:
            self.unknown_types.add(rtype)
            self.warn(ReadWarning(self.path, line.number, f"unknown line type {rtype!r}; kept"))
        kind = Kind.PROGRESS if rtype == "event_msg" else Kind.SYSTEM_NOTICE
        if rtype not in LINE_TYPES:
            kind = Kind.UNKNOWN
        subtype = text_or_none(payload.get("type"))
        yield self.from_line(
            line, record, id=record_digest(record, rtype), role=Role.SYSTEM, blocks=(),
            kind=kind, record_type=rtype, subtype=subtype,
        )  # fmt: skip

    def _item(
        self, line: Line, record: Mapping[str, Any], payload: Mapping[str, Any], *, carried: bool
    ) -> Message | None:
        """A response item as a message; None for a carried-over copy of an earlier item."""
        ptype = text_or_none(payload.get("type")) or ""
        own_id = text_or_none(payload.get("id"))
        if carried and own_id is not None and own_id in self.seen_items:
            return None
        if own_id is not None:
            self.seen_items.add(own_id)
        ident = own_id or record_digest(payload if carried else record, ptype or "item")
        common: dict[str, Any] = {"id": ident, "record_type": "response_item", "subtype": ptype}
        if ptype == "message":
            role = payload.get("role")
            blocks = _message_blocks(payload, str(role))
            if role == "user":
                said = said_text(tuple(blocks))
                if carried and said and said in self.seen_user_texts:
                    return None
                if said:
                    self.seen_user_texts.add(said)
                kind = Kind.COMPACT_SUMMARY if carried else None
                return self.from_line(line, record, role=Role.USER, blocks=blocks, kind=kind,
                                     **common)  # fmt: skip
            if role == "assistant":
                summary = carried or bool(mapping(record.get("metadata")).get("compaction_output"))
                kind = Kind.COMPACT_SUMMARY if summary else None
                return self.from_line(line, record, role=Role.ASSISTANT, blocks=blocks,
                                     kind=kind, model=self.model, **common)  # fmt: skip
            return self.from_line(line, record, role=Role.SYSTEM, blocks=blocks,
                                 kind=Kind.INSTRUCTIONS, **common)  # fmt: skip
        if carried:
            kind_override: Kind | None = Kind.COMPACT_SUMMARY
        else:
            kind_override = None
        if ptype == "reasoning":
            texts = [
                str(p.get("text"))
                for key in ("summary", "content")
                for p in (payload.get(key) or [])
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
            block = ThinkingBlock("\n\n".join(texts))
            return self.from_line(line, record, role=Role.ASSISTANT, blocks=[block],
                                 kind=kind_override or Kind.TOOL_ACTIVITY, model=self.model,
                                 **common)  # fmt: skip
        call = self._call(payload, ptype)
        if call is not None:
            return self.from_line(line, record, role=Role.ASSISTANT, blocks=[call],
                                 kind=kind_override or Kind.TOOL_ACTIVITY, model=self.model,
                                 **common)  # fmt: skip
        if ptype in ("function_call_output", "custom_tool_call_output"):
            call_id = text_or_none(payload.get("call_id")) or ""
            if not own_id:
                common["id"] = f"{call_id}:output" if call_id else ident
            text, failed = _output(payload.get("output"))
            result = ToolResultBlock(call_id, (TextBlock(text),), failed)
            return self.from_line(line, record, role=Role.USER, blocks=[result],
                                 kind=kind_override or Kind.TOOL_ACTIVITY, **common)  # fmt: skip
        if ptype == "ghost_snapshot":
            return self.from_line(line, record, role=Role.SYSTEM, blocks=(),
                                 kind=Kind.SNAPSHOT, **common)  # fmt: skip
        return self.from_line(line, record, role=Role.SYSTEM, blocks=(),
                             kind=kind_override or Kind.UNKNOWN, **common)  # fmt: skip

    def _call(self, payload: Mapping[str, Any], ptype: str) -> ToolUseBlock | None:
        call_id = text_or_none(payload.get("call_id")) or text_or_none(payload.get("id")) or ""
        name = text_or_none(payload.get("name"))
        if ptype == "function_call":
            return ToolUseBlock(
                call_id, name or "", tool_arguments(payload.get("arguments"), "input")
            )
        if ptype == "custom_tool_call":
            return ToolUseBlock(call_id, name or "", tool_arguments(payload.get("input"), "input"))
        if ptype == "local_shell_call":
            return ToolUseBlock(call_id, "local_shell", dict(mapping(payload.get("action"))))
        if ptype == "web_search_call":
            return ToolUseBlock(call_id, "web_search", dict(mapping(payload.get("action"))))
        return None

    def _compacted(
        self, line: Line, record: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> Iterator[Message]:
        summary = payload.get("message")
        blocks: list[Block] = [TextBlock(summary)] if isinstance(summary, str) and summary else []
        yield self.from_line(
            line, record, id=record_digest(record, "compacted"), role=Role.USER,
            blocks=blocks, kind=Kind.COMPACT_SUMMARY, record_type="compacted",
        )  # fmt: skip
        history = payload.get("replacement_history")
        for item in history if isinstance(history, list) else []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "message" and isinstance(summary, str) and summary.strip():
                texts = _message_blocks(item, "assistant")  # every text part, as written
                if said_text(tuple(texts)).strip() == summary.strip():
                    continue  # the summary itself, handed to the model as a user message
            message = self._item(line, record, item, carried=True)
            if message is not None:
                yield message


def read_codex(
    path: str, warn: WarningSink, *, start: int = 0, stop: int | None = None
) -> Iterator[Message]:
    """Stream the messages of a Codex rollout file, or of its lines from byte `start` (a line
    start) on, up to byte `stop` (a line start). Each line's messages come from that line
    alone: what earlier lines add is the session id and model, and leaving out a compaction's
    copies of earlier items (its other carried items are compaction summaries, which start no
    turn and say nothing)."""
    builder = _Builder(path, warn)
    lines = iter_json_lines(path, warn, start=start, stop=stop, first_line=None if start else 1)
    for line in lines:
        yield from builder.feed(line)


def _looks_like_codex(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and value.get("type") in LINE_TYPES
        and isinstance(value.get("payload"), Mapping)
        and "timestamp" in value
    )


_CODEX_START = re.compile(
    rb'^\s*\{\s*"timestamp"\s*:\s*"[^"]{1,40}"\s*,\s*(?:"ordinal"\s*:\s*\d+\s*,\s*)?'
    rb'"type"\s*:\s*"(?:session_meta|response_item|event_msg|turn_context)"\s*,\s*"payload"'
)
"""The start of a rollout line, for a first line longer than the head sniffing reads (a
session_meta carrying a long system prompt)."""


class CodexReader:
    name = "codex"
    description = "Codex CLI session rollout (JSON Lines)"
    agent = "codex"

    def sniff(self, head: bytes, path: str) -> float:
        values = first_json_lines(head)
        if values:
            # Its line shapes are distinctive enough for one to decide, as for Claude Code: a
            # file with damaged lines among them is still recognised.
            return 0.9 if any(_looks_like_codex(v) for v in values) else 0.0
        return 0.9 if _CODEX_START.match(head) else 0.0

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_codex(path, warn)

    def read_tail(self, path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
        return read_lines_tail(read_codex, path, window, warn)

    def read_span(
        self, path: str, start: int, stop: int | None, warn: WarningSink
    ) -> Iterator[Message]:
        return read_codex(path, warn, start=start, stop=stop)

    def document_metadata(self, path: str) -> dict[str, Any]:
        """The agent, session, version and working directory of a rollout (from its first
        `session_meta` line)."""
        meta: dict[str, Any] = {"agent": self.agent}
        for value in first_json_lines(read_head(path), limit=5):
            if isinstance(value, Mapping) and value.get("type") == "session_meta":
                payload = mapping(value.get("payload"))
                for key, field in (
                    ("session_id", "id"),
                    ("agent_version", "cli_version"),
                    ("cwd", "cwd"),
                    ("originator", "originator"),
                ):
                    if text_or_none(payload.get(field)):
                        meta[key] = payload[field]
                break
        if "session_id" not in meta:
            found = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
                              Path(path).name)  # fmt: skip
            if found:
                meta["session_id"] = found.group(1)
        return meta
