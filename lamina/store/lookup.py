"""The existence checks every surface makes, of a bank and of a document: the name, or
`NotFoundError`. A server answers a bank its caller may not use with `missing_bank`, the same
error as for a bank that does not exist, so a key cannot learn which other banks there are."""

from __future__ import annotations

from ..errors import InputError, NotFoundError
from .base import Store

__all__ = ["check_bank_name", "missing_bank", "require_bank", "require_document"]

_BANK_NAME_LIMIT = 200


def check_bank_name(name: str) -> str:
    """`name` when it can name a new bank: 1 to 200 characters, no control characters, no
    slash or backslash (a bank's name is a path segment in the HTTP API), not only dots, no
    space at either end."""
    if (
        not name
        or len(name) > _BANK_NAME_LIMIT
        or any(ord(c) < 32 or c in "/\\\x7f" for c in name)
        or not name.strip(".")
        or name != name.strip()
    ):
        shown = name if len(name) <= 40 else name[:40] + "…"
        raise InputError(f"not a valid bank name: {shown!r} (1-200 characters, no / or \\)")
    return name


def missing_bank(bank: str) -> NotFoundError:
    return NotFoundError(f"no bank named {bank!r}", what="bank", name=bank)


def require_bank(store: Store, bank: str) -> str:
    """`bank` if the store holds it: a mistyped name fails instead of acting on an empty bank."""
    if store.get_bank(bank) is None:
        raise missing_bank(bank)
    return bank


def require_document(store: Store, bank: str, document: str) -> str:
    if store.get_document(bank, document) is None:
        message = f"no document {document!r} in bank {bank!r}"
        raise NotFoundError(message, what="document", name=document)
    return document
