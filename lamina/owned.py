"""Files and folders for their owner only: how Lamina creates what it keeps in the data
directory, and checks what it trusts there (design invariants 9 and 13).

Every folder Lamina creates under the data directory (the directory itself included, and any
missing parent) is made with `private_dir`: mode 0700, whatever the umask. Every file it
creates there is opened through `private_opener`: mode 0600. Existing folders and files keep
their modes (the command line warns about a data directory others can read).

What Lamina loads or connects to from there (the cached optimised model, the local token, the
warm server's socket) is trusted only when `owned_problem` finds nothing wrong with it: owned
by this user, not writable by anyone else, and not a symbolic link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["owned_problem", "private_dir", "private_opener", "read_owned", "write_private"]


def private_dir(path: Path) -> Path:
    """`path`, created with mode 0700 (and each missing parent likewise) if it is missing."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(0o700)
        except FileExistsError:  # made meanwhile by another process
            continue
        folder.chmod(0o700)  # whatever the umask
    return path


def private_opener(path: str, flags: int) -> int:
    """An `opener` for `open()`: a file it creates has mode 0600, and a symbolic link put in
    its place is not followed (OSError instead)."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (created with mode 0600 if it is missing)."""
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:
        handle.write(text)


def owned_problem(info: os.stat_result, *, private: bool = False) -> str | None:
    """Why a file or folder with this `lstat` is not to be trusted (None: it is): not this
    user's, writable by others, or (with `private`) readable or usable by others."""
    if info.st_uid != os.getuid():
        return f"owned by uid {info.st_uid}, not by this user ({os.getuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & (0o077 if private else 0o022):
        return f"mode {mode:04o} lets other users {'in' if private else 'write it'}"
    return None


def read_owned(path: Path, *, private: bool = False) -> bytes:
    """The bytes of a regular file that `owned_problem` finds nothing wrong with, checked on the
    opened file itself (no symbolic link followed). PermissionError saying why otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        problem = owned_problem(info, private=private)
        if problem is None and not stat.S_ISREG(info.st_mode):
            problem = "not a regular file"
        if problem is not None:
            raise PermissionError(f"{path}: not trusted: {problem}")
        return handle.read()
