"""Asynchronous operations and model spending, written once for both databases (see
lamina.store.dialect). Spending is shared by every process using the database, so a cap holds
across hooks, servers and CLI runs (lamina.store.ledger)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from .base import SPEND_KEPT
from .dialect import SQLBase
from .rows import select

__all__ = ["SQLOperations"]


class OperationRow(NamedTuple):
    id: str
    kind: str
    bank: str
    status: str
    result: Any
    error: str | None
    created_at: Any
    updated_at: Any


_OPERATION = select(OperationRow._fields, "o")


class SQLOperations(SQLBase):
    """The operations and spending part of `Store` (lamina.store.base.OperationStore)."""

    def save_operation(
        self,
        op_id: str,
        kind: str,
        bank: str,
        status: str,
        result: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        d = self.dialect
        now = d.now()
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO operations (id, kind, bank, status, result, error, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                " status = excluded.status, result = excluded.result, error = excluded.error,"
                " updated_at = excluded.updated_at",
                (op_id, kind, bank, status, None if result is None else d.json_in(result),
                 error, now, now),
            )  # fmt: skip

    def get_operation(self, op_id: str) -> dict[str, Any] | None:
        d = self.dialect
        row = self._one(f"SELECT {_OPERATION} FROM operations o WHERE o.id = ?", (op_id,))
        if row is None:
            return None
        data = OperationRow._make(row)._asdict()
        data["result"] = None if data["result"] is None else d.json_out(data["result"])
        data["created_at"] = d.time_out(data["created_at"]).isoformat()
        data["updated_at"] = d.time_out(data["updated_at"]).isoformat()
        return data

    def record_spend(
        self, summariser: str, at: datetime, input_tokens: int, output_tokens: int
    ) -> None:
        d = self.dialect
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO llm_spend (summariser, at, input_tokens, output_tokens)"
                " VALUES (?, ?, ?, ?)",
                (summariser, d.time_in(at), input_tokens, output_tokens),
            )
            self._run(conn, "DELETE FROM llm_spend WHERE at < ?", (d.time_in(at - SPEND_KEPT),))

    def spent_since(self, summariser: str, since: datetime) -> int:
        row = self._one(
            "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM llm_spend"
            " WHERE summariser = ? AND at >= ?",
            (summariser, self.dialect.time_in(since)),
        )
        return int(row[0]) if row else 0
