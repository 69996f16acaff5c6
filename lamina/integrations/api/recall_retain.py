"""Recall from a bank and retain into it (at once, or as an operation answered 202)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ...bank.bank import MemoryBank
from ...bank.recall import RecallOptions
from ...errors import InputError, LaminaError
from .deps import Auth, Memory, bank_for
from .errors import errors
from .models import OperationStarted, RecallAnswer, RecallBody, RetainBody, RetainReport

__all__ = ["retain_body", "router"]

router = APIRouter(prefix="/v1/banks", tags=["recall and retain"])


@router.post("/{bank}/recall", response_model=RecallAnswer, responses=errors(404, 413, 422))
def recall(bank: str, body: RecallBody, auth: Auth, memory: Memory) -> dict[str, Any]:
    """The memories that best answer `query`, within `budget` tokens, best first."""
    name = bank_for(memory, auth, bank)
    documents = frozenset(body.documents) if body.documents else None
    if body.agents:
        documents = memory.agent_documents(name, body.agents, body.documents)
    options = RecallOptions(
        budget=body.budget,
        limit=body.limit,
        documents=documents,
        tags=frozenset(body.tags) if body.tags else None,
        since=body.since,
        until=body.until,
        show_wrong=body.show_wrong,
    )
    return {"bank": name, **memory.recall(body.query, name, options).as_dict()}


def retain_body(memory: MemoryBank, bank: str, body: RetainBody) -> dict[str, Any]:
    """Retain what a request sent, read in memory (no file), and report. Messages without an
    id get one from their content, so a client may send the whole conversation every time or
    only what is new: either way each message is stored once (`MemoryBank.retain_messages`)."""
    if body.text is not None:
        report = memory.retain_text(
            body.text, bank, body.document, tags=body.tags, metadata=body.metadata
        )
    elif body.messages:
        report = memory.retain_messages(
            body.messages, bank, body.document, format=body.format,
            tags=body.tags, metadata=body.metadata,
        )  # fmt: skip
    else:
        raise InputError("give 'messages' or 'text'")
    return report.as_dict()


@router.post(
    "/{bank}/retain",
    response_model=RetainReport,
    responses={
        202: {
            "model": OperationStarted,
            "description": "With `async`: accepted; poll the operation at the Location given.",
        },
        **errors(400, 404, 413, 415, 422),
    },
)
def retain(bank: str, body: RetainBody, auth: Auth, memory: Memory) -> Any:
    """Remember `messages` (or one `text`) as the document `document`; what was retained
    before is skipped. With `async`, answers 202 at once with an operation to poll."""
    name = bank_for(memory, auth, bank, must_exist=False)
    if not body.run_async:
        return retain_body(memory, name, body)
    store = memory.store
    op_id = uuid.uuid4().hex
    store.save_operation(op_id, "retain", name, "running")

    def run() -> None:
        try:
            store.save_operation(op_id, "retain", name, "done", retain_body(memory, name, body))
        except LaminaError as exc:
            store.save_operation(op_id, "retain", name, "failed", error=str(exc))
        except Exception:
            failed = "the server failed on this retain"
            store.save_operation(op_id, "retain", name, "failed", error=failed)

    threading.Thread(target=run, daemon=True).start()
    started = OperationStarted(operation=op_id, status="running")
    return JSONResponse(started.model_dump(), 202, headers={"Location": f"/v1/operations/{op_id}"})
