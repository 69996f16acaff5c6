"""Asynchronous operations (an `async` retain): their state and result, from the database, so
any instance sharing it can answer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...errors import NotFoundError
from .deps import Auth, Memory
from .errors import errors
from .models import Operation

__all__ = ["router"]

router = APIRouter(prefix="/v1/operations", tags=["operations"])


@router.get("/{op_id}", response_model=Operation, responses=errors(404))
def operation(op_id: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """An operation's state (`running`, `done`, `failed`) and, once done, its result."""
    found = memory.store.get_operation(op_id)
    if found is None or not auth.allows(found["bank"]):
        raise NotFoundError(f"no operation {op_id!r}")
    return found
