"""API keys: made, stored hashed, scoped to banks; one place decides who may use which bank.

The HTTP API and the MCP server over HTTP both ask a `Gate`; neither needs the other's
dependencies for it. A gate is open (no API key asked, every bank) only when its server was
started on a loopback address with no key in the database; once a key has been seen it stays
closed for the life of the process, so revoking the last key locks everyone out instead of
letting everyone in. A server started beyond loopback, or with keys, is closed from the start.

Loopback is not private: every local user can reach it. So an open gate still asks every
request for a credential only its owner can read: the data directory's local token
(`local_token`: `<data dir>/local-token`, mode 0600), as `Authorization: Bearer <token>`, or
the session cookie a browser gets from a one-time login address (`login_code`, which
`lamina inspect` prints and opens).

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

from .errors import AccessError, InputError
from .owned import private_dir, private_opener, read_owned
from .store.base import Store

__all__ = [
    "KEY_PREFIX",
    "LOCAL_TOKEN_FILE",
    "Access",
    "Gate",
    "access_for",
    "hash_key",
    "is_loopback",
    "local_token",
    "new_key",
]

KEY_PREFIX = "lam_"
LOCAL_TOKEN_FILE = "local-token"
TOKEN_REQUIRED = (
    "this server needs its local token (Authorization: Bearer <the local-token file in "
    "Lamina's data directory>)"
)


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _secret() -> str:
    return secrets.token_urlsafe(32)


def local_token(home: Path) -> str:
    """The data directory's local token, made on first use (`<home>/local-token`, mode 0600):
    what a server with no API keys asks of every request. A file that others could read or
    write, or that is not this user's, is replaced by a new one."""
    path = home / LOCAL_TOKEN_FILE
    for _ in range(3):
        try:
            token: str | None = read_owned(path, private=True).decode("ascii").strip()
        except FileNotFoundError:
            token = None
        except (OSError, UnicodeDecodeError):  # not trusted: whoever could read it knows it
            token = ""
        if token is not None and len(token) >= 32:
            return token
        try:
            if token is not None:
                path.unlink()
            # Written aside, then linked in place: another server never reads half a token.
            private_dir(home)
            fresh = _secret()
            aside = home / f".{LOCAL_TOKEN_FILE}.{os.getpid()}.{threading.get_ident()}"
            aside.unlink(missing_ok=True)
            with open(aside, "x", encoding="ascii", opener=private_opener) as handle:
                handle.write(fresh + "\n")
            try:
                path.hardlink_to(aside)
            except FileExistsError:  # made meanwhile by another server: read that one
                continue
            finally:
                aside.unlink(missing_ok=True)
        except OSError as exc:
            raise InputError(f"{path}: cannot write the local token ({exc})") from None
        return fresh
    raise InputError(f"{path}: cannot read or write the local token")


def _same(given: str | None, expected: str) -> bool:
    if not given:
        return False
    return secrets.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def _bearer(authorization: str | None) -> str | None:
    scheme, _, value = (authorization or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


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
    """Keyless loopback from the start and no key seen since: a caller with the token (or a
    session of a login) sees every bank."""
    allowed_dirs: tuple[Path, ...] = ()
    token: str = field(default_factory=_secret, repr=False)
    """What an open gate asks of every request (`Authorization: Bearer`). The servers' entry
    points pass the data directory's `local_token`; by default one nobody knows."""
    _session: str = field(default_factory=_secret, repr=False)
    _logins: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def at_start(
        cls,
        store: Store,
        host: str,
        allowed_dirs: Sequence[str | Path] = (),
        token: str | None = None,
    ) -> Gate:
        keyless = store.count_api_keys() == 0
        dirs = tuple(Path(os.path.realpath(Path(d).expanduser())) for d in allowed_dirs)
        gate = cls(store, open=keyless and is_loopback(host), allowed_dirs=dirs)
        gate.token = token or gate.token
        return gate

    def describe(self, token_file: Path | None = None) -> str:
        """One line for the server's start (`token_file`: where the token is kept)."""
        if self.open:
            where = f", in {token_file}" if token_file is not None else ""
            return (
                f"no API keys: every request needs the local token{where} (loopback only); "
                "once a key is created, every request needs a key"
            )
        return "API keys required (Authorization: Bearer <key>)"

    @property
    def cookie(self) -> str:
        """The name of the session cookie: one per token, so that servers of two data
        directories on one host (cookies do not tell ports apart) keep theirs apart."""
        return "lamina_" + hashlib.sha256(self.token.encode()).hexdigest()[:12]

    def login_code(self) -> str:
        """A new one-time code for the login address (`/?token=CODE`)."""
        code = _secret()
        with self._lock:
            self._logins.add(code)
        return code

    def log_in(self, code: str) -> str | None:
        """The session cookie's value for a login code not used yet (the code is spent), else
        None."""
        with self._lock:
            if code not in self._logins:
                return None
            self._logins.discard(code)
            return self._session

    def access(self, authorization: str | None, session: str | None = None) -> Access:
        """The caller's banks, from its `Authorization` header and, while the gate is open, its
        session cookie; AccessError when it may not come in."""
        with self._lock:
            if self.open:
                if self.store.count_api_keys() == 0:
                    if _same(_bearer(authorization), self.token) or _same(session, self._session):
                        return Access(None)
                    raise AccessError(TOKEN_REQUIRED)
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
