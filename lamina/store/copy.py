"""Copy banks between stores (SQLite <-> PostgreSQL): `lamina copy --from A --to B`.

Everything a bank holds moves: documents with their metadata, tags, source and cursor, the ids
of the records retained, memories with their vectors and embedder names; and API keys (by
name, hashes as stored, so the keys people hold keep working).

One document is one transaction on the target, so a copy that is interrupted leaves whole
documents behind, never half of one. Running it again skips the documents whose cursor and
record count already match, so a copy is resumable, and repeating a finished copy changes
nothing. A target document that differs is replaced by the source's (its stray memories
deleted), so the target ends up equal to the source for every bank copied.

Context logs move too: the messages the target's log does not hold yet are appended (in order,
after checking that what it holds is the start of the source's log), the summaries it does not
hold are written (in the order they were written), and the last frontier and the pins are set
to the source's. A log is append-only, so one that went another way in the target is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from .._fields import field_dict
from ..errors import InputError, StoreError
from ..memories import Cursor, Document, Memory
from .base import RetainBatch, Store

__all__ = ["CopyReport", "copy_banks"]


@dataclass
class BankCopy:
    bank: str
    documents: int = 0
    copied: int = 0
    skipped: int = 0
    memories: int = 0
    records: int = 0
    logs: int = 0
    log_messages: int = 0
    """Messages appended to the target's logs."""
    summaries: int = 0
    """Summaries written to the target's logs."""
    pins: int = 0
    """Pins set on the target's logs."""
    index_builds: list[dict[str, Any]] = field(default_factory=list)
    """The vector indexes the target built after the load, and the memory each was given."""

    def as_dict(self) -> dict[str, Any]:
        return {
            **field_dict(self, leave_out=("log_messages", "summaries", "pins")),
            "logs": {
                "logs": self.logs,
                "messages": self.log_messages,
                "summaries": self.summaries,
                "pins": self.pins,
            },
        }


@dataclass
class CopyReport:
    banks: list[BankCopy] = field(default_factory=list)
    api_keys_copied: int = 0
    api_keys_skipped: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "banks": [b.as_dict() for b in self.banks],
            "api_keys": {"copied": self.api_keys_copied, "skipped": self.api_keys_skipped},
        }


def _same_position(a: Cursor, b: Cursor) -> bool:
    """The same retained prefix (versions count retains, which differ between stores)."""
    return replace(a, version=0) == replace(b, version=0)


Progress = Callable[[str, int, int], None]
"""Told (bank, documents done, documents in the bank)."""
Note = Callable[[str, str], None]
"""Told (bank, what the target does next), for steps that take a while."""


def copy_banks(
    source: Store,
    target: Store,
    banks: Sequence[str] | None = None,
    *,
    api_keys: bool = True,
    progress: Progress | None = None,
    note: Note | None = None,
) -> CopyReport:
    """Copy `banks` (all when None) from `source` to `target`; see the module's doc."""
    report = CopyReport()
    available = [b.name for b in source.list_banks()]
    wanted = list(banks) if banks else available
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise InputError(f"no bank named {missing[0]!r} in the source")
    for bank in wanted:
        report.banks.append(_copy_bank(source, target, bank, progress, note))
    if api_keys:
        existing = target.api_key_hashes()
        hashes = source.api_key_hashes()
        for name, scope, _created in source.list_api_keys():
            if name in existing:
                if existing[name] != hashes[name]:
                    raise StoreError(
                        f"API key {name!r} exists in the target with a different secret;"
                        " delete one of them first"
                    )
                report.api_keys_skipped += 1
                continue
            target.create_api_key(name, hashes[name], scope)
            report.api_keys_copied += 1
    return report


def _copy_bank(
    source: Store, target: Store, bank: str, progress: Progress | None, note: Note | None
) -> BankCopy:
    result = BankCopy(bank)
    target.ensure_bank(bank)
    documents = source.list_documents(bank)
    result.documents = len(documents)
    # One pass over the bank's memories, grouped by document, in storage order.
    by_document: dict[str, list[Memory]] = {}
    for row in source.iter_memories(bank):
        by_document.setdefault(row.memory.document, []).append(row.memory)
    # What the target already holds: memory id -> content hash, per document.
    held: dict[str, dict[str, str]] = {}
    for row in target.iter_memories(bank, with_embeddings=False):
        held.setdefault(row.memory.document, {})[row.memory.id] = row.memory.content_hash

    # A store that loads faster in bulk (PostgreSQL: HNSW built once, after) says so, and
    # tells the memory it gives each index build.
    def built(plan: Any) -> None:
        result.index_builds.append(plan.as_dict())
        if note is not None:
            note(bank, plan.describe())

    bulk = getattr(target, "bulk_load", None)
    with bulk(bank, told=built) if bulk is not None else nullcontext():
        _copy_documents(source, target, bank, documents, by_document, held, result, progress)
    for log in source.list_logs(bank):
        _copy_log(source, target, bank, log.id, result)
    return result


def _copy_documents(
    source: Store,
    target: Store,
    bank: str,
    documents: Sequence[Document],
    by_document: dict[str, list[Memory]],
    held: dict[str, dict[str, str]],
    result: BankCopy,
    progress: Progress | None,
) -> None:
    for done, document in enumerate(documents, 1):
        cursor = source.get_cursor(bank, document.id)
        memories = by_document.get(document.id, [])
        records = source.record_ids(bank, document.id)
        there = target.get_cursor(bank, document.id)
        mine = held.get(document.id, {})
        if (
            target.get_document(bank, document.id) is not None
            and _same_position(cursor, there)
            and target.count_records(bank, document.id) == len(records)
            and mine == {m.id: m.content_hash for m in memories}
        ):
            result.skipped += 1
        else:
            keep = {m.id for m in memories}
            stray = [memory_id for memory_id in mine if memory_id not in keep]
            outcome = target.apply_retain(
                RetainBatch(
                    bank=bank,
                    document=document.id,
                    expected_version=there.version,
                    cursor=cursor,
                    records=records,
                    memories=memories,
                    delete_memories=stray,
                    metadata=dict(document.metadata),
                    tags=list(document.tags),
                    source=document.source,
                    format=document.format,
                )
            )
            if not outcome.committed:
                raise StoreError(
                    f"{bank}/{document.id}: the target changed during the copy; run it again"
                )
            result.copied += 1
            result.records += outcome.new_records
            result.memories += len(memories)
        if progress is not None:
            progress(bank, done, len(documents))


def _copy_log(source: Store, target: Store, bank: str, log: str, result: BankCopy) -> None:
    result.logs += 1
    messages = source.read_log(bank, log)
    held = [m.id for m in target.read_log(bank, log)]
    if held != [m.id for m in messages[: len(held)]]:
        raise StoreError(
            f"{bank}/{log}: the target's context log differs from the source's; delete one of"
            " them first"
        )
    result.log_messages += target.append_log_messages(bank, log, messages[len(held) :])
    written = {s.id for s in target.load_summaries(bank, log)}
    for summary in source.load_summaries(bank, log):
        if summary.id not in written:
            result.summaries += int(target.save_summary(bank, log, summary))
    frontier = source.load_frontier(bank, log)
    if frontier is not None and frontier != target.load_frontier(bank, log):
        target.save_frontier(bank, log, frontier)
    pins = source.load_pins(bank, log)
    if pins != target.load_pins(bank, log):
        for name in {p.name for p in target.load_pins(bank, log)} - {p.name for p in pins}:
            target.delete_pin(bank, log, name)
        for pin in pins:
            target.save_pin(bank, log, pin)
        result.pins += len(pins)
    info = next((i for i in source.list_logs(bank) if i.id == log), None)
    if info is not None:  # the copy keeps when the log was made and last changed
        target.set_log_times(bank, log, info.created_at, info.updated_at)
