"""Opening a SQLite bank while other processes hold or recover it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lamina.errors import StoreError
from lamina.store import sqlite as sqlite_store


class _LockedFor:
    """A connection whose journal-mode pragmas report "locked" for the first `n` tries.

    SQLite returns SQLITE_BUSY without calling the busy handler while another process
    runs WAL recovery or changes the journal mode; this reproduces that answer.
    """

    def __init__(self, conn: sqlite3.Connection, n: int) -> None:
        self.conn, self.left, self.tries = conn, n, 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA journal_mode"):
            self.tries += 1
            if self.left > 0:
                self.left -= 1
                raise sqlite3.OperationalError("database is locked")
        return self.conn.execute(sql, *args)


def test_a_briefly_locked_database_still_opens_in_wal(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    flaky = _LockedFor(conn, 3)
    sqlite_store._enable_wal(flaky, str(tmp_path / "a.db"))  # type: ignore[arg-type]
    assert flaky.left == 0
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_database_locked_for_good_fails_with_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 50)
    conn = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    with pytest.raises(StoreError, match=r"b\.db: database stayed locked"):
        sqlite_store._enable_wal(_LockedFor(conn, 10_000), str(tmp_path / "b.db"))  # type: ignore[arg-type]


def test_a_bank_already_in_wal_opens_without_changing_mode(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    first = sqlite_store.SQLiteStore(db)
    first.conn.execute("SELECT 1")
    # Another process is writing: the second store must still open and read.
    first.conn.execute("BEGIN IMMEDIATE")
    second = sqlite_store.SQLiteStore(db)
    assert second.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    first.conn.execute("COMMIT")
    first.close()
    second.close()
