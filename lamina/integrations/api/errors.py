"""The one place the HTTP API turns failures into answers: `{"error": {"type", "message"}}`.

Lamina's exceptions map to a stable, snake_case `type` (and through it a status code) here and
nowhere else; so do FastAPI's own refusals (unknown route, wrong method, invalid body) and
anything unexpected (`internal`, with no details). `errors(...)` documents a route's error
answers in /openapi.json with the same model.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...context.frontier import OverBudgetError
from ...context.pins import PinConflictError
from ...errors import (
    AccessError,
    ConfigError,
    InputError,
    LaminaError,
    NotFoundError,
    ReadError,
    StoreError,
    UnknownFormatError,
)
from .models import ErrorBody

__all__ = ["ERROR_TYPES", "error_response", "error_type", "errors", "install", "status_of"]

ERROR_TYPES: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "the request is well formed but cannot be done as asked (400), "
                        "or a field is missing, mistyped or unknown (422)"),
    "unauthorized": (401, "no API key, or one that is not valid"),
    "not_found": (404, "no such bank, document, memory, log, pin, operation or route (a bank "
                  "another key's is reported as absent)"),
    "method_not_allowed": (405, "the path exists, not with this method"),
    "conflict": (409, "the pin overlaps another pin in a way that cannot hold"),
    "too_large": (413, "the request body is over the server's limit (--max-body)"),
    "unsupported_format": (415, "the messages are in no format Lamina reads, or the named "
                           "format does not exist"),
    "misdirected": (421, "a server without keys answers only requests addressed to loopback"),
    "unreadable_input": (422, "the messages could not be read"),
    "over_budget": (422, "what must be shown raw does not fit the budget"),
    "internal": (500, "a fault of the server (its configuration or a bug); the message says "
                 "no more than that"),
    "store_unavailable": (503, "the database failed or was busy; try again"),
}  # fmt: skip
"""Every error answer is `{"error": {"type": TYPE, "message": ...}}`; these are the types, with
their status code and meaning. The set is stable: a new type is an addition, never a rename."""

_KINDS: list[tuple[type[LaminaError], str]] = [
    (NotFoundError, "not_found"),
    (PinConflictError, "conflict"),
    (OverBudgetError, "over_budget"),
    (UnknownFormatError, "unsupported_format"),
    (ReadError, "unreadable_input"),
    (InputError, "invalid_request"),
    (AccessError, "unauthorized"),
    (ConfigError, "internal"),
    (StoreError, "store_unavailable"),
]

_HTTP_KINDS = {404: "not_found", 405: "method_not_allowed", 413: "too_large",
               401: "unauthorized", 500: "internal", 503: "store_unavailable"}  # fmt: skip
_HTTP_MESSAGES = {404: "no such route", 405: "this route does not take that method"}

_DOCUMENTED: dict[int, str] = {
    400: "The request cannot be done as asked (`invalid_request`).",
    401: "No API key, or not a valid one (`unauthorized`).",
    404: "No such bank (or not this key's), or no such item in it (`not_found`).",
    409: "The pin conflicts with another pin (`conflict`).",
    413: "The request body is over the size limit (`too_large`).",
    415: "The messages are in no format Lamina reads (`unsupported_format`).",
    422: "A field or parameter is missing, mistyped or unknown, or the messages could not be "
    "read (`invalid_request`, `unreadable_input`, `over_budget`).",
    503: "The database failed or was busy; try again (`store_unavailable`).",
}


def error_type(exc: LaminaError) -> str:
    """The one place Lamina's errors become error types (and so HTTP status codes)."""
    return next((kind for cls, kind in _KINDS if isinstance(exc, cls)), "internal")


def status_of(exc: LaminaError) -> int:
    """The HTTP status code of one of Lamina's errors."""
    return ERROR_TYPES[error_type(exc)][0]


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents, each with the one error model. Every /v1 route
    may answer 401, 422 (a parameter) and 503; `statuses` adds the others it may give."""
    chosen = sorted({401, 422, 503, *statuses})
    return {code: {"model": ErrorBody, "description": _DOCUMENTED[code]} for code in chosen}


def install(app: FastAPI) -> None:
    """Answer every failure of `app` in the one error shape."""

    @app.exception_handler(LaminaError)
    async def lamina_error(_request: Request, exc: LaminaError) -> JSONResponse:
        kind = error_type(exc)
        message = str(exc) if kind != "internal" else "the server is misconfigured"
        return error_response(ERROR_TYPES[kind][0], kind, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown routes, wrong methods, and a body that does not parse (too deeply nested,
        # not JSON), in Lamina's shape.
        kind = _HTTP_KINDS.get(exc.status_code, "invalid_request")
        message = _HTTP_MESSAGES.get(exc.status_code, str(exc.detail))
        return error_response(exc.status_code, kind, message)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        said = "unknown field" if first.get("type") == "extra_forbidden" else first.get("msg")
        return error_response(422, "invalid_request", f"{where}: {said or 'invalid'}")

    @app.exception_handler(Exception)
    async def crashed(_request: Request, _exc: Exception) -> JSONResponse:
        return error_response(500, "internal", "the server failed on this request")
