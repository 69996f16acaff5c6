"""Memories and the corrections marked on them, written once for both databases (see
lamina.store.dialect). Every change to a bank's memories is counted in its generation, so
readers holding an index of the bank know when to extend it and when to rebuild it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import StoreError
from ..memories import Correction, Memory
from .base import MemoryFilter, MemoryPage, MemoryRow
from .dialect import SQLBase
from .paging import page_seqs
from .rows import CORRECTION, MEMORY_COLUMNS, correction, stored_memory

__all__ = ["SQLMemories"]


class SQLMemories(SQLBase):
    """The memories and corrections part of `Store` (lamina.store.base.BankStore)."""

    _MEMORY_COLUMNS = MEMORY_COLUMNS

    def _embedded(self, bank: str, vectors: Mapping[str, Any]) -> None:
        """After vectors were set: what the engine keeps beside them (indexes)."""

    def _memories_where(
        self, bank: str, column: str, values: list[Any], with_embeddings: bool = True
    ) -> list[tuple[int, Memory]]:
        """(seq, memory) of the bank's memories whose `column` (`m.id` or `m.seq`) is one of
        `values`."""
        if not values:
            return []
        d = self.dialect
        embedding = "m.embedding" if with_embeddings else d.null_vector
        # By id through the bank's (bank_id, id) key; by seq through the primary key, the
        # bank checked after (`+` keeps the planner from scanning the bank for them).
        bank_id = "(SELECT id FROM banks WHERE name = ?)"
        where = (
            f"m.bank_id = {bank_id} AND {d.any_of(column)}"
            if column == "m.id"
            else f"{d.any_of(column)} AND +m.bank_id = {bank_id}"
        )
        params = (bank, d.list_in(values)) if column == "m.id" else (d.list_in(values), bank)
        with self._read() as conn:
            rows = d.execute(
                conn,
                f"SELECT {MEMORY_COLUMNS}, {embedding} FROM memories m"
                f" JOIN documents d ON d.id = m.document_id WHERE {where}",
                params,
                binary=True,
            ).fetchall()
        return [stored_memory(bank, row, d) for row in rows]

    def get_memories(self, bank: str, ids: Sequence[str]) -> list[Memory]:
        found = {m.id: m for _seq, m in self._memories_where(bank, "m.id", list(ids))}
        return [found[i] for i in ids if i in found]

    def delete_memory(self, bank: str, memory_id: str) -> bool:
        return self._forget(bank, "id = ?", (memory_id,)) > 0

    def forget_before(self, bank: str, before: datetime) -> int:
        # A memory without a time has a NULL `t`, which no comparison selects: it stays.
        return self._forget(bank, "t < ?", (self.dialect.bound_in(before),))

    def _forget(self, bank: str, condition: str, params: Sequence[Any]) -> int:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank, lock=True)
            if bank_id is None:
                return 0
            gone = self._delete_memories(conn, bank_id, condition, params)
            if gone:
                self._bump(conn, bank_id, deleted=True)
        return gone

    def iter_memories(
        self, bank: str, *, after_seq: int = 0, with_embeddings: bool = True
    ) -> Iterator[MemoryRow]:
        d = self.dialect
        embedding = "m.embedding" if with_embeddings else d.null_vector
        rows = self._stream(
            f"SELECT {MEMORY_COLUMNS}, {embedding} FROM memories m"
            " JOIN documents d ON d.id = m.document_id"
            " WHERE m.bank_id = (SELECT id FROM banks WHERE name = ?) AND m.seq > ?"
            " ORDER BY m.seq",
            (bank, after_seq),
        )
        for row in rows:
            yield MemoryRow(*stored_memory(bank, row, d))

    def page_memories(
        self,
        bank: str,
        where: MemoryFilter,
        limit: int,
        offset: int = 0,
        *,
        oldest_first: bool = False,
        count_kinds: bool = True,
    ) -> MemoryPage:
        d = self.dialect
        with self._read() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None:
                return MemoryPage([], 0, {})
            seqs, total, kinds = page_seqs(
                lambda sql, params: d.execute(conn, sql, params), bank_id, where, limit,
                offset, d, oldest_first=oldest_first, count_kinds=count_kinds,
            )  # fmt: skip
        found = dict(self._memories_where(bank, "m.seq", seqs, with_embeddings=False))
        return MemoryPage([found[s] for s in seqs if s in found], total, kinds)

    def set_embeddings(
        self,
        bank: str,
        vectors: Mapping[str, Any],
        embedder: str,
        *,
        hashes: Mapping[str, str] | None = None,
    ) -> int:
        d = self.dialect
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank, lock=True)
            if bank_id is None:
                return 0
            sql = "UPDATE memories SET embedding = ?, embedder = ? WHERE bank_id = ? AND id = ?"
            rows: list[tuple[Any, ...]]
            if hashes is None:
                rows = [(d.vector_in(v), embedder, bank_id, mid) for mid, v in vectors.items()]
                # Vectors changed in place: readers must rebuild their index.
                in_place = True
            else:
                # Vectors for memories committed without: only where still missing and the
                # content is the one they were made from.
                sql += " AND content_hash = ? AND embedding IS NULL"
                rows = [
                    (d.vector_in(v), embedder, bank_id, mid, hashes.get(mid, ""))
                    for mid, v in vectors.items()
                ]
                in_place = self._behind(conn, bank_id, list(vectors), embedder)
            changed = d.executemany(conn, sql, rows)
            self._bump(conn, bank_id, deleted=in_place, vectors=in_place)
        self._embedded(bank, vectors)
        return changed

    def _behind(self, conn: Any, bank_id: int, ids: list[str], embedder: str) -> bool:
        """Whether a vector of `embedder` was stored after (by seq) one of these memories:
        readers that extend their index by seq may have passed them, so their vectors count
        as changed in place (a rebuild). Otherwise a reader picks them up as new."""
        d = self.dialect
        if not ids:
            return False
        first = d.execute(
            conn,
            f"SELECT min(seq) FROM memories WHERE bank_id = ? AND {d.any_of('id')}",
            (bank_id, d.list_in(ids)),
        ).fetchone()
        if first is None or first[0] is None:
            return False
        later = d.execute(
            conn,
            "SELECT 1 FROM memories WHERE bank_id = ? AND seq > ? AND embedder = ? LIMIT 1",
            (bank_id, int(first[0]), embedder),
        ).fetchone()
        return later is not None

    # -- corrections: a user's marks on memories, kept by memory id ---------------------------
    def save_correction(self, bank: str, correction: Correction) -> None:
        d = self.dialect
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank)
            if bank_id is None:
                raise StoreError(f"no bank {bank!r}")
            self._run(
                conn,
                "INSERT INTO corrections (bank_id, memory_id, state, replacement, note,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (bank_id, memory_id) DO UPDATE SET state = excluded.state,"
                " replacement = excluded.replacement, note = excluded.note,"
                " created_at = excluded.created_at",
                (
                    bank_id, correction.memory, correction.state, correction.replacement,
                    correction.note, d.time_in(correction.at or datetime.now(UTC)),
                ),
            )  # fmt: skip

    def delete_correction(self, bank: str, memory_id: str) -> bool:
        with self._write() as conn:
            cur = self._run(
                conn,
                "DELETE FROM corrections WHERE memory_id = ?"
                " AND bank_id = (SELECT id FROM banks WHERE name = ?)",
                (memory_id, bank),
            )
            return int(cur.rowcount) > 0

    def load_corrections(
        self, bank: str, ids: Sequence[str] | None = None
    ) -> dict[str, Correction]:
        d = self.dialect
        sql = (
            f"SELECT {CORRECTION} FROM corrections c JOIN banks b ON b.id = c.bank_id"
            " WHERE b.name = ?"
        )
        params: list[Any] = [bank]
        if ids is not None:
            if not ids:
                return {}
            sql += f" AND {d.any_of('c.memory_id')}"
            params.append(d.list_in(list(ids)))
        rows = self._all(sql + " ORDER BY c.created_at, c.memory_id", params)
        marks = (correction(r, d) for r in rows)
        return {mark.memory: mark for mark in marks}
