"""A scripted Gemini API (generateContent / streamGenerateContent) on 127.0.0.1, for driving
the real Gemini CLI offline.

The CLI (0.61), with `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT` and an API key, POSTs to
`/v1beta/models/<model>:streamGenerateContent?alt=sse` and reads server-sent events, each a
`GenerateContentResponse`; `:generateContent` (the model classifier, when no `-m` is given)
gets the same answer as one JSON document, and `:countTokens` a count. Every request body is
kept (`ScriptedGemini.requests`, with the model and method in `_model` and `_method`), so a
test sees exactly what the CLI sent, the parts its hooks added included. Replies come from a
`Script`: a function from the request body to the reply's text.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from typing import Any

from .fake_server import Reply, ScriptedServer

__all__ = ["Script", "ScriptedGemini", "contents", "last_user_text", "unescaped"]

Script = Callable[[Mapping[str, Any]], str]


def contents(body: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The request's contents as (role, [text of each text part]), in order."""
    found = []
    for item in body.get("contents") or []:
        if not isinstance(item, Mapping):
            continue
        parts = item.get("parts") if isinstance(item.get("parts"), list) else []
        texts = [
            p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        found.append((str(item.get("role")), texts))
    return found


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user content, without the parts hooks added (`<hook_context>`)."""
    users = [
        "\n".join(t for t in texts if not t.startswith("<hook_context>"))
        for role, texts in contents(body)
        if role == "user" and texts
    ]
    return users[-1] if users else ""


def unescaped(text: str) -> str:
    """Gemini CLI 0.61 HTML-escapes every hook's additionalContext (`<` as `&lt;`): the text as
    the hook wrote it."""
    return html.unescape(text)


def _say_ok(body: Mapping[str, Any]) -> str:
    return "OK."


class ScriptedGemini(ScriptedServer):
    """`with ScriptedGemini(script) as api:` serves on `api.url` (GOOGLE_GEMINI_BASE_URL).
    `requests` hold the model and method too (`_model`, `_method`)."""

    listing = b'{"models":[]}'

    def __init__(self, script: Script = _say_ok) -> None:
        super().__init__()
        self.script = script

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        model, _, method = path.split("?", 1)[0].rpartition("/")[2].partition(":")
        if method == "countTokens":
            self.note(f"POST {path}")
            return 200, "application/json", b'{"totalTokens":100}'
        if method not in ("generateContent", "streamGenerateContent"):
            self.note(f"POST {path}")
            return 404, "application/json", b'{"error":{"code":404,"message":"no"}}'
        self.keep({**body, "_model": model, "_method": method})
        try:
            text = self.script(body)
        except Exception as exc:  # a broken script must show, not hang the CLI
            text = f"script failed: {exc!r}"
        answer = json.dumps(_response(model, text)).encode()
        if method == "generateContent":
            return 200, "application/json", answer
        return 200, "text/event-stream", b"data: " + answer + b"\r\n\r\n"


def _response(model: str, text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 100,
            "candidatesTokenCount": 10,
            "totalTokenCount": 110,
        },
        "modelVersion": model or "gemini-2.5-flash",
    }
