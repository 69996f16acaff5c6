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
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


class ScriptedGemini:
    """`with ScriptedGemini(script) as api:` serves on `api.url` (GOOGLE_GEMINI_BASE_URL)."""

    def __init__(self, script: Script = _say_ok) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.other: list[str] = []
        """Requests other than generateContent and streamGenerateContent ("METHOD path")."""
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                with api._lock:
                    api.other.append(f"GET {self.path}")
                self._send(200, "application/json", b'{"models":[]}')

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                model, _, method = path.rpartition("/")[2].partition(":")
                if method == "countTokens":
                    with api._lock:
                        api.other.append(f"POST {self.path}")
                    self._send(200, "application/json", b'{"totalTokens":100}')
                    return
                if method not in ("generateContent", "streamGenerateContent"):
                    with api._lock:
                        api.other.append(f"POST {self.path}")
                    self._send(404, "application/json", b'{"error":{"code":404,"message":"no"}}')
                    return
                with api._lock:
                    api.requests.append({**body, "_model": model, "_method": method})
                try:
                    text = api.script(body)
                except Exception as exc:  # a broken script must show, not hang the CLI
                    text = f"script failed: {exc!r}"
                answer = json.dumps(_response(model, text)).encode()
                if method == "generateContent":
                    self._send(200, "application/json", answer)
                else:
                    self._send(200, "text/event-stream", b"data: " + answer + b"\r\n\r\n")

            def _send(self, status: int, kind: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedGemini:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


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
