"""Move a bank as JSON Lines: `lamina export` and `lamina import`.

One object a line, each with a `type`: `lamina-export` (format version and bank name) first,
then per document a `document` (metadata, tags, source, cursor, retained record ids) followed by
its `memory` lines, then per context log a `log` (id, created and updated times) followed by
its `log_message`, `summary`, `frontier` and `pin` lines. Vectors are included as base64
float32 with the embedder's name, or left out (`--no-embeddings`), in which case import stores
the memories without vectors and they are embedded again (`lamina reindex`). Importing is
idempotent: records, memories, log messages and summaries merge by id.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from ..errors import InputError
from ..messages import message_from_json, message_to_json
from ..private import hide_private, strip_private
from ..store.base import RetainBatch, Store, StoredPin, StoredSummary
from .entities import extract_entities
from .model import Cursor, Memory
from .redact import Redactor, redact_message

__all__ = ["FORMAT_VERSION", "export_bank", "import_bank"]

FORMAT_VERSION = 1


def _memory_json(memory: Memory, with_embeddings: bool, redactor: Redactor) -> dict[str, Any]:
    # Redacted again: a bank retained before redaction covered a secret may still hold it, in
    # its text and in the entities found there; so may a private span kept before they were
    # left out (lamina.private).
    text, found = redactor.redact(strip_private(memory.text)[0])
    entities = [redactor.redact(e)[0] for e in memory.entities] if found else memory.entities
    data: dict[str, Any] = {
        "type": "memory",
        "id": memory.id,
        "document": memory.document,
        "kind": memory.kind,
        "text": text,
        "record_ids": list(memory.record_ids),
        "occurred_at": memory.occurred_at.isoformat() if memory.occurred_at else None,
        "said_at": memory.said_at.isoformat() if memory.said_at else None,
        "speakers": list(memory.speakers),
        "entities": list(entities),
        "tags": list(memory.tags),
        "content_hash": memory.content_hash,
        "first_line": memory.first_line,
        "last_line": memory.last_line,
    }
    if with_embeddings and memory.embedding is not None:
        data["embedding"] = base64.b64encode(memory.embedding.astype(np.float32).tobytes()).decode()
        data["embedder"] = memory.embedder
    return data


def export_bank(store: Store, bank: str, *, with_embeddings: bool = True) -> Iterator[bytes]:
    """The bank as JSON lines (bytes, newline-terminated)."""
    if store.get_bank(bank) is None:
        raise InputError(f"no bank named {bank!r}")
    yield orjson.dumps({"type": "lamina-export", "version": FORMAT_VERSION, "bank": bank}) + b"\n"
    redactor = Redactor()
    by_document: dict[str, list[Memory]] = {}
    for row in store.iter_memories(bank, with_embeddings=with_embeddings):
        by_document.setdefault(row.memory.document, []).append(row.memory)
    for document in store.list_documents(bank):
        cursor = store.get_cursor(bank, document.id)
        records = store.record_ids(bank, document.id)
        yield (
            orjson.dumps(
                {
                    "type": "document",
                    "id": document.id,
                    "metadata": dict(document.metadata),
                    "tags": list(document.tags),
                    "source": document.source,
                    "format": document.format,
                    "cursor": asdict(cursor),
                    "records": records,
                }
            )
            + b"\n"
        )
        for memory in by_document.get(document.id, []):
            yield orjson.dumps(_memory_json(memory, with_embeddings, redactor)) + b"\n"
    yield from _export_logs(store, bank)


def _export_logs(store: Store, bank: str) -> Iterator[bytes]:
    """The bank's context logs; messages redacted again, for logs kept before redaction."""
    redactor = Redactor()
    for info in store.list_logs(bank):
        log = info.id
        head = {"type": "log", "id": log, "created_at": info.created_at.isoformat(),
                "updated_at": info.updated_at.isoformat()}  # fmt: skip
        yield orjson.dumps(head) + b"\n"
        for message in store.read_log(bank, log):
            # A message that was all private stays as an empty one: pins and frontiers count
            # positions.
            public = hide_private(message) or replace(message, blocks=(), records=())
            clean = redact_message(public, redactor)[0]
            line = {"type": "log_message", "log": log, "message": message_to_json(clean)}
            yield orjson.dumps(line) + b"\n"
        for summary in store.load_summaries(bank, log):
            data = {**asdict(summary), "text": redactor.redact(summary.text)[0]}
            yield orjson.dumps({"type": "summary", "log": log, **data}) + b"\n"
        frontier = store.load_frontier(bank, log)
        if frontier is not None:
            yield orjson.dumps({"type": "frontier", "log": log, "frontier": frontier}) + b"\n"
        for pin in store.load_pins(bank, log):
            yield orjson.dumps({"type": "pin", "log": log, **asdict(pin)}) + b"\n"


def _dt(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _memory(bank: str, data: Mapping[str, Any]) -> Memory:
    embedding = None
    if isinstance(data.get("embedding"), str):
        embedding = np.frombuffer(base64.b64decode(data["embedding"]), dtype=np.float32)
    return Memory(
        id=str(data["id"]),
        bank=bank,
        document=str(data["document"]),
        kind=str(data.get("kind", "turn")),
        text=str(data["text"]),
        record_ids=tuple(data.get("record_ids") or ()),
        occurred_at=_dt(data.get("occurred_at")),
        said_at=_dt(data.get("said_at")),
        speakers=tuple(data.get("speakers") or ()),
        entities=(
            tuple(data["entities"])
            if isinstance(data.get("entities"), list)
            else extract_entities(str(data["text"]), data.get("speakers") or ())
        ),
        tags=tuple(data.get("tags") or ()),
        content_hash=str(data.get("content_hash", "")),
        embedding=embedding,
        embedder=data.get("embedder") if embedding is not None else None,
        first_line=data.get("first_line"),
        last_line=data.get("last_line"),
    )


def import_bank(
    store: Store, lines: Iterable[bytes], *, bank: str | None = None, source: str = "<input>"
) -> dict[str, int]:
    """Load an export into a bank (its own name unless `bank` is given)."""
    target: str | None = bank
    pending: dict[str, Any] | None = None
    memories: list[Memory] = []
    counts = {"documents": 0, "memories": 0, "records": 0, "logs": 0}

    def flush() -> None:
        nonlocal pending, memories
        if pending is None:
            return
        assert target is not None
        cursor_data = pending.get("cursor") or {}
        current = store.get_cursor(target, pending["id"])
        cursor = Cursor(**{k: v for k, v in cursor_data.items() if k != "version"})
        outcome = store.apply_retain(
            RetainBatch(
                bank=target,
                document=str(pending["id"]),
                expected_version=current.version,
                cursor=cursor,
                records=[str(r) for r in pending.get("records") or ()],
                memories=memories,
                metadata=pending.get("metadata") or {},
                tags=pending.get("tags") or [],
                source=pending.get("source"),
                format=pending.get("format"),
            )
        )
        counts["documents"] += 1
        counts["memories"] += len(memories)
        counts["records"] += outcome.new_records
        pending, memories = None, []

    log: dict[str, Any] | None = None
    log_lines: list[dict[str, Any]] = []

    def flush_log() -> None:
        nonlocal log, log_lines
        if log is None:
            return
        assert target is not None
        name = str(log["id"])
        try:
            messages = [message_from_json(d["message"]) for d in log_lines
                        if d["type"] == "log_message"]  # fmt: skip
            store.append_log_messages(target, name, messages)
            for d in log_lines:
                fields = {k: v for k, v in d.items() if k not in ("type", "log")}
                if d["type"] == "summary":
                    fields["children"] = tuple(fields.get("children") or ())
                    store.save_summary(target, name, StoredSummary(**fields))
                elif d["type"] == "frontier":
                    store.save_frontier(target, name, fields["frontier"])
                elif d["type"] == "pin":
                    store.save_pin(target, name, StoredPin(**fields))
            created, updated = _dt(log.get("created_at")), _dt(log.get("updated_at"))
            if created is not None and updated is not None:
                store.set_log_times(target, name, created, updated)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source}: bad context log {name!r} ({exc})") from None
        counts["logs"] += 1
        log, log_lines = None, []

    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InputError(f"{source}:{number}: not a JSON line") from None
        kind = data.get("type") if isinstance(data, dict) else None
        if number == 1:
            if kind != "lamina-export":
                raise InputError(f"{source}:1: not a Lamina export (no lamina-export header)")
            if data.get("version") != FORMAT_VERSION:
                raise InputError(f"{source}:1: export format {data.get('version')} not supported")
            target = target or str(data["bank"])
            store.ensure_bank(target)
        elif kind == "document":
            flush()
            flush_log()
            pending = data
        elif kind == "log":
            flush()
            flush_log()
            log = data
        elif kind in ("log_message", "summary", "frontier", "pin"):
            if log is None or data.get("log") != log["id"]:
                raise InputError(f"{source}:{number}: {kind} outside its log")
            log_lines.append(data)
        elif kind == "memory":
            if pending is None or data.get("document") != pending["id"]:
                raise InputError(f"{source}:{number}: memory outside its document")
            try:
                memories.append(_memory(target or "", data))
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{source}:{number}: bad memory ({exc})") from None
        else:
            raise InputError(f"{source}:{number}: unknown line type {kind!r}")
    flush()
    flush_log()
    return counts
