"""What the scripted model servers share (tests/fake_anthropic.py, fake_openai.py,
fake_gemini.py): an HTTP server on 127.0.0.1 on a free port, in a thread for the length of a
`with` block, that keeps every model request's body (`requests`) and names every other request
(`other`, "METHOD path"). A subclass answers POSTs (`answer`); GET and HEAD get `listing`.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

__all__ = ["Reply", "ScriptedServer"]

Reply = tuple[int, str, bytes]
"""Status, content type and body of an answer."""


class ScriptedServer:
    """`with Subclass(...) as api:` serves on `api.url` until the block ends."""

    base_path: ClassVar[str] = ""
    """What `url` ends with (`/v1` for the OpenAI-compatible APIs)."""
    listing: ClassVar[bytes] = b"{}"
    """The answer to every GET and HEAD (model listings)."""
    headers: ClassVar[dict[str, str]] = {}
    """Extra headers of every answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.other: list[str] = []
        """Requests that were not model requests ("METHOD path")."""
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_HEAD(self) -> None:
                server.note(f"HEAD {self.path}")
                self._send((200, "application/json", server.listing))

            def do_GET(self) -> None:
                server.note(f"GET {self.path}")
                self._send((200, "application/json", server.listing))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                self._send(server.answer(self.path, body))

            def _send(self, reply: Reply) -> None:
                status, kind, payload = reply
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                for name, value in server.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        """The answer to `POST path` (query string included) with this JSON body."""
        raise NotImplementedError

    def note(self, request: str) -> None:
        """Name a request that was not a model request."""
        with self._lock:
            self.other.append(request)

    def keep(self, body: dict[str, Any]) -> int:
        """Keep a model request's body; its number (1, 2, ...)."""
        with self._lock:
            self.requests.append(body)
            return next(self._ids)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.base_path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
