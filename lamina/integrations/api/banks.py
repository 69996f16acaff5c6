"""Banks, their documents and memories: list them, forget a document or a memory."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...errors import NotFoundError
from .deps import Auth, Memory, Paged, bank_for
from .errors import errors
from .models import BankList, DocumentList, ForgottenDocument, ForgottenMemory

__all__ = ["router"]

router = APIRouter(prefix="/v1/banks", tags=["banks"])


@router.get("", response_model=BankList, responses=errors())
def list_banks(auth: Auth, memory: Memory, page: Paged) -> dict[str, Any]:
    """The banks this key may use, by name, with their sizes."""
    names = [item.name for item in memory.banks() if auth.allows(item.name)]
    rows = []
    for bank in page.of(names):
        stats = memory.stats(bank)
        rows.append({"bank": bank, "documents": stats.documents, "memories": stats.memories})
    return {"banks": rows, **page.counts(len(names))}


@router.get("/{bank}/documents", response_model=DocumentList, responses=errors(404))
def list_documents(bank: str, auth: Auth, memory: Memory, page: Paged) -> dict[str, Any]:
    """The documents (retained sources) of a bank."""
    name = bank_for(memory, auth, bank)
    documents = memory.documents(name)
    return {
        "bank": name,
        "documents": [
            {"id": d.id, "source": d.source, "tags": list(d.tags),
             "updated_at": d.updated_at.isoformat()}
            for d in page.of(documents)
        ],
        **page.counts(len(documents)),
    }  # fmt: skip


@router.delete(
    "/{bank}/documents/{document:path}", response_model=ForgottenDocument, responses=errors(404)
)
def forget_document(bank: str, document: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """Forget a document: its memories and records are deleted. Its id may contain '/'."""
    name = bank_for(memory, auth, bank)
    forgotten = memory.forget_document(name, memory.require_document(name, document))
    return {"bank": name, "document": document, "memories_forgotten": forgotten}


@router.delete(
    "/{bank}/memories/{memory_id:path}", response_model=ForgottenMemory, responses=errors(404)
)
def forget_memory(bank: str, memory_id: str, auth: Auth, memory: Memory) -> dict[str, Any]:
    """Forget one memory, by id (as recall returns it)."""
    name = bank_for(memory, auth, bank)
    if not memory.forget_memory(name, memory_id):
        raise NotFoundError(f"no memory {memory_id!r} in bank {name!r}")
    return {"bank": name, "memory": memory_id, "forgotten": True}
