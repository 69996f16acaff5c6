"""Compiling: a conversation sent whole (`/v1/compile`, nothing kept), and context logs kept in
a bank (append, compile, list, show, pin, delete), whose summaries and last layout are reused by
the next compile."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...context import CompileOptions, Compiler, ContextLog
from ...context.pins import Pin
from ...errors import InputError, NotFoundError
from ...messages import Message
from ..logs import check_budget, describe_log, find_log, log_summary, read_message_list
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
    if body.budget - body.reserve < 500:
        raise InputError("budget minus reserve must leave at least 500 tokens")
    given = read_message_list(body.messages, body.format, system=body.system)
    log = ContextLog.from_messages(given)
    options = CompileOptions(budget=body.budget, reserve=body.reserve)
    result = Compiler(logs.summariser).compile(log, options, body.request_format)
    return {"request": result.request, "report": result.report}


@router.get("/v1/banks/{bank}/logs", response_model=LogList, responses=errors(404))
def list_logs(bank: str, auth: Auth, memory: Memory, page: Paged) -> dict[str, Any]:
    """The context logs of a bank: messages, tokens, summaries, times."""
    name = bank_for(memory, auth, bank)
    found = memory.store.list_logs(name)
    return {
        "bank": name,
        "logs": [log_summary(memory.store, info) for info in page.of(found)],
        **page.counts(len(found)),
    }


@router.get(LOG, response_model=LogDetail, responses=errors(404))
def show_log(bank: str, log: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """One log: summaries by level, what its last compile showed raw and folded, its pins."""
    return describe_log(memory.store, bank_for(memory, auth, bank), log)


@router.post(f"{LOG}/messages", response_model=Appended, responses=errors(400, 404, 413, 415, 422))
def append_to_log(
    bank: str, log: str, body: AppendBody, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Append messages to a log (created on first use); those it holds already are skipped."""
    name = bank_for(memory, auth, bank, must_exist=False)
    messages = read_message_list(body.messages, body.format, ids_from=log, system=body.system)
    with logs.use(name, log) as stored:
        added = stored.append(messages)
        held = len(stored.log)
    return {"bank": name, "log": log, "received": len(messages), "added": added,
            "messages": held}  # fmt: skip


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
    messages: list[Message] = []
    if body.messages or body.system:
        name = bank_for(memory, auth, bank, must_exist=False)
        messages = read_message_list(body.messages or [], body.format, ids_from=log,
                                     system=body.system)  # fmt: skip
    else:
        name = bank_for(memory, auth, bank)
        find_log(memory.store, name, log)
    options = CompileOptions(budget=body.budget, reserve=body.reserve)
    with logs.use(name, log) as stored:
        stored.append(messages)
        if not len(stored.log):
            raise InputError(f"log {log!r} of bank {name!r} holds no messages to compile")
        result = stored.compile(options, body.request_format, ahead=True)
    return {"request": result.request, "report": result.report}


@router.put(f"{LOG}/pins/{{pin}}", response_model=Pinned, responses=errors(404, 409, 413, 422))
def pin_log(
    bank: str, log: str, pin: str, body: PinBody, auth: Auth, memory: Memory, logs: Logs
) -> dict[str, Any]:
    """Pin messages (or a document's) so every compile shows them raw, at an exact level, or
    no deeper than a level; a pin of the same name is replaced, a conflicting one refused."""
    name = bank_for(memory, auth, bank)
    find_log(memory.store, name, log)
    if (body.messages is None) == (body.document is None):
        raise invalid("messages", "give the messages held or a document, not both")
    if body.mode == "exact" and body.level < 1:
        raise invalid("level", "an exact pin needs a level of at least 1")
    first, last = body.messages or (None, None)
    if first is not None and last is not None and not 0 <= first <= last:
        raise invalid("messages", "a range of log positions from 0, first <= last")
    held = Pin.given(pin, body.mode, body.level, first, last, body.document)
    with logs.use(name, log) as stored:
        stored.pin(held)
        pins = [p.describe() for p in stored.pins()]
    return {"bank": name, "log": log, "pinned": held.describe(), "pins": pins}


@router.delete(f"{LOG}/pins/{{pin}}", response_model=Unpinned, responses=errors(404))
def unpin_log(bank: str, log: str, pin: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """Remove a pin, by name."""
    name = bank_for(memory, auth, bank)
    if not memory.store.delete_pin(name, log, pin):
        raise NotFoundError(f"no pin {pin!r} on log {log!r} in bank {name!r}")
    return {"bank": name, "log": log, "unpinned": pin}


@router.delete(LOG, response_model=LogDeleted, responses=errors(404))
def delete_log(bank: str, log: str, auth: Auth, memory: Memory, logs: Logs) -> dict[str, Any]:
    """Delete a log with its summaries, last layout and pins."""
    name = bank_for(memory, auth, bank)
    logs.forget(name, log)
    if not memory.store.delete_log(name, log):
        raise NotFoundError(f"no log {log!r} in bank {name!r}")
    return {"bank": name, "log": log, "deleted": True}
