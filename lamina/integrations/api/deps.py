"""What the HTTP API's routes are given: who is asking (`Auth`), the memory bank and the open
context logs of the app (`Memory`, `Logs`, from `app.state`), a page of a list (`Paged`), and
`bank_for`, the one check that a bank may be used."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, TypeVar

from fastapi import Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...access import Access, Gate
from ...bank.bank import MemoryBank
from ...context.logs import ContextLogs
from ...store.lookup import missing_bank

__all__ = ["Auth", "Logs", "Memory", "Page", "Paged", "bank_for", "invalid"]

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="api_key",
    description="A key from `lamina keys create NAME --bank B`, as `Authorization: Bearer "
    "<key>`. A server on loopback with no key at all asks for its local token instead (the "
    "local-token file in Lamina's data directory).",
)


def access(
    request: Request,
    _key: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
) -> Access:
    """Who is asking: every bank for the local token (or a browser's session) while the gate
    is open, else the key's banks."""
    gate: Gate = request.app.state.gate
    session = request.cookies.get(gate.cookie)
    if session is not None and request.method not in _SAFE and not _same_origin(request):
        session = None  # a write from another page does not ride on the browser's session
    return gate.access(request.headers.get("authorization"), session)


_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def _same_origin(request: Request) -> bool:
    """Whether a browser says the request comes from a page of this server. Cookies do not
    tell ports apart, so a page another local user serves on loopback is "same site" and
    would be sent the session cookie: writes carrying only the cookie must come from here."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"
    return request.headers.get("sec-fetch-site", "same-origin") == "same-origin"


Auth = Annotated[Access, Depends(access)]


def _memory(request: Request) -> MemoryBank:
    bank: MemoryBank = request.app.state.memory
    return bank


def _logs(request: Request) -> ContextLogs:
    logs: ContextLogs = request.app.state.logs
    return logs


Memory = Annotated[MemoryBank, Depends(_memory)]
Logs = Annotated[ContextLogs, Depends(_logs)]


def bank_for(memory: MemoryBank, auth: Access, bank: str, *, must_exist: bool = True) -> str:
    """`bank` if this caller may use it (and, with `must_exist`, it exists); else the same
    404 whether it is absent or another key's."""
    if not auth.allows(bank):
        raise missing_bank(bank)
    return memory.require_bank(bank) if must_exist else bank


T = TypeVar("T")


class Page:
    """`limit` and `offset` of a list endpoint; `counts` gives what the answer says of them."""

    def __init__(
        self,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many items.")] = 100,
        offset: Annotated[int, Query(ge=0, description="Items to skip, from the first.")] = 0,
    ) -> None:
        self.limit = limit
        self.offset = offset

    def of(self, items: Sequence[T]) -> Sequence[T]:
        return items[self.offset : self.offset + self.limit]

    def counts(self, total: int) -> dict[str, int]:
        return {"total": total, "limit": self.limit, "offset": self.offset}


Paged = Annotated[Page, Depends()]


def invalid(field: str, message: str) -> RequestValidationError:
    """A 422 naming the body field, in the shape of pydantic's own validation errors."""
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])
