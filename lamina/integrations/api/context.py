"""Compiling: a conversation sent whole (`/v1/compile`, nothing kept), and context logs kept in
a bank (append, compile, list, show, pin, delete), whose summaries and last layout are reused by
the next compile."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...context import CompileOptions
from ...context.logs import check_budget, read_message_list
from ...context.pins import Pin
from ...messages import Message
from .deps import Auth, Logs, Memory, Paged, bank_for, invalid
from .errors import errors
from .models import (
    AppendBody,
    Appended,
    CompileAnswer,
    CompileBody,
    LogCompileBody,
    LogDeleted,
    LogDetail,
    LogList,
    PinBody,
    Pinned,
    Unpinned,
)

__all__ = ["router"]

router = APIRouter(tags=["compile and context logs"])
LOG = "/v1/banks/{bank}/logs/{log}"


@router.post("/v1/compile", response_model=CompileAnswer, responses=errors(400, 413, 415, 422))
def compile_request(body: CompileBody, auth: Auth, logs: Logs) -> dict[str, Any]:
    """Compile the conversation sent into a request that fits `budget`; nothing is kept."""
    given = read_message_list(body.messages, body.format, system=body.system)
    options = CompileOptions(budget=body.budget, reserve=body.reserve)
    result = logs.compile_once(given, options, body.request_format)
    return {"request": result.request, "report": result.report}


@router.get("/v1/banks/{bank}/logs", response_model=LogList, responses=errors(404))
def list_logs(bank: str, auth: Auth, memory: Memory, logs: Logs, page: Paged) -> dict[str, Any]:
    """The context logs of a bank: messages, tokens, summaries, times."""
    name = bank_for(memory, auth, bank, must_exist=False)
    found, total = logs.listing(name, page.offset, page.limit)
    return {"bank": name, "logs": found, **page.counts(total)}


@router.get(LOG, response_model=LogDetail, responses=errors(404))
def show_log(bank: str, log: str, auth: Auth, memory: Memory, logs: Logs) -> dict[str, Any]:
    """One log: summaries by level, what its last compile showed raw and folded, its pins."""
    return logs.describe(bank_for(memory, auth, bank, must_exist=False), log)


@router.post(f"{LOG}/messages", response_model=Appended, responses=errors(400, 404, 413, 415, 422))
def append_to_log(
    bank: str, log: str, body: AppendBody, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Append messages to a log (created on first use); those it holds already are skipped."""
    name = bank_for(memory, auth, bank, must_exist=False)
    messages = read_message_list(body.messages, body.format, ids_from=log, system=body.system)
    return logs.append(name, log, messages)


@router.post(
    f"{LOG}/compile", response_model=CompileAnswer, responses=errors(400, 404, 413, 415, 422)
)
def compile_log(
    bank: str, log: str, body: LogCompileBody, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Compile a log (appending `messages` first, if sent); its summaries and layout are kept
    for the next compile, which then summarises only what is new."""
    problem = check_budget(body.budget, body.reserve)
    if problem is not None:
        raise invalid("reserve", problem)
    name = bank_for(memory, auth, bank, must_exist=False)
    messages: list[Message] = []
    if body.messages or body.system:
        messages = read_message_list(body.messages or [], body.format, ids_from=log,
                                     system=body.system)  # fmt: skip
    options = CompileOptions(budget=body.budget, reserve=body.reserve)
    result = logs.compile(name, log, messages, options, body.request_format)
    return {"request": result.request, "report": result.report}


@router.put(f"{LOG}/pins/{{pin}}", response_model=Pinned, responses=errors(404, 409, 413, 422))
def pin_log(
    bank: str, log: str, pin: str, body: PinBody, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Pin messages (or a document's) so every compile shows them raw, at an exact level, or
    no deeper than a level; a pin of the same name is replaced, a conflicting one refused."""
    name = bank_for(memory, auth, bank, must_exist=False)
    if (body.messages is None) == (body.document is None):
        raise invalid("messages", "give the messages held or a document, not both")
    if body.mode == "exact" and body.level < 1:
        raise invalid("level", "an exact pin needs a level of at least 1")
    first, last = body.messages or (None, None)
    if first is not None and last is not None and not 0 <= first <= last:
        raise invalid("messages", "a range of log positions from 0, first <= last")
    held = Pin.given(pin, body.mode, body.level, first, last, body.document)
    pins = [p.describe() for p in logs.pin(name, log, held)]
    return {"bank": name, "log": log, "pinned": held.describe(), "pins": pins}


@router.delete(f"{LOG}/pins/{{pin}}", response_model=Unpinned, responses=errors(404))
def unpin_log(
    bank: str, log: str, pin: str, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Remove a pin, by name."""
    name = bank_for(memory, auth, bank, must_exist=False)
    logs.unpin(name, log, pin)
    return {"bank": name, "log": log, "unpinned": pin}


@router.delete(LOG, response_model=LogDeleted, responses=errors(404))
def delete_log(bank: str, log: str, auth: Auth, memory: Memory, logs: Logs) -> dict[str, Any]:
    """Delete a log with its summaries, last layout and pins."""
    name = bank_for(memory, auth, bank, must_exist=False)
    logs.delete(name, log)
    return {"bank": name, "log": log, "deleted": True}
