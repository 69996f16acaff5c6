"""`lamina serve`: the memory banks over HTTP (FastAPI; the `server` extra).

    GET    /health                               liveness, no key needed
    GET    /                                     the inspector (lamina.integrations.http_inspect);
                                                 ?token=CODE: a one-time login
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

Layout: this module puts the app together; the routes live in `lamina.integrations.api`, one
router per area (`banks`: banks, documents, memories; `recall_retain`; `context`:
compile and context logs; `operations`), over the public library API (`MemoryBank`, the
context compiler). `api.errors` is the one place failures become answers, `api.guards` holds
the body limit and the loopback check, `api.deps` who is asking (`Auth`) and what a route is
given (`app.state.memory`, `.gate`, `.logs`).

Security: API keys are stored hashed (SHA-256) and scoped to banks; a key for one bank can
neither read nor write another (it gets 404, as if the bank did not exist). A server started on
loopback with no key asks for its local token instead (every local user can reach loopback;
the token is in a file only its owner can read, `lamina.access.local_token`), or the session
cookie a one-time login address sets (`GET /?token=CODE`, printed by `lamina inspect`), and
answers only requests whose Host header names loopback, against DNS rebinding; once a key
exists it needs one for good, even after the last key is revoked (`lamina.access.Gate`).
`lamina serve` refuses to bind another address until a key exists. The API's description
(/openapi.json, /docs) is served without a key: it is the same for every installation and
holds no bank data. Request bodies over the size limit get 413. Lamina's errors map to
status codes in one place; malformed requests get 4xx, never 500. Operations are kept in
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
fold. Messages without an id are identified by their content (`lamina.context.logs`):
sending the whole conversation again adds only what is new.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from .. import __version__
from ..access import Gate
from ..bank.bank import MemoryBank
from ..config import Settings, resolve_settings
from ..context.logs import ContextLogs, log_summariser
from .api import banks, context, marks, operations, recall_retain
from .api.deps import Auth, access
from .api.docs import reference_page
from .api.errors import ERROR_TYPES, error_response, error_type, install, status_of
from .api.guards import BodyLimit, LoopbackHosts
from .api.models import Health

__all__ = ["DEFAULT_MAX_BODY", "ERROR_TYPES", "Auth", "create_app", "error_type", "status_of"]

DEFAULT_MAX_BODY = 16 * 1024 * 1024
_access = access  # old names, for routers written against them
_error = error_response


def create_app(
    home: str | Path | None = None,
    *,
    memory: MemoryBank | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    gate: Gate | None = None,
    settings: Settings | None = None,
) -> FastAPI:
    """The app; `gate` decides who may use which bank (default: as started on loopback).
    `settings`: what the entry point resolved (default: resolved here, with `home`)."""
    if settings is None:
        settings = resolve_settings(home=home)
    bank_api = memory or MemoryBank.open(settings=settings, serving=True)
    app = FastAPI(
        title="Lamina",
        version=__version__,
        summary="Memory for LLM agents",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: /docs is written here instead
        redoc_url=None,
    )
    app.state.memory = bank_api
    app.state.gate = gate or Gate.at_start(bank_api.store, "127.0.0.1")
    app.state.logs = ContextLogs(
        bank_api.store, log_summariser(bank_api.store, settings.summariser), settle=True
    )
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(LoopbackHosts, gate=app.state.gate)
    install(app)

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def docs() -> str:
        return reference_page(app.openapi())

    @app.get("/health", response_model=Health)
    def health() -> dict[str, str]:
        """Liveness; needs no key."""
        return {"status": "ok", "version": __version__}

    for router in (
        banks.router,
        marks.router,
        recall_retain.router,
        context.router,
        operations.router,
    ):
        app.include_router(router)
    from .http_inspect import include_inspector  # the web inspector's pages and reads

    include_inspector(app, settings.home, settings.hook)
    return app
