"""What the store's SQL needs to know about its database, in one small object, and the base
the store's parts are written on.

The store is written once (lamina.store.documents, memories, logs, keys, operations) in SQL
with `?` placeholders, over a `Dialect` and a `SQLBase` that each engine fills in:

- the dialect says how values go in and come out (JSON, arrays, times, vectors), how a list is
  passed and matched (`any_of`), how a row is locked for the rest of a transaction, how rows
  are inserted in bulk skipping those that exist, and how `page_memories`' filter is spelled;
- the engine (lamina.store.sqlite, lamina.store.postgres) connects, pools, migrates, and writes
  memories with their search postings, which each database keeps in its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, ClassVar

__all__ = ["Columns", "Dialect", "Rows", "SQLBase"]

Columns = Sequence[tuple[str, str]]
Rows = Sequence[Sequence[Any]]


class Dialect:
    """The differences between SQLite and PostgreSQL that the shared SQL meets. Subclassed
    once per engine (`SQLiteDialect`, `PostgresDialect`); the attributes below are the
    SQLite spelling unless a subclass says otherwise."""

    mark = "?"
    """The parameter placeholder `sql()` turns `?` into."""
    for_update = ""
    """Appended to a SELECT of one table's row to lock it for the rest of the transaction
    (SQLite: nothing, a write transaction holds the whole database)."""
    null_vector = "NULL"
    """A NULL in the embedding column's type (what a read leaving vectors out selects)."""
    unique_violation: type[Exception] = Exception
    """What inserting a second row with the same unique key raises."""

    # -- page_memories' filter (lamina.store.paging) ----------------------------------------
    has_tag = ""
    """A condition true when the memory `m` carries the tag given as its one parameter."""
    has_ascii_word = ""
    """A condition true when `m.text` contains the (lower-cased, ASCII) word, taken literally."""
    has_word = ""
    """The same for any other word, given as `word_param(word)`."""
    newest_first = ""
    """ORDER BY newest first: memories without a time last, ties in storage order."""
    oldest_first = ""
    """ORDER BY in exactly the reverse order."""
    bank_with_document = ""
    """The bank's condition when a document is named too (its one parameter the bank's id)."""

    def sql(self, text: str) -> str:
        """`text` (written with `?` placeholders) as this database reads it."""
        return text

    def execute(
        self, conn: Any, sql: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> Any:
        """Run one statement written with `?` placeholders; its cursor. `binary`: values
        travel in binary where the driver can (vectors)."""
        raise NotImplementedError

    def executemany(self, conn: Any, sql: str, rows: Rows) -> int:
        """Run one statement for each row; the rows changed in all."""
        raise NotImplementedError

    def insert_id(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT of one row (written without RETURNING); the new row's `id`."""
        raise NotImplementedError

    def insert_new(self, conn: Any, table: str, columns: Columns, rows: Rows) -> int:
        """Insert rows, skipping those whose key the table holds already; how many went in.
        `columns` are (name, PostgreSQL type) pairs."""
        raise NotImplementedError

    def any_of(self, column: str) -> str:
        """A condition true when `column` is one of the values given as one parameter
        (`list_in(values)`)."""
        raise NotImplementedError

    # -- values in and out ------------------------------------------------------------------
    json_in: Callable[[Any], Any]
    json_out: Callable[[Any], Any]
    array_in: Callable[[Sequence[Any]], Any]
    """A list of values for an array column (SQLite: JSON text)."""
    array_out: Callable[[Any], Sequence[Any]]
    list_in: Callable[[Sequence[Any]], Any]
    """The parameter of `any_of`."""
    time_in: Callable[[datetime], Any]
    """A time to store (SQLite: UTC ISO text, which sorts as time does)."""
    time_out: Callable[[Any], datetime]
    bound_in: Callable[[datetime], Any]
    """A time to compare stored times with; a time without a zone is taken as UTC."""
    vector_in: Callable[[Any], Any]
    vector_out: Callable[[Any], Any]
    """A vector (None for NULL) as a float32 array."""
    word_param: Callable[[str], Any]
    """The parameter of `has_word`."""

    def now(self) -> Any:
        """The current time, as `time_in` stores it."""
        return self.time_in(datetime.now(UTC))


class SQLBase:
    """What the store's parts need of an engine: its dialect, a connection to read with, a
    transaction to write in, and the few writes each database does its own way. The helpers
    here find and lock a bank and count its changes for readers' indexes."""

    dialect: ClassVar[Dialect]
    VECTOR_EPOCH: ClassVar[str] = ""
    """Added to `_bump`'s SET when vectors changed in place (SQLite counts them for its
    vector files)."""

    def _read(self) -> AbstractContextManager[Any]:
        """A connection outside any explicit transaction."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:
        """A connection in a write transaction, committed when the block ends normally."""
        raise NotImplementedError

    def _stream(self, sql: str, params: Sequence[Any]) -> Iterator[Sequence[Any]]:
        """The rows of a query that may be large, read in batches."""
        raise NotImplementedError

    def _delete_memories(
        self, conn: Any, bank_id: int, condition: str, params: Sequence[Any]
    ) -> int:
        """Delete the bank's memories matching `condition` (on `memories`, `?` style) with
        their search postings; how many went."""
        raise NotImplementedError

    def _run(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.dialect.execute(conn, sql, params)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of a read (None when there is none)."""
        with self._read() as conn:
            return self.dialect.execute(conn, sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._read() as conn:
            rows: list[Any] = self.dialect.execute(conn, sql, params).fetchall()
            return rows

    def _bank_id(self, conn: Any, name: str, *, lock: bool = False) -> int | None:
        """The bank's row id; `lock`: the bank's writes wait for this transaction."""
        row = self._run(
            conn,
            "SELECT id FROM banks WHERE name = ?" + (self.dialect.for_update if lock else ""),
            (name,),
        ).fetchone()
        return int(row[0]) if row else None

    def _new_bank_id(self, conn: Any, name: str) -> int:
        """The bank's row id, creating the bank if needed, locked."""
        self._run(
            conn,
            "INSERT INTO banks (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            (name, self.dialect.now()),
        )
        bank_id = self._bank_id(conn, name, lock=True)
        assert bank_id is not None
        return bank_id

    def _bump(self, conn: Any, bank_id: int, *, deleted: bool, vectors: bool = False) -> None:
        """Count a change to the bank's memories: `deleted` when memories went or changed in
        place (readers then rebuild their index rather than extend it)."""
        extra = self.VECTOR_EPOCH if vectors else ""
        self._run(
            conn,
            f"UPDATE banks SET generation = generation + 1, deletions = deletions + ?{extra}"
            " WHERE id = ?",
            (1 if deleted else 0, bank_id),
        )


def cached(translate: Callable[[str], str]) -> Callable[[str], str]:
    """`translate` remembered per statement text (the shared SQL is a few dozen texts)."""
    seen: dict[str, str] = {}

    def sql(text: str) -> str:
        out = seen.get(text)
        if out is None:
            out = seen[text] = translate(text)
        return out

    return sql
