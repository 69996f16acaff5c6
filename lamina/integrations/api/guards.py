"""What stands before the HTTP API's routes: a body size limit and, while no key exists, a
check that requests are addressed to loopback (against DNS rebinding)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...access import Gate
from .errors import error_response

__all__ = ["BodyLimit", "LoopbackHosts"]


class BodyLimit:
    """Refuses request bodies over `limit` bytes with 413, whether or not they declare their
    length, without reading more than the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = error_response(413, "too_large", f"request body over {self.limit} bytes")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await too_large(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # No declared length (a chunked body): read it here, up to the limit, so an oversized
        # one gets 413 before the app sees it (the app would only know "could not read").
        messages: list[Message] = []
        received = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > self.limit:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LoopbackHosts:
    """While the gate is open (no key), answers only requests whose Host names loopback: a web
    page on another site cannot reach a keyless server through DNS rebinding."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.gate.open:
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if _host_name(host.strip().lower()) not in _LOOPBACK_NAMES:
                refused = error_response(
                    421, "misdirected", "this server answers loopback names only"
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
