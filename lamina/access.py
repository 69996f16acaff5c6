"""API keys: made, stored hashed, scoped to banks; one place decides who may use which bank.

The HTTP API and the MCP server over HTTP both call `access_for`; neither needs the other's
dependencies for it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from .errors import AccessError
from .store.base import Store

__all__ = ["KEY_PREFIX", "Access", "access_for", "hash_key", "new_key"]

KEY_PREFIX = "lam_"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Access:
    banks: list[str] | None
    """The banks the caller may use; None: every bank (no key configured, or a local caller)."""

    def allows(self, bank: str) -> bool:
        return self.banks is None or "*" in self.banks or bank in self.banks


def access_for(store: Store, authorization: str | None) -> Access:
    """Every bank while no key exists; otherwise the banks of the bearer key, which is then
    required."""
    if store.count_api_keys() == 0:
        return Access(None)
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise AccessError("an API key is required (Authorization: Bearer <key>)")
    found = store.find_api_key(hash_key(key.strip()))
    if found is None:
        raise AccessError("unknown API key")
    return Access(found[1])
