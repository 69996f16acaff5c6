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
    "sqlite_path",
]

_POSTGRES = ("postgresql://", "postgres://")


def sqlite_path(target: str | Path) -> Path | None:
    """The SQLite file a database target names; None for a PostgreSQL URL. ConfigError for a
    target that is neither (see `open_store`)."""
    if isinstance(target, Path):
        return target
    if target.startswith(_POSTGRES):
        return None
    if target.startswith("sqlite:"):
        path = target.removeprefix("sqlite:")
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ConfigError(f"{target}: a sqlite URL needs a path (sqlite:///path/to/lamina.db)")
        return Path(path).expanduser()
    if "://" in target:
        scheme = target.split("://", 1)[0]
        raise ConfigError(
            f"{describe_target(target)}: unknown database scheme {scheme!r}"
            " (use postgresql://... or a SQLite path)"
        )
    return Path(target).expanduser()


def open_store(target: str | Path) -> Store:
    """The store a database URL or SQLite path names (nothing is opened until first use).

    `postgresql://user@host/db` (or `postgres://`) is the PostgreSQL store; `sqlite:///abs/path`,
    `sqlite:relative/path` or a plain path is a SQLite file.
    """
    path = sqlite_path(target)
    if path is not None:
        return SQLiteStore(path)
    from .postgres import PostgresStore

    return PostgresStore(str(target))
