"""The web inspector: its pages (`/`) and the read endpoints they need beside the HTTP API.

    GET  /                                         the inspector, the caller's banks
                                                   rendered in when its session cookie lets
                                                   it in; ?token=CODE: a one-time login (sets
                                                   the session cookie of a server without keys)
    GET  /v1/banks/{bank}                          one bank in detail: counts, last retain,
                                                   embedders, size on disk, logs
    GET  /v1/banks/{bank}/memories                 q, document, agent, kind, tag, since,
                                                   until, limit, offset -> items (each with
                                                   its agent and session), total, kinds, agents
    GET  /v1/banks/{bank}/memories/{memory}        one memory
    POST /v1/banks/{bank}/recall/preview           query (or prompt + context, composed as
                                                   the hook does), budget, agents -> results
                                                   with per-channel scores, the exact block
                                                   the hook would inject (its own code and
                                                   settings) and its tokens
    GET  /v1/banks/{bank}/logs/{log}/strip         a log as stretches (raw or a summary level)
                                                   as its last compile showed them, with
                                                   tokens, pins, head and recent windows
    POST /v1/banks/{bank}/logs/{log}/strip         the same for a compile with another budget,
                                                   computed and not kept (summaries it writes
                                                   are kept, as every compile's are), with
                                                   where it would break the cached prefix
    GET  /v1/banks/{bank}/logs/{log}/summaries/{s} a summary with the messages it covers

and the hooks' activity, `/v1/hooks` and `/v1/injections` (lamina.integrations.http_activity).

Every endpoint asks the same gate as the API (`api.deps.Auth` and `bank_for`): a key sees only
its banks, and another bank answers 404 as if it did not exist.

`q` is a plain text search: every word of it must occur in a memory's text (case ignored,
taken literally), filtered, sorted and paged in the database (`Store.page_memories`, no
vectors read), so it finds what a user typed even where the lexical index would stem or drop
it. Pages read only these endpoints and the API's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import Field

from .._fields import field_dict
from ..access import Access, Gate
from ..bank.bank import MemoryBank
from ..config import HookSettings
from ..context.frontier import CompileOptions
from ..context.logs import ContextLogs, check_budget, read_message_list
from ..context.pins import pin_json
from ..context.stored import StoredLog
from ..errors import AccessError, InputError, NotFoundError
from ..memories import Correction, Document, Memory
from ..messages import Message
from ..store.base import MemoryFilter, Store, StoredPin, StoredSummary
from .api.deps import Auth, Logs, bank_for
from .api.errors import errors
from .api.models import Answer, BankDetail, Body, CompileReport, RecallAnswer
from .http_activity import router as activity_router

__all__ = ["ASSETS", "ROUTERS", "include_inspector", "router"]

ASSETS = Path(__file__).with_name("inspector")
COVERED_LIMIT = 200
"""Messages shown with a summary at most (the first ones; the count says how many it covers)."""
MESSAGE_CHARS = 2000

router = APIRouter(tags=["inspector"])


# -- shapes ------------------------------------------------------------------------------------
class Origin(Answer):
    """Where a document came from: the agent and session it was retained from (its metadata,
    as the agent's reader recorded it; None where it did not say)."""

    agent: str | None = None
    agent_version: str | None = None
    session_id: str | None = None
    cwd: str | None = None


class MemorySource(Answer):
    file: str | None
    """The document's source file, when it was retained from one."""
    first_line: int | None
    last_line: int | None
    first_record: str | None
    last_record: str | None
    records: int


class MemoryOut(Answer):
    id: str
    document: str
    kind: str
    text: str
    occurred_at: datetime | None
    """When what it describes happened."""
    said_at: datetime | None
    source: MemorySource
    speakers: list[str]
    entities: list[str]
    tags: list[str]
    tokens: int | None
    embedder: str | None
    origin: Origin | None = None
    """The agent and session its document was retained from."""
    mark: dict[str, Any] | None = None
    """Its correction (`lamina memory`): state wrong or superseded, replacement, note."""


class MemoryPage(Answer):
    bank: str
    items: list[MemoryOut]
    total: int
    """Memories matching the filters (all pages)."""
    limit: int
    offset: int
    kinds: dict[str, int]
    """Memories of each kind in the bank (for the filter)."""
    agents: dict[str, int] = Field(default_factory=dict)
    """Documents of each agent in the bank (for the `agent` filter)."""
    search: str = "words"
    """How `q` matched: every word occurs in the text, case folded."""


class PreviewBody(Body):
    query: str | None = Field(default=None, max_length=20_000)
    """Search with this text as it is; or give `prompt` (and `context`) to compose it."""
    prompt: str | None = Field(default=None, max_length=20_000)
    """The next prompt: the query is composed from it and the last turns of `context`, as the
    prompt hook composes it (only the prompt's own time words, "last week", drive the time
    channel)."""
    context: list[Any] | None = Field(default=None, max_length=2_000)
    """Earlier messages (Anthropic or OpenAI shape, or Claude Code records) the hook would
    take the last turns of."""
    context_turns: int | None = Field(default=None, ge=0, le=100)
    """Turns of `context` before the prompt that enter the query; default the hook's
    (`hook.turns`)."""
    max_chars: int | None = Field(default=None, ge=1, le=100_000)
    """Cap on the composed query, the oldest context dropped first; default the hook's."""
    budget: int | None = Field(default=None, ge=1, le=200_000)
    """Tokens the block may take, its framing included; default the hook's (`hook.budget`)."""
    agents: list[str] | None = Field(default=None, max_length=20)
    """Only memories of sessions of these agents (claude-code, codex, gemini, copilot); the
    hook itself recalls from every agent's sessions."""


class RecallPreview(RecallAnswer):
    composed: bool
    """The query was composed from a prompt and context (as the hook does)."""
    budget: int
    """The budget the block was fitted in (the hook's, unless the request named one)."""
    block: str
    """The exact `<lamina_memories>` block the prompt hook would inject ("" for none): the
    hook's own code built it, its framing within `budget`."""
    block_tokens: int
    block_chars: int
    block_memories: int
    """Memories the block holds (the hook clamps it under Claude Code's limit)."""
    floor: dict[str, Any] | None = None
    """How the memories measured against the hook's floor (None when it is off); its `reason`
    says why the hook would inject nothing."""
    origins: dict[str, Origin] = Field(default_factory=dict)
    """The agent and session of each result's document, by document id."""


class StripBody(Body):
    budget: int = Field(ge=1_000, le=2_000_000)
    """Tokens of the compiled request, reply reserve included."""
    reserve: int | None = Field(default=None, ge=0)
    """Tokens kept for the reply; default an eighth of the budget, at most 4,000 (as
    `lamina compile`)."""


class Stretch(Answer):
    start: int
    end: int
    """Log positions `start` to `end - 1`."""
    region: str
    """`head`, `middle`, `recent`, or `uncompiled` (no compile yet)."""
    level: int
    """0: shown raw; k: shown as one summary of level k."""
    summary: str | None
    tokens: int
    """The messages' own tokens."""
    shown_tokens: int
    """What the stretch costs in the request (the summary's tokens when folded)."""
    pins: list[str]


class CompileEvent(Answer):
    at: str
    """When the compile ran (UTC, ISO 8601)."""
    messages: int
    """Messages the log held."""
    tokens: int
    """Tokens of the compiled request."""
    first: bool
    """No earlier layout to keep: the whole request was new to the provider's cache."""
    prefix_break: int | None
    """The first log position whose rendering differed from the previous compile's (where
    the cached prefix ended); None when the previous request was kept whole."""


class StripOut(Answer):
    bank: str
    log: str
    messages: int
    tokens: int
    compiled: bool
    preview: bool
    head_end: int
    tail_start: int
    request_tokens: int | None
    stretches: list[Stretch]
    levels: list[int]
    pins: list[dict[str, Any]]
    summaries_by_level: dict[str, int]
    compiles: list[CompileEvent] = Field(default_factory=list)
    """The log's last stored compiles, oldest first, with where each broke the cache."""
    prefix_break: int | None = None
    """Preview: the first log position whose rendering differs from the last compile's
    (the cached prefix ends there); None when the prefix is kept or there was no compile."""
    report: CompileReport | None = None
    """Preview: the compile's report."""


class CoveredMessage(Answer):
    position: int
    role: str
    kind: str
    text: str
    tokens: int


class SummaryOut(Answer):
    id: str
    level: int
    start: int
    end: int
    tokens: int
    text: str
    children: list[str]
    summariser: str
    messages: list[CoveredMessage]
    covered: int


# -- helpers -----------------------------------------------------------------------------------
def _memory_bank(request: Request) -> MemoryBank:
    memory: MemoryBank = request.app.state.memory
    return memory


def _bank(request: Request, auth: Access, bank: str) -> str:
    """The bank if this caller may use it and it exists; else 404 (`api.deps.bank_for`)."""
    return bank_for(_memory_bank(request), auth, bank)


def origin_of(document: Document | None) -> Origin | None:
    """The agent and session `document` was retained from (None when its metadata says
    neither)."""
    if document is None:
        return None
    meta = document.metadata

    def text(key: str) -> str | None:
        value = meta.get(key)
        return str(value) if isinstance(value, str | int | float) and str(value) else None

    found = Origin(
        agent=text("agent"),
        agent_version=text("agent_version"),
        session_id=text("session_id"),
        cwd=text("cwd"),
    )
    return found if found.agent or found.session_id else None


def memory_out(
    memory: Memory, document: Document | None, mark: Correction | None = None
) -> MemoryOut:
    # The memory's own fields by name (a response model ignores the ones it does not show).
    return MemoryOut(
        **field_dict(memory),
        source=MemorySource(
            file=document.source if document else None,
            first_line=memory.first_line,
            last_line=memory.last_line,
            first_record=memory.first_record,
            last_record=memory.last_record,
            records=len(memory.record_ids),
        ),
        origin=origin_of(document),
        mark=mark.as_dict() if mark is not None else None,
    )


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _documents(store: Store, bank: str, ids: Iterable[str]) -> dict[str, Document | None]:
    """The documents of these ids (each read once; None for one that is gone)."""
    out: dict[str, Document | None] = {}
    for document in ids:
        if document not in out:
            out[document] = store.get_document(bank, document)
    return out


# -- banks and memories ------------------------------------------------------------------------
@router.get("/v1/banks/{bank}", response_model=BankDetail, responses=errors(404))
def bank_detail(bank: str, request: Request, auth: Auth) -> BankDetail:
    return _bank_detail(_memory_bank(request).store, _bank(request, auth, bank))


def _bank_detail(store: Store, name: str) -> BankDetail:
    stats = store.bank_stats(name)
    found = store.get_bank(name)
    documents = store.list_documents(name)
    last = max(documents, key=lambda d: d.updated_at, default=None)
    return BankDetail(
        **field_dict(stats, leave_out=("bank", "bytes")),
        bank=name,
        created_at=found.created_at if found else None,
        last_retain=last.updated_at if last else None,
        last_document=last.id if last else None,
        logs=len(store.list_logs(name)),
        bank_bytes=stats.bytes,
        database_bytes=store.size_bytes(),
    )


@router.get("/v1/banks/{bank}/memories", response_model=MemoryPage, responses=errors(404))
def list_memories(
    bank: str,
    request: Request,
    auth: Auth,
    q: str | None = Query(default=None, max_length=2000),
    document: str | None = None,
    kind: str | None = None,
    tag: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    agent: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=500),
    offset: int = Query(default=0, ge=0),
) -> MemoryPage:
    name = _bank(request, auth, bank)
    memory = _memory_bank(request)
    store = memory.store
    where = MemoryFilter(
        words=tuple((q or "").split()),
        document=document or None,
        documents=tuple(sorted(memory.agent_documents(name, [agent]))) if agent else None,
        kind=kind or None,
        tag=tag or None,
        since=_aware(since),
        until=_aware(until),
    )
    found = store.page_memories(name, where, limit, offset)
    documents = _documents(store, name, (m.document for m in found.memories))
    marks = store.load_corrections(name, [m.id for m in found.memories])
    return MemoryPage(
        bank=name,
        items=[memory_out(m, documents[m.document], marks.get(m.id)) for m in found.memories],
        total=found.total,
        limit=limit,
        offset=offset,
        kinds=dict(sorted(found.kinds.items())),
        agents=_agents(store.list_documents(name)),
    )


def _agents(documents: Iterable[Document]) -> dict[str, int]:
    """Documents of each agent (for the filter), by agent name."""
    counts: dict[str, int] = {}
    for document in documents:
        agent = document.metadata.get("agent")
        if isinstance(agent, str) and agent:
            counts[agent] = counts.get(agent, 0) + 1
    return dict(sorted(counts.items()))


@router.get(
    "/v1/banks/{bank}/memories/{memory_id:path}", response_model=MemoryOut, responses=errors(404)
)
def show_memory(bank: str, memory_id: str, request: Request, auth: Auth) -> MemoryOut:
    name = _bank(request, auth, bank)
    store = _memory_bank(request).store
    found = store.get_memories(name, [memory_id])
    if not found:
        raise NotFoundError(f"no memory {memory_id!r} in bank {name!r}")
    document = store.get_document(name, found[0].document)
    mark = store.load_corrections(name, [memory_id]).get(memory_id)
    return memory_out(found[0], document, mark)


# -- recall playground -------------------------------------------------------------------------
@router.post(
    "/v1/banks/{bank}/recall/preview",
    response_model=RecallPreview,
    responses=errors(400, 404, 413, 422),
)
def recall_preview(bank: str, body: PreviewBody, request: Request, auth: Auth) -> dict[str, Any]:
    """Recall as the prompt hook does it, with the block it would inject: the hook's options
    (`hook.*` settings: budget, floor, query shape) and its own code build the block."""
    from ..tokens import count_text
    from .claude_code.prompt import PromptRequest, answer_of, plan_prompt, prompt_query

    name = _bank(request, auth, bank)
    memory = _memory_bank(request)
    hook: HookSettings = request.app.state.hook
    hook_request = PromptRequest(
        prompt=body.prompt or "",
        bank=name,
        context_turns=hook.context_turns if body.context_turns is None else body.context_turns,
        max_query_chars=hook.max_query_chars if body.max_chars is None else body.max_chars,
        budget=hook.budget if body.budget is None else body.budget,
        floor_dense=min(max(hook.floor, 0.0), 1.0),
        floor_coverage=min(max(hook.floor_coverage, 0.0), 1.0),
    )
    if body.prompt is not None and body.prompt.strip():
        # As the hook does: only the prompt's own time words drive the time channel; with no
        # earlier turns, the prompt alone (the hook's way without a transcript).
        given = read_message_list(body.context) if body.context else None
        (query, time_text), composed = prompt_query(hook_request, given), True
    elif body.query is not None and body.query.strip():
        query, time_text, composed = body.query, None, False
    else:
        raise InputError("give a 'query', or a 'prompt' (with optional 'context')")
    wanted = memory.agent_documents(name, body.agents) if body.agents else None
    plan = plan_prompt(memory, hook_request, query, time_text, documents=wanted)
    result = plan.recall(memory.embedder_for(name))
    answer = answer_of(result)
    documents = _documents(memory.store, name, (hit.memory.document for hit in result.hits))
    origins = {d: o for d, doc in documents.items() if (o := origin_of(doc)) is not None}
    return {
        "bank": name,
        **result.as_dict(),
        "composed": composed,
        "budget": hook_request.budget,
        "block": answer.context,
        "block_tokens": count_text(answer.context) if answer.context else 0,
        "block_chars": len(answer.context),
        "block_memories": answer.memories,
        "floor": answer.floor,
        "origins": origins,
    }


# -- context log strip -------------------------------------------------------------------------
def _overlapping(pins: Iterable[StoredPin], start: int, end: int) -> list[str]:
    return [
        p.name
        for p in pins
        if p.start is not None and p.end is not None and p.start < end and start < p.end
    ]


def strip_of(
    frontier: Mapping[str, Any] | None,
    summaries: Mapping[str, StoredSummary],
    tokens: Sequence[int],
    shown: Sequence[int],
    pins: Sequence[StoredPin],
) -> tuple[list[Stretch], int, int]:
    """The log's stretches in order, as `frontier` (a stored frontier's JSON) shows them, with
    the head's end and the recent window's start."""
    length = len(tokens)

    def stretch(start: int, end: int, region: str, summary: StoredSummary | None) -> Stretch:
        own = sum(tokens[start:end])
        return Stretch(
            start=start,
            end=end,
            region=region,
            level=summary.level if summary else 0,
            summary=summary.id if summary else None,
            tokens=own,
            shown_tokens=summary.tokens if summary else sum(shown[start:end]),
            pins=_overlapping(pins, start, end),
        )

    if frontier is None or "items" not in frontier:
        return ([stretch(0, length, "uncompiled", None)] if length else []), 0, length
    head = min(int(frontier.get("head_end", 0)), length)
    tail = min(int(frontier.get("tail_start", length)), length)
    out: list[Stretch] = [stretch(0, head, "head", None)] if head else []
    at = head
    for item in frontier.get("items", []):
        if isinstance(item, str):
            summary = summaries.get(item)
            if summary is None:
                continue
            start, end = summary.start, summary.end
        else:
            summary, (start, end) = None, (int(item[0]), int(item[1]))
        if start > at:  # a gap the frontier does not name (should not happen): shown as raw
            out.append(stretch(at, start, "middle", None))
        out.append(stretch(start, min(end, length), "middle", summary))
        at = max(at, end)
    if at < tail:
        out.append(stretch(at, tail, "middle", None))
    if tail < length:
        out.append(stretch(max(tail, at), length, "recent", None))
    return out, head, tail


def _strip(
    store: Store,
    bank: str,
    log: str,
    frontier: Mapping[str, Any] | None,
    stored: StoredLog,
    *,
    preview: bool,
) -> StripOut:
    summaries = {s.id: s for s in store.load_summaries(bank, log)}
    pins = store.load_pins(bank, log)
    stretches, head, tail = strip_of(frontier, summaries, stored.log.tokens, stored.log.shown, pins)
    by_level: dict[str, int] = {}
    for summary in summaries.values():
        by_level[str(summary.level)] = by_level.get(str(summary.level), 0) + 1

    tokens = frontier.get("tokens") if frontier else None
    return StripOut(
        bank=bank,
        log=log,
        messages=len(stored.log),
        tokens=sum(stored.log.tokens),
        compiled=frontier is not None and "items" in frontier,
        preview=preview,
        head_end=head,
        tail_start=tail,
        request_tokens=int(tokens) if isinstance(tokens, int) else None,
        stretches=stretches,
        levels=sorted({s.level for s in stretches}),
        pins=[pin_json(p) for p in pins],
        summaries_by_level=dict(sorted(by_level.items(), key=lambda kv: int(kv[0]))),
        compiles=[e for c in stored.compiles if (e := _compile_event(c)) is not None],
    )


def _compile_event(entry: Mapping[str, Any]) -> CompileEvent | None:
    try:
        return CompileEvent.model_validate(entry)
    except ValueError:
        return None  # a history entry of another shape is skipped, not an error


def _open_log(request: Request, bank: str, log: str) -> tuple[Store, StoredLog]:
    """The log opened apart from the app's open logs: a preview compile must leave them as
    they are."""
    logs: ContextLogs = request.app.state.logs
    logs.find(bank, log)
    return logs.store, StoredLog.open(logs.store, bank, log, logs.summariser)


@router.get("/v1/banks/{bank}/logs/{log}/strip", response_model=StripOut, responses=errors(404))
def log_strip(bank: str, log: str, request: Request, auth: Auth) -> StripOut:
    name = _bank(request, auth, bank)
    store, stored = _open_log(request, name, log)
    return _strip(store, name, log, store.load_frontier(name, log), stored, preview=False)


@router.post(
    "/v1/banks/{bank}/logs/{log}/strip",
    response_model=StripOut,
    responses=errors(400, 404, 413, 422),
)
def log_strip_preview(
    bank: str, log: str, body: StripBody, request: Request, auth: Auth
) -> StripOut:
    """What a compile with `budget` would show; the stored frontier is left as it is."""
    from ..context.frontier import prefix_break
    from ..context.stored import frontier_to_json

    reserve = min(4000, body.budget // 8) if body.reserve is None else body.reserve
    problem = check_budget(body.budget, reserve)
    if problem is not None:
        raise InputError(f"reserve: {problem}")
    name = _bank(request, auth, bank)
    store, stored = _open_log(request, name, log)
    if not len(stored.log):
        raise InputError(f"log {log!r} of bank {name!r} holds no messages to compile")
    before = stored.compiler.previous
    options = CompileOptions(budget=body.budget, reserve=reserve)
    result = stored.compiler.compile(stored.log, options, "anthropic", stored.pins())
    out = _strip(store, name, log, frontier_to_json(result.frontier), stored, preview=True)
    out.report = CompileReport.model_validate(result.report)
    out.prefix_break = prefix_break(before, result.frontier)
    return out


@router.get(
    "/v1/banks/{bank}/logs/{log}/summaries/{summary}",
    response_model=SummaryOut,
    responses=errors(404),
)
def log_summary_detail(
    bank: str, log: str, summary: str, request: Request, auth: Auth, logs: Logs
) -> SummaryOut:
    name = _bank(request, auth, bank)
    store = logs.store
    logs.find(name, log)
    found = next((s for s in store.load_summaries(name, log) if s.id == summary), None)
    if found is None:
        raise NotFoundError(f"no summary {summary!r} in log {log!r} of bank {name!r}")
    from ..context.log import ContextLog

    covered = store.read_log(name, log, start=found.start)[: found.end - found.start]
    shown = covered[:COVERED_LIMIT]
    counted = ContextLog.from_messages(shown)
    return SummaryOut(
        **field_dict(found),
        messages=[
            CoveredMessage(
                position=found.start + i,
                role=m.role.value,
                kind=str(m.kind),
                text=_message_text(m)[:MESSAGE_CHARS],
                tokens=counted.tokens[i],
            )
            for i, m in enumerate(shown)
        ],
        covered=len(covered),
    )


def _message_text(message: Message) -> str:
    text = message.text.strip()
    if text:
        return text
    uses = [f"[tool call: {u.name}]" for u in message.tool_uses]
    results = [f"[tool result] {r.text[:300]}" for r in message.tool_results]
    shown = uses + results
    if not shown and message.blocks:
        shown = [f"[{', '.join(sorted({b.type for b in message.blocks}))}]"]
    return "\n".join(shown)


ROUTERS = (router, activity_router)
"""Every router of the inspector's endpoints."""


# -- the pages ---------------------------------------------------------------------------------
def include_inspector(app: FastAPI, home: Path, hook: HookSettings | None = None) -> None:
    """Add the inspector's endpoints and pages to the API's app; `home`: the data directory
    (its hook and injection logs); `hook`: the hook's settings, which the recall preview
    recalls with (default: the defaults)."""
    app.state.inspector_home = home
    app.state.hook = hook or HookSettings()
    for each in ROUTERS:
        app.include_router(each)
    app.mount("/inspector", StaticFiles(directory=ASSETS), name="inspector")

    @app.get("/", include_in_schema=False, response_model=None)
    def inspector_page(request: Request, token: str | None = None) -> Response:
        """The page; with `?token=` a one-time login code (`Gate.login_code`, in the address
        `lamina inspect` prints and opens), which sets the session cookie (HttpOnly, sent to
        this site only) and sends the browser on to `/`, so the code leaves the address bar."""
        gate: Gate = request.app.state.gate
        session = gate.log_in(token) if token else None
        if session is None:
            return _page(request)
        answer = RedirectResponse("/", status_code=303)
        answer.set_cookie(gate.cookie, session, httponly=True, samesite="strict")
        return answer


def _page(request: Request) -> Response:
    """The page, with the caller's banks rendered in when its session lets it in
    (lamina.integrations.inspector_page); as it is otherwise."""
    from .inspector_page import first_page

    gate: Gate = request.app.state.gate
    headers = {"Cache-Control": "no-cache"}
    try:
        auth = gate.access(request.headers.get("authorization"), request.cookies.get(gate.cookie))
    except AccessError:
        return FileResponse(ASSETS / "index.html", headers=headers)
    memory = _memory_bank(request)
    names = [item.name for item in memory.banks() if auth.allows(item.name)]
    hook: HookSettings = request.app.state.hook
    page = first_page(
        ASSETS / "index.html", names, lambda n: _bank_detail(memory.store, n), hook.budget
    )
    return HTMLResponse(page, headers=headers)
