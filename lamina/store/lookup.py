"""The two existence checks every surface makes: a bank, and a document of a bank.

    require_bank(store, "my-project")              # the name, or NotFoundError
    require_document(store, "my-project", "s-42")  # the id, or NotFoundError

A server answers a bank its caller may not use with `missing_bank`, the same error as a bank
that does not exist, so a key cannot learn which other banks there are.
"""

from __future__ import annotations

from ..errors import NotFoundError
from .base import Store

__all__ = ["missing_bank", "require_bank", "require_document"]


def missing_bank(bank: str) -> NotFoundError:
    """The error for a bank that does not exist (or that the caller may not see)."""
    return NotFoundError(f"no bank named {bank!r}", what="bank", name=bank)


def require_bank(store: Store, bank: str) -> str:
    """`bank` if the store holds it; `NotFoundError` otherwise, so that a mistyped name fails
    instead of acting on an empty bank."""
    if store.get_bank(bank) is None:
        raise missing_bank(bank)
    return bank


def require_document(store: Store, bank: str, document: str) -> str:
    """`document` if bank `bank` holds a document of that id; `NotFoundError` otherwise."""
    if store.get_document(bank, document) is None:
        raise NotFoundError(
            f"no document {document!r} in bank {bank!r}", what="document", name=document, bank=bank
        )
    return document
