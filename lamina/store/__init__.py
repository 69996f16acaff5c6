"""Storage behind one protocol: SQLite embedded by default, PostgreSQL for shared banks."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .base import MemoryRow, RetainBatch, RetainOutcome, Store
from .sqlite import SQLiteStore
from .urls import describe_target

__all__ = [
    "MemoryRow",
    "RetainBatch",
    "RetainOutcome",
    "SQLiteStore",
    "Store",
    "describe_target",
    "open_store",
]

_POSTGRES = ("postgresql://", "postgres://")


def open_store(target: str | Path) -> Store:
    """The store a database URL or SQLite path names (nothing is opened until first use).

    `postgresql://user@host/db` (or `postgres://`) is the PostgreSQL store; `sqlite:///abs/path`,
    `sqlite:relative/path` or a plain path is a SQLite file.
    """
    if isinstance(target, Path):
        return SQLiteStore(target)
    if target.startswith(_POSTGRES):
        from .postgres import PostgresStore

        return PostgresStore(target)
    if target.startswith("sqlite:"):
        path = target.removeprefix("sqlite:")
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ConfigError(f"{target}: a sqlite URL needs a path (sqlite:///path/to/lamina.db)")
        return SQLiteStore(Path(path).expanduser())
    if "://" in target:
        scheme = target.split("://", 1)[0]
        raise ConfigError(
            f"{describe_target(target)}: unknown database scheme {scheme!r}"
            " (use postgresql://... or a SQLite path)"
        )
    return SQLiteStore(Path(target).expanduser())
