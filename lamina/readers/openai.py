"""OpenAI chat completions message lists (JSON or JSON Lines).

The containers are those of the `anthropic` reader: a JSON array of messages, an object with
`messages` (a chat completions request), or JSON Lines with one message (or one
`{"messages": [...]}` object) a line. Record numbering, ids and warnings work the same way.

Roles and how they map:

- `system`, `developer`: role SYSTEM, kind INSTRUCTIONS;
- `user`, `assistant`: as they are, kind from the conversational text (`lamina.turns.classify`);
- `tool`: role USER holding one `ToolResultBlock` whose `tool_use_id` is the `tool_call_id`, so
  tool results sit where Anthropic-style transcripts put them and never start a turn;
- `function` (the legacy form): likewise, paired with the latest unanswered `function_call` of
  the same name.

`content` is a string, null, or a list of parts: `text` parts become text blocks, `image_url`
parts image blocks (media type taken from a `data:` URL), other parts (`input_audio`, `file`,
`refusal`, ...) are kept as `UnknownBlock`. An assistant's `tool_calls` become `ToolUseBlock`s
whose input is the parsed `arguments` JSON object (`{"_raw": arguments}` when that is not a JSON
object); an assistant's `refusal` and `audio` are kept as `UnknownBlock`. A message's `name`
becomes `Message.speaker`. Consecutive tool messages stay separate messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from lamina.messages import (
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)

from .anthropic import (
    MessageListReader,
    MessageRecord,
    RecordContext,
    iter_message_records,
    message_role,
    optional_str,
)
from .base import WarningSink, tool_arguments

__all__ = ["OpenAIReader", "openai_builder", "read_openai"]

_ROLES = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.USER,
    "function": Role.USER,
}

_DATA_URL = re.compile(r"data:([^;,]+)[;,]")


def _image_block(part: Mapping[str, Any]) -> ImageBlock:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    return ImageBlock(match.group(1) if match else None, dict(part))


def _part_block(part: Any) -> Block:
    if isinstance(part, str):
        return TextBlock(part)
    if not isinstance(part, Mapping):
        return UnknownBlock(type(part).__name__, {"value": part})
    ptype = part.get("type")
    if ptype == "text" and isinstance(part.get("text"), str):
        return TextBlock(part["text"])
    if ptype == "image_url":
        return _image_block(part)
    return UnknownBlock(str(ptype) if ptype is not None else "", dict(part))


def _content_blocks(content: Any) -> list[Block]:
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [_part_block(part) for part in content]
    return [_part_block(content)]


def _tool_call_block(call: Any) -> Block:
    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
        function = call.get("function")
        if call.get("type", "function") == "function" and isinstance(function, Mapping):
            name = function.get("name")
            return ToolUseBlock(
                call["id"],
                name if isinstance(name, str) else "",
                tool_arguments(function.get("arguments"), "_raw"),
            )
    if isinstance(call, Mapping):
        ctype = call.get("type")
        return UnknownBlock(str(ctype) if ctype is not None else "tool_call", dict(call))
    return UnknownBlock(type(call).__name__, {"value": call})


class _Builder:
    def __init__(self, path: str, warn: WarningSink) -> None:
        self.ctx = RecordContext(path, warn)
        self.open_functions: dict[str, list[str]] = {}
        """Ids of legacy `function_call`s not yet answered, by function name."""

    def _assistant_blocks(self, value: Mapping[str, Any], message_id: str) -> list[Block]:
        blocks = _content_blocks(value.get("content"))
        refusal = value.get("refusal")
        if isinstance(refusal, str) and refusal:
            blocks.append(UnknownBlock("refusal", {"type": "refusal", "refusal": refusal}))
        if value.get("audio") is not None:
            blocks.append(UnknownBlock("audio", {"type": "audio", "audio": value["audio"]}))
        calls = value.get("tool_calls")
        blocks.extend(_tool_call_block(c) for c in (calls if isinstance(calls, list) else ()))
        legacy = value.get("function_call")
        if isinstance(legacy, Mapping):
            name = optional_str(legacy.get("name")) or ""
            call_id = f"{message_id}:function_call"
            self.open_functions.setdefault(name, []).append(call_id)
            blocks.append(
                ToolUseBlock(call_id, name, tool_arguments(legacy.get("arguments"), "_raw"))
            )
        return blocks

    def _result_block(self, record: MessageRecord, value: Mapping[str, Any]) -> ToolResultBlock:
        content = tuple(_content_blocks(value.get("content")))
        if value.get("role") == "function":
            name = optional_str(value.get("name")) or ""
            waiting = self.open_functions.get(name)
            call_id = waiting.pop(0) if waiting else f"function:{name}"
            return ToolResultBlock(call_id, content)
        tool_call_id = optional_str(value.get("tool_call_id"))
        if tool_call_id is None:
            self.ctx.warn(record, "tool message without a tool_call_id; kept unpaired")
        return ToolResultBlock(tool_call_id or "", content)

    def message(self, record: MessageRecord) -> Message | None:
        ctx = self.ctx
        value = record.value
        if record.system_field:  # a top-level "system" beside "messages"
            value = {"role": "system", "content": value}
        found = message_role(ctx, record, value, _ROLES)
        if found is None:
            return None
        role_name, role = found
        message_id = ctx.message_id(record)
        blocks: list[Block]
        if role_name in ("tool", "function"):
            blocks = [self._result_block(record, value)]
        elif role is Role.ASSISTANT:
            blocks = self._assistant_blocks(value, message_id)
        else:
            blocks = _content_blocks(value.get("content"))
        return ctx.message(
            record,
            value,
            found,
            blocks,
            id=message_id,
            speaker=optional_str(value.get("name")),
            stop_reason=optional_str(value.get("finish_reason")),
            records=({"system": record.value} if record.system_field else value,),
        )


def openai_builder(path: str, warn: WarningSink) -> _Builder:
    """What turns the records of one OpenAI message list into messages, record by record
    (`.message(record)`), pairing legacy function calls with their results."""
    return _Builder(path, warn)


def read_openai(path: str, warn: WarningSink) -> Iterator[Message]:
    """Stream the messages of an OpenAI chat completions message-list file."""
    builder = _Builder(path, warn)
    for record in iter_message_records(path, warn):
        message = builder.message(record)
        if message is not None:
            yield message


class OpenAIReader(MessageListReader):
    name = "openai"
    description = "OpenAI chat completions message list (JSON array, {messages}, JSONL)"

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_openai(path, warn)
