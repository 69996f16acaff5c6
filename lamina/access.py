"""API keys: made, stored hashed, scoped to banks; one place decides who may use which bank.

The HTTP API and the MCP server over HTTP both ask a `Gate`; neither needs the other's
dependencies for it. A gate is open (no key asked, every bank) only when its server was started
on a loopback address with no key in the database; once a key has been seen it stays closed
for the life of the process, so revoking the last key locks everyone out instead of letting
everyone in. A server started beyond loopback, or with keys, is closed from the start.

A gate also holds the directories an operator allowed remote callers to name files in (MCP's
`retain_transcript`, `compile_transcript`, `append_to_log`, `compile_log`): none by default.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import AccessError
from .store.base import Store

__all__ = ["KEY_PREFIX", "Access", "Gate", "access_for", "hash_key", "is_loopback", "new_key"]

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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Gate:
    """Who may use which bank, and which server files a remote caller may name, for one
    server process."""

    store: Store
    open: bool
    """Keyless loopback from the start and no key seen since: every caller sees every bank."""
    allowed_dirs: tuple[Path, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def at_start(cls, store: Store, host: str, allowed_dirs: Sequence[str | Path] = ()) -> Gate:
        keyless = store.count_api_keys() == 0
        dirs = tuple(Path(os.path.realpath(Path(d).expanduser())) for d in allowed_dirs)
        return cls(store, open=keyless and is_loopback(host), allowed_dirs=dirs)

    def describe(self) -> str:
        """One line for the server's start."""
        if self.open:
            return (
                "no API keys: open to every local caller (loopback only); once a key is "
                "created, every request needs one"
            )
        return "API keys required (Authorization: Bearer <key>)"

    def access(self, authorization: str | None) -> Access:
        with self._lock:
            if self.open:
                if self.store.count_api_keys() == 0:
                    return Access(None)
                self.open = False  # a key was created: closed for good
        return access_for(self.store, authorization, closed=True)

    def server_path(self, path: str) -> str:
        """A path a remote caller named, if it lies inside an allowed directory (symbolic links
        resolved); else an AccessError that says nothing about whether the path exists."""
        resolved = Path(os.path.realpath(Path(path)))
        for allowed in self.allowed_dirs:
            if resolved == allowed or allowed in resolved.parents:
                return str(resolved)
        raise AccessError(
            "files on the server cannot be named by a remote caller here; send the messages instead"
        )


def access_for(store: Store, authorization: str | None, *, closed: bool = False) -> Access:
    """The banks of the bearer key, which is required; without `closed`, every bank while no
    key exists (a local caller with no server in between)."""
    if not closed and store.count_api_keys() == 0:
        return Access(None)
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise AccessError("an API key is required (Authorization: Bearer <key>)")
    found = store.find_api_key(hash_key(key.strip()))
    if found is None:
        raise AccessError("unknown API key")
    return Access(found[1])
