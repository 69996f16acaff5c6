"""Corrections over HTTP: mark a memory wrong or superseded, list the marks, undo one
(lamina.bank.corrections)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from .deps import Auth, Memory, bank_for
from .errors import errors
from .models import MarkBody, Marked, MarkList

__all__ = ["router"]

router = APIRouter(prefix="/v1/banks", tags=["corrections"])


@router.get("/{bank}/marks", response_model=MarkList, responses=errors(404))
def list_marks(bank: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """The bank's memories marked wrong or superseded, oldest mark first."""
    name = bank_for(memory, auth, bank)
    return {"bank": name, "marks": [m.as_dict() for m in memory.corrections(name)]}


@router.put(
    "/{bank}/marks/{memory_id:path}", response_model=Marked, responses=errors(400, 404, 413, 422)
)
def mark(bank: str, memory_id: str, body: MarkBody, auth: Auth, memory: Memory) -> dict[str, Any]:
    """Mark a memory wrong (recall leaves it out; the prompt hook never injects it) or
    superseded by `replacement` (recall shows that one in its place). Replaces its mark."""
    name = bank_for(memory, auth, bank)
    if body.state == "wrong":
        if body.replacement:
            from ...errors import InputError

            raise InputError("only a superseded memory has a replacement")
        found = memory.mark_wrong(name, memory_id, body.note)
    else:
        found = memory.supersede(name, memory_id, body.replacement or "", body.note)
    return {"bank": name, "mark": found.as_dict()}


@router.delete("/{bank}/marks/{memory_id:path}", response_model=Marked, responses=errors(404))
def unmark(bank: str, memory_id: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """Remove a memory's mark: recall treats it as before. Answers the mark removed."""
    name = bank_for(memory, auth, bank)
    return {"bank": name, "mark": memory.unmark(name, memory_id).as_dict()}
