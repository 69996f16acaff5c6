"""A scripted Anthropic Messages API on 127.0.0.1, for driving the real Claude Code CLI offline.

Every request body is kept (`ScriptedAPI.requests`), so a test sees exactly what the CLI sent,
hooks' injected context included. Replies come from a `Script`: a function from the request
body to the content blocks of the answer (text, or a tool call the CLI will run). The answer is
streamed as server-sent events when the request asks for it, as the CLI does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from .fake_server import Reply, ScriptedServer

__all__ = ["Script", "ScriptedAPI", "last_user_text", "text_of"]

Block = dict[str, Any]
Script = Callable[[Mapping[str, Any]], list[Block]]


def text_of(content: Any) -> str:
    """All text of a message's content (a string or a list of blocks), tool results included."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content")))
    return "\n".join(parts)


def last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def _say_ok(body: Mapping[str, Any]) -> list[Block]:
    return [{"type": "text", "text": "OK."}]


class ScriptedAPI(ScriptedServer):
    """`with ScriptedAPI(script) as api:` serves on `api.url` until the block ends."""

    headers: ClassVar[dict[str, str]] = {"request-id": "req_scripted"}

    def __init__(self, script: Script = _say_ok) -> None:
        super().__init__()
        self.script = script

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        path = path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            size = len(json.dumps(body)) // 4
            return 200, "application/json", json.dumps({"input_tokens": size}).encode()
        if not path.endswith("/v1/messages"):
            self.note(f"POST {path}")
            return 404, "application/json", b'{"type":"error"}'
        number = self.keep(body)
        try:
            blocks = self.script(body)
        except Exception as exc:  # a broken script must show, not hang the CLI
            blocks = [{"type": "text", "text": f"script failed: {exc!r}"}]
        message = self._message(f"msg_{number:04d}", body, blocks)
        if body.get("stream"):
            return 200, "text/event-stream", b"".join(self._events(message))
        return 200, "application/json", json.dumps(message).encode()

    def _message(self, ident: str, body: Mapping[str, Any], blocks: list[Block]) -> dict[str, Any]:
        stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
        return {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-scripted",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @staticmethod
    def _events(message: Mapping[str, Any]) -> Iterator[bytes]:
        def event(name: str, data: Mapping[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

        start = {**message, "content": [], "stop_reason": None}
        yield event("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(message["content"]):
            if block.get("type") == "tool_use":
                opening = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                opening = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block.get("text", "")}
            yield event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
            yield event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            yield event("content_block_stop", {"type": "content_block_stop", "index": index})
        yield event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        yield event("message_stop", {"type": "message_stop"})
