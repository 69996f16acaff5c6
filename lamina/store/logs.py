"""Context logs, written once for both databases (see lamina.store.dialect): a log's
messages in append order, its summaries (each written once, never changed), the frontier of
its last compile, its pins, and the token counts of its messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from ..errors import StoreError
from ..messages import JSONValue, Message, message_from_json, message_to_json
from . import rows
from .base import ContextLogInfo, StoredPin, StoredSummary, contiguous_counts
from .dialect import SQLBase
from .rows import LOG, PIN, SUMMARY

__all__ = ["SQLLogs"]

_LOG = (
    "(SELECT l.id FROM context_logs l JOIN banks b ON b.id = l.bank_id"
    " WHERE b.name = ? AND l.name = ?)"
)
"""The log's id, from its bank's name and its own (two parameters)."""

_MAX_POSITION = 2**31 - 1
"""Past any position (an `int` column)."""

_MESSAGES = (("log_id", "bigint"), ("position", "int"), ("message_id", "text"), ("body", "text"))
_COUNTS = (
    ("log_id", "bigint"),
    ("key", "text"),
    ("position", "int"),
    ("tokens", "int"),
    ("shown", "int"),
    ("uncut", "int"),
)
"""The columns `insert_new` writes (name, PostgreSQL type)."""


class SQLLogs(SQLBase):
    """The context-log part of `Store` (lamina.store.base.LogStore)."""

    def _log_id(self, conn: Any, bank: str, log: str, *, lock: bool = False) -> int | None:
        """The log's row id; `lock`: other writers of the log wait for this transaction."""
        row = self._run(
            conn,
            "SELECT id FROM context_logs WHERE bank_id = (SELECT id FROM banks WHERE name = ?)"
            " AND name = ?" + (self.dialect.for_update if lock else ""),
            (bank, log),
        ).fetchone()
        return int(row[0]) if row else None

    def _existing_log(self, conn: Any, bank: str, log: str, *, lock: bool = False) -> int:
        log_id = self._log_id(conn, bank, log, lock=lock)
        if log_id is None:
            raise StoreError(f"no context log {log!r} in bank {bank!r}")
        return log_id

    def append_log_messages(self, bank: str, log: str, messages: Sequence[Message]) -> int:
        d = self.dialect
        now = d.now()
        with self._write() as conn:
            self._new_bank_id(conn, bank)
            self._run(
                conn,
                "INSERT INTO context_logs (bank_id, name, created_at, updated_at)"
                " SELECT id, ?, ?, ? FROM banks WHERE name = ?"
                " ON CONFLICT (bank_id, name) DO NOTHING",
                (log, now, now, bank),
            )
            # The log's row lock orders appenders: positions follow commit order.
            log_id = self._existing_log(conn, bank, log, lock=True)
            if not messages:
                return 0
            row = self._run(conn, "SELECT messages FROM context_logs WHERE id = ?", (log_id,))
            count = int(row.fetchone()[0])
            have = self._run(
                conn,
                "SELECT message_id FROM context_messages"
                f" WHERE log_id = ? AND {d.any_of('message_id')}",
                (log_id, d.list_in([m.id for m in messages])),
            )
            seen = {str(r[0]) for r in have}
            new: list[Message] = []
            for message in messages:
                if message.id not in seen:
                    seen.add(message.id)
                    new.append(message)
            if not new:
                return 0
            d.insert_new(
                conn,
                "context_messages",
                _MESSAGES,
                [
                    (log_id, count + n, m.id, orjson.dumps(message_to_json(m)).decode())
                    for n, m in enumerate(new)
                ],
            )
            self._run(
                conn,
                "UPDATE context_logs SET messages = ?, updated_at = ? WHERE id = ?",
                (count + len(new), now, log_id),
            )
        return len(new)

    def set_log_times(
        self, bank: str, log: str, created_at: datetime, updated_at: datetime
    ) -> None:
        times = self.dialect.time_in(created_at), self.dialect.time_in(updated_at)
        with self._write() as conn:
            self._run(
                conn,
                "UPDATE context_logs SET created_at = ?, updated_at = ?"
                " WHERE name = ? AND bank_id = (SELECT id FROM banks WHERE name = ?)",
                (*times, log, bank),
            )

    def read_log(
        self, bank: str, log: str, start: int = 0, end: int | None = None
    ) -> list[Message]:
        found = self._all(
            f"SELECT body FROM context_messages WHERE log_id = {_LOG} AND position >= ?"
            " AND position < ? ORDER BY position",
            (bank, log, start, _MAX_POSITION if end is None else end),
        )
        return [message_from_json(orjson.loads(r[0])) for r in found]

    def held_log_ids(self, bank: str, log: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        d = self.dialect
        found = self._all(
            f"SELECT message_id FROM context_messages WHERE log_id = {_LOG}"
            f" AND {d.any_of('message_id')}",
            (bank, log, d.list_in(list(ids))),
        )
        return {str(r[0]) for r in found}

    def list_logs(self, bank: str) -> list[ContextLogInfo]:
        found = self._all(
            f"SELECT {LOG} FROM context_logs l JOIN banks b ON b.id = l.bank_id"
            " WHERE b.name = ? ORDER BY l.name",
            (bank,),
        )
        return [rows.log_info(bank, r, self.dialect) for r in found]

    def delete_log(self, bank: str, log: str) -> bool:
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            if log_id is None:
                return False
            self._run(conn, "DELETE FROM context_logs WHERE id = ?", (log_id,))
        return True

    def save_summary(self, bank: str, log: str, summary: StoredSummary) -> bool:
        d = self.dialect
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log)
            cur = self._run(
                conn,
                "INSERT INTO context_summaries (log_id, id, level, start_position, end_position,"
                " children, text, tokens, summariser, request_hash, stop_reason, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (log_id, id) DO NOTHING",
                (
                    log_id, summary.id, summary.level, summary.start, summary.end,
                    d.array_in(list(summary.children)), summary.text, summary.tokens,
                    summary.summariser, summary.request_hash, summary.stop_reason, d.now(),
                ),
            )  # fmt: skip
            return int(cur.rowcount) > 0

    def load_summaries(self, bank: str, log: str) -> list[StoredSummary]:
        found = self._all(
            f"SELECT {SUMMARY} FROM context_summaries s WHERE s.log_id = {_LOG} ORDER BY s.seq",
            (bank, log),
        )
        return [rows.summary(r, self.dialect) for r in found]

    def save_frontier(self, bank: str, log: str, frontier: Mapping[str, JSONValue]) -> None:
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log)
            self._run(
                conn,
                "UPDATE context_logs SET frontier = ? WHERE id = ?",
                (self.dialect.json_in(frontier), log_id),
            )

    def load_frontier(self, bank: str, log: str) -> dict[str, JSONValue] | None:
        row = self._one(
            "SELECT l.frontier FROM context_logs l JOIN banks b ON b.id = l.bank_id"
            " WHERE b.name = ? AND l.name = ?",
            (bank, log),
        )
        if row is None or row[0] is None:
            return None
        value: dict[str, JSONValue] = self.dialect.json_out(row[0])
        return value

    def save_log_counts(
        self,
        bank: str,
        log: str,
        key: str,
        start: int,
        counts: Sequence[tuple[int, int, int]],
    ) -> None:
        if not counts:
            return
        with self._write() as conn:
            log_id = self._log_id(conn, bank, log)
            if log_id is None:
                return
            values = [(log_id, key, start + n, *c) for n, c in enumerate(counts)]
            self.dialect.insert_new(conn, "context_counts", _COUNTS, values)

    def load_log_counts(self, bank: str, log: str, key: str) -> list[tuple[int, int, int]]:
        found = self._all(
            "SELECT position, tokens, shown, uncut FROM context_counts"
            f" WHERE log_id = {_LOG} AND key = ? ORDER BY position",
            (bank, log, key),
        )
        return contiguous_counts(found)

    def save_pin(self, bank: str, log: str, pin: StoredPin) -> None:
        with self._write() as conn:
            log_id = self._existing_log(conn, bank, log, lock=True)
            # A pin replaced keeps its place (`seq`) among the log's pins.
            self._run(
                conn,
                "INSERT INTO context_pins (log_id, name, seq, mode, level, start_position,"
                " end_position, document, created_at) VALUES (?, ?,"
                " (SELECT coalesce(max(seq), 0) + 1 FROM context_pins WHERE log_id = ?),"
                " ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (log_id, name) DO UPDATE SET mode = excluded.mode,"
                " level = excluded.level, start_position = excluded.start_position,"
                " end_position = excluded.end_position, document = excluded.document,"
                " created_at = excluded.created_at",
                (
                    log_id, pin.name, log_id, pin.mode, pin.level, pin.start, pin.end,
                    pin.document, self.dialect.now(),
                ),
            )  # fmt: skip

    def delete_pin(self, bank: str, log: str, name: str) -> bool:
        with self._write() as conn:
            cur = self._run(
                conn,
                f"DELETE FROM context_pins WHERE log_id = {_LOG} AND name = ?",
                (bank, log, name),
            )
            return int(cur.rowcount) > 0

    def load_pins(self, bank: str, log: str) -> list[StoredPin]:
        found = self._all(
            f"SELECT {PIN} FROM context_pins p WHERE p.log_id = {_LOG} ORDER BY p.seq",
            (bank, log),
        )
        return [rows.pin(r) for r in found]
