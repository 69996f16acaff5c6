"""Banks, documents and retain, written once for both databases (see lamina.store.dialect).

A retain is one transaction: the bank is created if needed and locked, the document's cursor
version is compared with the batch's (compare and swap: a batch computed from a cursor that
moved commits nothing), the document and its records are written, then the engine writes the
memories with their search postings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..memories import Bank, BankStats, Cursor, Document, Memory
from . import rows
from .base import RetainBatch, RetainOutcome
from .dialect import SQLBase
from .rows import BANK, DOCUMENT, DocumentRow

__all__ = ["SQLDocuments"]


class SQLDocuments(SQLBase):
    """The banks and documents part of `Store` (lamina.store.base.BankStore)."""

    # -- engine parts ----------------------------------------------------------------------
    def _write_memories(
        self, conn: Any, bank_id: int, doc_id: int, memories: Sequence[Memory], now: Any
    ) -> tuple[int, set[str]]:
        """Insert memories (replacing those with the same id) with their search postings;
        (how many were replaced, the terms written)."""
        raise NotImplementedError

    def _retained(self, bank: str, bank_id: int, batch: RetainBatch, terms: set[str]) -> None:
        """After a retain committed: bring the search structures up to date."""

    def _drop_bank(self, conn: Any, bank_id: int) -> None:
        """While a bank is deleted: remove what the engine keeps of it beside its rows."""

    # -- banks -----------------------------------------------------------------------------
    def ensure_bank(self, name: str) -> Bank:
        existing = self.get_bank(name)
        if existing is not None:
            return existing
        with self._write() as conn:
            self._new_bank_id(conn, name)
        made = self.get_bank(name)
        assert made is not None
        return made

    def get_bank(self, name: str) -> Bank | None:
        row = self._one(f"SELECT {BANK} FROM banks b WHERE b.name = ?", (name,))
        return None if row is None else rows.bank(row, self.dialect)

    def list_banks(self) -> list[Bank]:
        found = self._all(f"SELECT {BANK} FROM banks b ORDER BY b.name")
        return [rows.bank(r, self.dialect) for r in found]

    def delete_bank(self, name: str) -> bool:
        with self._write() as conn:
            bank_id = self._bank_id(conn, name)
            if bank_id is None:
                return False
            self._run(conn, "DELETE FROM banks WHERE id = ?", (bank_id,))
            self._drop_bank(conn, bank_id)
        return True

    def bank_stats(self, name: str) -> BankStats:
        """Read from counters kept at every write and two index probes: the same cost at a
        million memories as at a thousand."""
        d = self.dialect
        with self._read() as conn:
            row = d.execute(
                conn,
                "SELECT id, live_memories, embedded, records FROM banks WHERE name = ?",
                (name,),
            ).fetchone()
            if row is None:
                return BankStats(name, 0, 0, 0, 0, {}, None, None)
            bank_id, memories, embedded, records = (int(v) for v in row)
            documents, first, last = d.execute(
                conn,
                "SELECT (SELECT count(*) FROM documents WHERE bank_id = ?),"
                " (SELECT min(t) FROM memories WHERE bank_id = ? AND t IS NOT NULL),"
                " (SELECT max(t) FROM memories WHERE bank_id = ? AND t IS NOT NULL)",
                (bank_id, bank_id, bank_id),
            ).fetchone()
            embedders = self._embedders(conn, bank_id)
        return BankStats(
            name,
            int(documents),
            memories,
            records,
            embedded,
            embedders,
            None if first is None else d.time_out(first),
            None if last is None else d.time_out(last),
        )

    def bank_embedders(self, name: str) -> dict[str, int]:
        with self._read() as conn:
            bank_id = self._bank_id(conn, name)
            return {} if bank_id is None else self._embedders(conn, bank_id)

    def _embedders(self, conn: Any, bank_id: int) -> dict[str, int]:
        counted = self._run(
            conn,
            "SELECT embedder, memories FROM bank_embedders WHERE bank_id = ? AND memories > 0"
            " ORDER BY embedder",
            (bank_id,),
        )
        return {str(e): int(n) for e, n in counted}

    def generation(self, bank: str) -> tuple[int, int]:
        row = self._one("SELECT generation, deletions FROM banks WHERE name = ?", (bank,))
        if row is None:
            return (-1, -1)
        changes, deletions = row
        return int(changes), int(deletions)

    # -- documents -------------------------------------------------------------------------
    def _document_row(self, conn: Any, bank: str, name: str) -> DocumentRow | None:
        row = self._run(
            conn,
            f"SELECT {DOCUMENT} FROM documents d JOIN banks b ON b.id = d.bank_id"
            " WHERE b.name = ? AND d.name = ?",
            (bank, name),
        ).fetchone()
        return None if row is None else DocumentRow._make(row)

    def get_document(self, bank: str, document: str) -> Document | None:
        with self._read() as conn:
            row = self._document_row(conn, bank, document)
        return None if row is None else rows.document(bank, row, self.dialect)

    def list_documents(self, bank: str) -> list[Document]:
        found = self._all(
            f"SELECT {DOCUMENT} FROM documents d JOIN banks b ON b.id = d.bank_id"
            " WHERE b.name = ? ORDER BY d.updated_at, d.name",
            (bank,),
        )
        return [rows.document(bank, DocumentRow._make(r), self.dialect) for r in found]

    def get_cursor(self, bank: str, document: str) -> Cursor:
        with self._read() as conn:
            row = self._document_row(conn, bank, document)
        return Cursor() if row is None else rows.cursor(row)

    def delete_document(self, bank: str, document: str) -> int:
        with self._write() as conn:
            bank_id = self._bank_id(conn, bank, lock=True)
            row = self._document_row(conn, bank, document)
            if bank_id is None or row is None:
                return 0
            removed = self._delete_memories(conn, bank_id, "document_id = ?", (row.id,))
            # Records before their document: the trigger counting them finds the bank
            # through it.
            self._run(conn, "DELETE FROM records WHERE document_id = ?", (row.id,))
            self._run(conn, "DELETE FROM documents WHERE id = ?", (row.id,))
            self._bump(conn, bank_id, deleted=True)
        return removed

    def content_hashes(self, bank: str, ids: Iterable[str]) -> dict[str, str]:
        wanted = list(ids)
        if not wanted:
            return {}
        d = self.dialect
        found = self._all(
            "SELECT id, content_hash FROM memories"
            f" WHERE bank_id = (SELECT id FROM banks WHERE name = ?) AND {d.any_of('id')}",
            (bank, d.list_in(wanted)),
        )
        return {str(i): str(h) for i, h in found}

    def count_records(self, bank: str, document: str | None = None) -> int:
        query = (
            "SELECT count(*) FROM records r JOIN documents d ON d.id = r.document_id"
            " JOIN banks b ON b.id = d.bank_id WHERE b.name = ?"
        )
        args: tuple[str, ...] = (bank,)
        if document is not None:
            query += " AND d.name = ?"
            args = (bank, document)
        return int(self._one(query, args)[0])

    def record_ids(self, bank: str, document: str) -> list[str]:
        found = self._all(
            "SELECT r.record_id FROM records r JOIN documents d ON d.id = r.document_id"
            " JOIN banks b ON b.id = d.bank_id WHERE b.name = ? AND d.name = ?",
            (bank, document),
        )
        return sorted(str(r[0]) for r in found)  # by code point, whatever the collation

    # -- retain ----------------------------------------------------------------------------
    def apply_retain(self, batch: RetainBatch) -> RetainOutcome:
        d = self.dialect
        now = d.now()
        with self._write() as conn:
            bank_id = self._new_bank_id(conn, batch.bank)
            row = self._document_row(conn, batch.bank, batch.document)
            version = int(row.cursor_version) if row is not None else 0
            if version != batch.expected_version:
                return RetainOutcome(committed=False)
            doc_id = self._save_document(conn, bank_id, batch, row, now)
            new_records = d.insert_new(
                conn,
                "records",
                (("document_id", "bigint"), ("record_id", "text")),
                [(doc_id, r) for r in dict.fromkeys(batch.records)],
            )
            deleted = 0
            if batch.delete_memories:
                gone = d.list_in(list(batch.delete_memories))
                deleted = self._delete_memories(conn, bank_id, d.any_of("id"), (gone,))
            replaced, terms = 0, set[str]()
            if batch.memories:
                replaced, terms = self._write_memories(conn, bank_id, doc_id, batch.memories, now)
            if batch.memories or deleted:
                self._bump(conn, bank_id, deleted=bool(deleted))
        self._retained(batch.bank, bank_id, batch, terms)
        inserted = len(batch.memories)
        return RetainOutcome(True, new_records, inserted - replaced, replaced, deleted)

    def _save_document(
        self, conn: Any, bank_id: int, batch: RetainBatch, row: DocumentRow | None, now: Any
    ) -> int:
        """Write the document's row with the batch's cursor at the next version; its id."""
        d = self.dialect
        c = batch.cursor
        version = (row.cursor_version if row is not None else 0) + 1
        place = (c.offset, c.open_offset, c.records, c.fingerprint, c.size, version, c.open_line)
        if row is None:
            return d.insert_id(
                conn,
                "INSERT INTO documents (bank_id, name, created_at, updated_at, metadata, tags,"
                " source, format, cursor_offset, cursor_open_offset, cursor_records,"
                " cursor_fingerprint, cursor_size, cursor_version, cursor_open_line)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    bank_id, batch.document, now, now, d.json_in(batch.metadata or {}),
                    d.array_in(list(batch.tags or ())), batch.source, batch.format, *place,
                ),
            )  # fmt: skip
        metadata = dict(d.json_out(row.metadata))
        if batch.metadata:
            metadata.update(batch.metadata)
        tags = list(dict.fromkeys([*d.array_out(row.tags), *(batch.tags or ())]))
        self._run(
            conn,
            "UPDATE documents SET updated_at = ?, metadata = ?, tags = ?,"
            " source = coalesce(?, source), format = coalesce(?, format), cursor_offset = ?,"
            " cursor_open_offset = ?, cursor_records = ?, cursor_fingerprint = ?,"
            " cursor_size = ?, cursor_version = ?, cursor_open_line = ? WHERE id = ?",
            (
                now,
                d.json_in(metadata),
                d.array_in(tags),
                batch.source,
                batch.format,
                *place,
                row.id,
            ),
        )
        return int(row.id)
