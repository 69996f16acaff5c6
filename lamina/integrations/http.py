"""`lamina serve`: the memory banks over HTTP (FastAPI; the `server` extra).

    GET    /health                               liveness, no key needed
    GET    /v1/banks                             the banks this key may use, with sizes
    GET    /v1/banks/{bank}/documents            documents of a bank (ids may contain '/')
    DELETE /v1/banks/{bank}/documents/{doc}      forget a document
    DELETE /v1/banks/{bank}/memories/{memory}    forget one memory
    POST   /v1/banks/{bank}/recall               query, budget, limit, documents, tags, since..
    POST   /v1/banks/{bank}/retain               document, messages or text, format, tags, async
                                                 (202, Location: the operation)
    GET    /v1/operations/{id}                   an asynchronous retain's state and result
    POST   /v1/compile                           messages, system, budget, reserve, request_format
                                                 -> request (Anthropic or OpenAI), report
    GET    /v1/banks/{bank}/logs                 context logs: id, messages, tokens,
                                                 summaries, updated
    GET    /v1/banks/{bank}/logs/{log}           one log: summaries by level, last frontier
    POST   /v1/banks/{bank}/logs/{log}/messages  messages, system, format -> how many were added
    POST   /v1/banks/{bank}/logs/{log}/compile   budget, reserve, request_format, messages, system
                                                 -> request, report; summaries and frontier
                                                 kept for the next compile
    DELETE /v1/banks/{bank}/logs/{log}           delete a log, its summaries and frontier
    PUT    /v1/banks/{bank}/logs/{log}/pins/{p}  mode (raw, exact, max), level, messages
                                                 [first, last] or document -> pins (409 on
                                                 a conflict)
    DELETE /v1/banks/{bank}/logs/{log}/pins/{p}  remove a pin
    OpenAPI at /openapi.json; /docs is a reference page written from it that loads nothing
    from elsewhere (FastAPI's Swagger UI and ReDoc fetch their assets from a CDN and are blank
    offline, so they are not served; /redoc is 404).

Lists take `limit` (1-1000, default 100) and `offset` and answer `total`, `limit`, `offset`.
Bodies are pydantic models (`lamina.integrations.api.models`) that refuse unknown fields;
answers are validated against theirs, so /openapi.json is the contract.

Security: API keys are stored hashed (SHA-256) and scoped to banks; a key for one bank can
neither read nor write another (it gets 404, as if the bank did not exist). A server started on
loopback with no key asks for none (and answers only requests whose Host header names
loopback, against DNS rebinding); once a key exists it needs one for good, even after the last
key is revoked (`lamina.access.Gate`). `lamina serve` refuses to bind another address until a
key exists. The API's description (/openapi.json, /docs) is served without a key: it
is the same for every installation and holds no bank data. Request bodies over the size limit
get 413. Lamina's errors
map to status codes in one place; malformed requests get 4xx, never 500. Operations are kept in
the database, so any instance sharing it can answer for them.

Errors: every error answer, unknown routes and wrong methods included, is
`{"error": {"type": TYPE, "message": "one line a person can act on"}}`. The types are stable
(`ERROR_TYPES` lists them with their meaning; a new one is an addition, never a rename):

    invalid_request     400 / 422  the request cannot be done as asked, or a body field is
                                   missing, mistyped or unknown (422 names the field)
    unauthorized        401        no API key, or not a valid one
    not_found           404        no such bank (or not this key's), document, memory, log,
                                   pin, operation or route
    method_not_allowed  405        the route exists, not with this method
    conflict            409        a pin that conflicts with another
    too_large           413        the body is over the size limit
    unsupported_format  415        messages in no format Lamina reads
    misdirected         421        a keyless server asked under a name that is not loopback
    unreadable_input    422        messages that could not be read
    over_budget         422        what must stay raw does not fit the budget
    internal            500        a fault of the server; the message says no more
    store_unavailable   503        the database failed or was busy; try again

Context logs: `/v1/compile` compiles what it is sent and keeps nothing; a stored log keeps the
messages appended to it, every summary written for it and its last frontier, so each compile
summarises only what is new and keeps the previous request's prefix unless the budget forces a
fold. Messages without an id are identified by their content (`lamina.integrations.logs`):
sending the whole conversation again adds only what is new.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..access import Access, Gate
from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions
from ..context import CompileOptions, Compiler, ContextLog
from ..context.frontier import OverBudgetError
from ..context.pins import Pin, PinConflictError
from ..errors import (
    AccessError,
    ConfigError,
    InputError,
    LaminaError,
    NotFoundError,
    ReadError,
    StoreError,
    UnknownFormatError,
)
from ..messages import Message as LogMessage
from ..readers import read_message_list as read_messages_in_memory
from ..readers.base import bound_depth
from .api.docs import reference_page
from .api.models import (
    AppendBody,
    Appended,
    BankList,
    CompileAnswer,
    CompileBody,
    DocumentList,
    ErrorBody,
    ForgottenDocument,
    ForgottenMemory,
    Health,
    LogCompileBody,
    LogDeleted,
    LogDetail,
    LogList,
    Operation,
    OperationStarted,
    PinBody,
    Pinned,
    RecallAnswer,
    RecallBody,
    RetainBody,
    RetainReport,
    Unpinned,
)
from .logs import (
    OpenLogs,
    check_budget,
    describe_log,
    find_log,
    log_summariser,
    log_summary,
    read_message_list,
)

__all__ = ["DEFAULT_MAX_BODY", "ERROR_TYPES", "create_app", "error_type"]

DEFAULT_MAX_BODY = 16 * 1024 * 1024

ERROR_TYPES: dict[str, tuple[int, str]] = {
    "invalid_request": (
        400,
        "the request is well formed but cannot be done as asked (400), "
        "or a field is missing, mistyped or unknown (422)",
    ),
    "unauthorized": (401, "no API key, or one that is not valid"),
    "not_found": (
        404,
        "no such bank, document, memory, log, pin, operation or route (a bank "
        "another key's is reported as absent)",
    ),
    "method_not_allowed": (405, "the path exists, not with this method"),
    "conflict": (409, "the pin overlaps another pin in a way that cannot hold"),
    "too_large": (413, "the request body is over the server's limit (--max-body)"),
    "unsupported_format": (
        415,
        "the messages are in no format Lamina reads, or the named format does not exist",
    ),
    "misdirected": (421, "a server without keys answers only requests addressed to loopback"),
    "unreadable_input": (422, "the messages could not be read"),
    "over_budget": (422, "what must be shown raw does not fit the budget"),
    "internal": (
        500,
        "a fault of the server (its configuration or a bug); the message says no more than that",
    ),
    "store_unavailable": (503, "the database failed or was busy; try again"),
}
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


def error_type(exc: LaminaError) -> str:
    """The one place Lamina's errors become error types (and so HTTP status codes)."""
    return next((kind for cls, kind in _KINDS if isinstance(exc, cls)), "internal")


def status_of(exc: LaminaError) -> int:
    """The HTTP status code of one of Lamina's errors."""
    return ERROR_TYPES[error_type(exc)][0]


_HTTP_KINDS = {404: "not_found", 405: "method_not_allowed", 413: "too_large",
               401: "unauthorized", 500: "internal", 503: "store_unavailable"}  # fmt: skip
_HTTP_MESSAGES = {404: "no such route", 405: "this route does not take that method"}


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def _with_id(document: str, message: Any) -> Any:
    """Messages without an id get one from their content, so a client may send the whole
    conversation every time or only what is new: either way each message is stored once."""
    if not isinstance(message, dict) or message.get("id"):
        return message
    digest = hashlib.sha1(
        document.encode() + b"\x00" + orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    )
    return {**message, "id": f"m_{digest.hexdigest()[:24]}"}


_ERROR_STATUS: dict[int, str] = {
    400: "The request cannot be done as asked (`invalid_request`).",
    401: "No API key, or not a valid one (`unauthorized`).",
    404: "No such bank (or not this key's), or no such item in it (`not_found`).",
    409: "The pin conflicts with another pin (`conflict`).",
    413: "The request body is over the size limit (`too_large`).",
    415: "The messages are in no format Lamina reads (`unsupported_format`).",
    422: "A body field is missing, mistyped or unknown, or the messages could not be read "
    "(`invalid_request`, `unreadable_input`, `over_budget`).",
    503: "The database failed or was busy; try again (`store_unavailable`).",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents, each with the one error model. Every /v1 route
    may answer 401, 422 (a parameter) and 503; `statuses` adds the others it may give."""
    chosen = sorted({401, 422, 503, *statuses})
    return {code: {"model": ErrorBody, "description": _ERROR_STATUS[code]} for code in chosen}


def _invalid(field: str, message: str) -> RequestValidationError:
    """A 422 naming the body field, in the shape of pydantic's own validation errors."""
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])


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
        too_large = _error(413, "too_large", f"request body over {self.limit} bytes")
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
                refused = _error(421, "misdirected", "this server answers loopback names only")
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="api_key",
    description="A key from `lamina keys create NAME --bank B`, as `Authorization: Bearer "
    "<key>`. A server on loopback with no key at all asks for none.",
)


def _access(
    request: Request,
    _key: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
) -> Access:
    """Who is asking: every bank while the gate is open, else the key's banks."""
    gate: Gate = request.app.state.gate
    return gate.access(request.headers.get("authorization"))


Auth = Annotated[Access, Depends(_access)]

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


def create_app(
    home: str | Path | None = None,
    *,
    memory: MemoryBank | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    gate: Gate | None = None,
) -> FastAPI:
    """The app; `gate` decides who may use which bank (default: as started on loopback)."""
    bank_api = memory or MemoryBank.open(home, serving=True)
    store = bank_api.store
    app = FastAPI(
        title="Lamina",
        version=__version__,
        summary="Memory for LLM agents",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: /docs is written here instead
        redoc_url=None,
    )
    app.state.memory = bank_api
    app.state.gate = gate or Gate.at_start(store, "127.0.0.1")
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(LoopbackHosts, gate=app.state.gate)

    @app.exception_handler(LaminaError)
    async def lamina_error(_request: Request, exc: LaminaError) -> JSONResponse:
        kind = error_type(exc)
        message = str(exc) if kind != "internal" else "the server is misconfigured"
        return _error(ERROR_TYPES[kind][0], kind, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown routes, wrong methods, and a body that does not parse (too deeply nested,
        # not JSON), in Lamina's shape.
        kind = _HTTP_KINDS.get(exc.status_code, "invalid_request")
        message = _HTTP_MESSAGES.get(exc.status_code, str(exc.detail))
        return _error(exc.status_code, kind, message)

    @app.exception_handler(Exception)
    async def crashed(_request: Request, _exc: Exception) -> JSONResponse:
        return _error(500, "internal", "the server failed on this request")

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        said = "unknown field" if first.get("type") == "extra_forbidden" else first.get("msg")
        return _error(422, "invalid_request", f"{where}: {said or 'invalid'}")

    def bank_for(auth: Access, bank: str, *, must_exist: bool = True) -> str:
        if not auth.allows(bank) or (must_exist and store.get_bank(bank) is None):
            raise NotFoundError(f"no bank named {bank!r}")
        return bank

    summariser = log_summariser(store)

    open_logs = OpenLogs(store, summariser)

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def docs() -> str:
        return reference_page(app.openapi())

    @app.get("/health", response_model=Health)
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/v1/banks", response_model=BankList, responses=errors())
    def list_banks(auth: Auth, page: Paged) -> dict[str, Any]:
        names = [item.name for item in bank_api.banks() if auth.allows(item.name)]
        rows = []
        for bank in page.of(names):
            stats = bank_api.stats(bank)
            rows.append({"bank": bank, "documents": stats.documents, "memories": stats.memories})
        return {"banks": rows, **page.counts(len(names))}

    @app.get("/v1/banks/{bank}/documents", response_model=DocumentList, responses=errors(404))
    def list_documents(bank: str, auth: Auth, page: Paged) -> dict[str, Any]:
        name = bank_for(auth, bank)
        documents = bank_api.documents(name)
        return {
            "bank": name,
            "documents": [
                {"id": d.id, "source": d.source, "tags": list(d.tags),
                 "updated_at": d.updated_at.isoformat()}
                for d in page.of(documents)
            ],
            **page.counts(len(documents)),
        }  # fmt: skip

    @app.delete(
        "/v1/banks/{bank}/documents/{document:path}",
        response_model=ForgottenDocument,
        responses=errors(404),
    )
    def forget_document(bank: str, document: str, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        if store.get_document(name, document) is None:
            raise NotFoundError(f"no document {document!r} in bank {name!r}")
        return {"bank": name, "document": document,
                "memories_forgotten": bank_api.forget_document(name, document)}  # fmt: skip

    @app.delete(
        "/v1/banks/{bank}/memories/{memory_id:path}",
        response_model=ForgottenMemory,
        responses=errors(404),
    )
    def forget_memory(bank: str, memory_id: str, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        if not bank_api.forget_memory(name, memory_id):
            raise NotFoundError(f"no memory {memory_id!r} in bank {name!r}")
        return {"bank": name, "memory": memory_id, "forgotten": True}

    @app.post(
        "/v1/banks/{bank}/recall", response_model=RecallAnswer, responses=errors(404, 413, 422)
    )
    def recall(bank: str, body: RecallBody, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        options = RecallOptions(
            budget=body.budget,
            limit=body.limit,
            documents=frozenset(body.documents) if body.documents else None,
            tags=frozenset(body.tags) if body.tags else None,
            since=body.since,
            until=body.until,
        )
        return {"bank": name, **bank_api.recall(body.query, name, options).as_dict()}

    def do_retain(name: str, body: RetainBody) -> dict[str, Any]:
        if body.text is not None:
            messages: list[Any] = [{"role": "user", "content": body.text}]
            fmt = "anthropic"
        elif body.messages:
            messages, fmt = [bound_depth(m) for m in body.messages], body.format or ""
        else:
            raise InputError("give 'messages' or 'text'")
        if fmt != "claude-code":
            messages = [_with_id(body.document, m) for m in messages]
        transcript = read_messages_in_memory(messages, format=fmt or None)
        report = bank_api.retain_messages(
            transcript.messages, name, body.document, tags=body.tags, metadata=body.metadata
        )
        report.warnings[:0] = transcript.warnings
        return report.as_dict()

    @app.post(
        "/v1/banks/{bank}/retain",
        response_model=RetainReport,
        responses={
            202: {
                "model": OperationStarted,
                "description": "With `async`: accepted, to poll at the Location given.",
            },
            **errors(400, 404, 413, 415, 422),
        },
    )
    def retain(bank: str, body: RetainBody, auth: Auth) -> Any:
        name = bank_for(auth, bank, must_exist=False)
        if not body.run_async:
            return do_retain(name, body)
        op_id = uuid.uuid4().hex
        store.save_operation(op_id, "retain", name, "running")

        def run() -> None:
            try:
                store.save_operation(op_id, "retain", name, "done", do_retain(name, body))
            except LaminaError as exc:
                store.save_operation(op_id, "retain", name, "failed", error=str(exc))
            except Exception:
                failed = "the server failed on this retain"
                store.save_operation(op_id, "retain", name, "failed", error=failed)

        threading.Thread(target=run, daemon=True).start()
        started = OperationStarted(operation=op_id, status="running")
        location = f"/v1/operations/{op_id}"
        return JSONResponse(started.model_dump(), 202, headers={"Location": location})

    @app.post("/v1/compile", response_model=CompileAnswer, responses=errors(400, 413, 415, 422))
    def compile_request(body: CompileBody, auth: Auth) -> dict[str, Any]:
        if body.budget - body.reserve < 500:
            raise InputError("budget minus reserve must leave at least 500 tokens")
        given = read_message_list(body.messages, body.format, system=body.system)
        log = ContextLog.from_messages(given)
        options = CompileOptions(budget=body.budget, reserve=body.reserve)
        result = Compiler(summariser).compile(log, options, body.request_format)
        return {"request": result.request, "report": result.report}

    @app.get("/v1/banks/{bank}/logs", response_model=LogList, responses=errors(404))
    def list_logs(bank: str, auth: Auth, page: Paged) -> dict[str, Any]:
        name = bank_for(auth, bank)
        logs = store.list_logs(name)
        return {
            "bank": name,
            "logs": [log_summary(store, i) for i in page.of(logs)],
            **page.counts(len(logs)),
        }

    @app.get("/v1/banks/{bank}/logs/{log}", response_model=LogDetail, responses=errors(404))
    def show_log(bank: str, log: str, auth: Auth) -> dict[str, Any]:
        return describe_log(store, bank_for(auth, bank), log)

    @app.post(
        "/v1/banks/{bank}/logs/{log}/messages",
        response_model=Appended,
        responses=errors(400, 404, 413, 415, 422),
    )
    def append_to_log(bank: str, log: str, body: AppendBody, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank, must_exist=False)
        messages = read_message_list(body.messages, body.format, ids_from=log, system=body.system)
        with open_logs.use(name, log) as stored:
            added = stored.append(messages)
            held = len(stored.log)
        return {"bank": name, "log": log, "received": len(messages), "added": added,
                "messages": held}  # fmt: skip

    @app.post(
        "/v1/banks/{bank}/logs/{log}/compile",
        response_model=CompileAnswer,
        responses=errors(400, 404, 413, 415, 422),
    )
    def compile_log(bank: str, log: str, body: LogCompileBody, auth: Auth) -> dict[str, Any]:
        problem = check_budget(body.budget, body.reserve)
        if problem is not None:
            raise _invalid("reserve", problem)
        messages: list[LogMessage] = []
        if body.messages or body.system:
            name = bank_for(auth, bank, must_exist=False)
            messages = read_message_list(body.messages or [], body.format, ids_from=log,
                                         system=body.system)  # fmt: skip
        else:
            name = bank_for(auth, bank)
            find_log(store, name, log)
        options = CompileOptions(budget=body.budget, reserve=body.reserve)
        with open_logs.use(name, log) as stored:
            stored.append(messages)
            if not len(stored.log):
                raise InputError(f"log {log!r} of bank {name!r} holds no messages to compile")
            result = stored.compile(options, body.request_format, ahead=True)
        return {"request": result.request, "report": result.report}

    @app.put(
        "/v1/banks/{bank}/logs/{log}/pins/{pin}",
        response_model=Pinned,
        responses=errors(404, 409, 413, 422),
    )
    def pin_log(bank: str, log: str, pin: str, body: PinBody, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        find_log(store, name, log)
        if (body.messages is None) == (body.document is None):
            raise _invalid("messages", "give the messages held or a document, not both")
        if body.mode == "exact" and body.level < 1:
            raise _invalid("level", "an exact pin needs a level of at least 1")
        first, last = body.messages or (None, None)
        if first is not None and last is not None and not 0 <= first <= last:
            raise _invalid("messages", "a range of log positions from 0, first <= last")
        held = Pin.given(pin, body.mode, body.level, first, last, body.document)
        with open_logs.use(name, log) as stored:
            stored.pin(held)
            pins = [p.describe() for p in stored.pins()]
        return {"bank": name, "log": log, "pinned": held.describe(), "pins": pins}

    @app.delete(
        "/v1/banks/{bank}/logs/{log}/pins/{pin}", response_model=Unpinned, responses=errors(404)
    )
    def unpin_log(bank: str, log: str, pin: str, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        if not store.delete_pin(name, log, pin):
            raise NotFoundError(f"no pin {pin!r} on log {log!r} in bank {name!r}")
        return {"bank": name, "log": log, "unpinned": pin}

    @app.delete("/v1/banks/{bank}/logs/{log}", response_model=LogDeleted, responses=errors(404))
    def delete_log(bank: str, log: str, auth: Auth) -> dict[str, Any]:
        name = bank_for(auth, bank)
        open_logs.forget(name, log)
        if not store.delete_log(name, log):
            raise NotFoundError(f"no log {log!r} in bank {name!r}")
        return {"bank": name, "log": log, "deleted": True}

    @app.get("/v1/operations/{op_id}", response_model=Operation, responses=errors(404))
    def operation(op_id: str, auth: Auth) -> dict[str, Any]:
        found = store.get_operation(op_id)
        if found is None or not auth.allows(found["bank"]):
            raise NotFoundError(f"no operation {op_id!r}")
        return found

    return app
