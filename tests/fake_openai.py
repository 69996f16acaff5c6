"""A scripted OpenAI API on 127.0.0.1 (Responses and Chat Completions), for driving the real
Codex CLI and Copilot CLI offline.

Codex (0.171) speaks only the Responses wire API to a custom provider: it POSTs to
`<base_url>/responses` with `"stream": true` and reads server-sent events. Copilot CLI (1.0.102)
with `COPILOT_PROVIDER_BASE_URL` speaks Chat Completions: `<base_url>/chat/completions`, streamed
as `chat.completion.chunk` events ending in `[DONE]`. Every request body is kept
(`ScriptedResponses.requests`), so a test sees exactly what the CLI sent, the messages its hooks
added included. Replies come from a `Script`: a function from the request body to the reply's
text. Anything else the CLI asks for (a model list) gets an empty answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .fake_server import Reply, ScriptedServer

__all__ = ["Script", "ScriptedResponses", "input_messages", "last_user_text"]

Script = Callable[[Mapping[str, Any]], str]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    texts = [p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return "\n".join(texts)


def input_messages(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request's input messages (Chat Completions: its messages) as (role, text), in
    order."""
    items = body.get("input") if "input" in body else body.get("messages")
    return [
        (str(item.get("role")), _text(item.get("content")))
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, Mapping) and item.get("type", "message") == "message"
    ]


def last_user_text(body: Mapping[str, Any]) -> str:
    users = [text for role, text in input_messages(body) if role == "user"]
    return users[-1] if users else ""


def _say_ok(body: Mapping[str, Any]) -> str:
    return "OK."


class ScriptedResponses(ScriptedServer):
    """`with ScriptedResponses(script) as api:` serves on `api.url` (ending in /v1)."""

    base_path = "/v1"
    listing = b'{"object":"list","data":[],"models":[]}'

    def __init__(self, script: Script = _say_ok) -> None:
        super().__init__()
        self.script = script

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        route = path.split("?", 1)[0]
        chat = route.endswith("/chat/completions")
        if not chat and not route.endswith("/responses"):
            self.note(f"POST {path}")
            return 404, "application/json", b'{"error":{"message":"not here"}}'
        number = self.keep(body)
        try:
            text = self.script(body)
        except Exception as exc:  # a broken script must show, not hang the CLI
            text = f"script failed: {exc!r}"
        if chat and not body.get("stream"):
            done = _completion(f"chatcmpl_{number:04d}", body, text)
            return 200, "application/json", json.dumps(done).encode()
        events = _chunks if chat else _events
        return 200, "text/event-stream", b"".join(events(f"resp_{number:04d}", body, text))


def _events(ident: str, body: Mapping[str, Any], text: str) -> Iterator[bytes]:
    def event(name: str, data: Mapping[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    model = body.get("model") or "fake-model"
    item = {
        "type": "message",
        "id": f"msg_{ident}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    response = {"id": ident, "object": "response", "model": model, "output": []}
    yield event("response.created", {"response": {**response, "status": "in_progress"}})
    yield event("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}})
    yield event(
        "response.output_text.delta",
        {"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text},
    )
    yield event("response.output_item.done", {"output_index": 0, "item": item})
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    done = {**response, "status": "completed", "output": [item], "usage": usage}
    yield event("response.completed", {"response": done})


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _completion(ident: str, body: Mapping[str, Any], text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"id": ident, "object": "chat.completion", "created": 0,
            "model": body.get("model") or "fake-model", "usage": _USAGE,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip


def _chunks(ident: str, body: Mapping[str, Any], text: str) -> Iterator[bytes]:
    """A Chat Completions stream: the role, the text, the finish reason with usage, [DONE]."""

    def chunk(delta: Mapping[str, Any], finish: str | None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        model = body.get("model") or "fake-model"
        data = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [choice], **extra}  # fmt: skip
        return f"data: {json.dumps(data)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""}, None)
    yield chunk({"content": text}, None)
    yield chunk({}, "stop", usage=_USAGE)
    yield b"data: [DONE]\n\n"
