"""Move a bank as JSON Lines: `lamina export` and `lamina import`.

One object a line, each with a `type`: `lamina-export` (format version and bank name) first,
then per document a `document` (metadata, tags, source, cursor, retained record ids) followed by
its `memory` lines, then per context log a `log` (id, created and updated times) followed by
its `log_message`, `summary`, `frontier` and `pin` lines, then a `correction` line per memory
marked wrong or superseded (lamina.bank.corrections). Vectors are included as base64
float32 with the embedder's name, or left out (`--no-embeddings`), in which case import stores
the memories without vectors and they are embedded again (`lamina reindex`). Importing is
idempotent: records, memories, log messages and summaries merge by id.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from ..errors import InputError
from ..memories import CORRECTION_STATES, Correction, Cursor, Memory
from ..messages import Message, message_from_json, message_to_json
from ..private import hide_private, strip_private
from ..store.base import RetainBatch, Store, StoredPin, StoredSummary
from ..store.lookup import check_bank_name
from ..text.entities import extract_entities
from ..text.redact import Redactor, redact_json, redact_message

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
    for mark in store.load_corrections(bank).values():
        data = {"type": "correction", **mark.as_dict(), "note": redactor.redact(mark.note)[0]}
        yield orjson.dumps(data) + b"\n"


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


_MAX_NORM = 1.001
"""Vectors are unit length (or zero) as every embedder writes them; float32 rounding aside."""


def _dt(value: Any, what: str) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a date")
    return datetime.fromisoformat(value)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} is not a list of strings")
    return tuple(value)


def _text(data: Mapping[str, Any], key: str, *, empty: bool = False) -> str:
    value = data.get(key)
    if not isinstance(value, str) or (not empty and not value) or "\0" in value:
        raise ValueError(f"{key} is not a {'' if empty else 'non-empty '}string")
    return value


def _line(value: Any, what: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{what} is not a line number")
    return value


def _vector(data: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any] | None, str | None]:
    """The memory's vector and embedder, checked: finite, unit length at most."""
    encoded = data.get("embedding")
    if encoded is None:
        return None, None
    if not isinstance(encoded, str):
        raise ValueError("embedding is not base64 text")
    raw = base64.b64decode(encoded, validate=True)
    if not raw or len(raw) % 4:
        raise ValueError("embedding is not a list of float32")
    vector = np.frombuffer(raw, dtype=np.float32)
    if (
        not np.isfinite(vector).all()
        or float(np.linalg.norm(vector.astype(np.float64))) > _MAX_NORM
    ):
        raise ValueError("embedding is not a finite vector of unit length")
    return vector, _text(data, "embedder")


def _memory(bank: str, data: Mapping[str, Any]) -> Memory:
    embedding, embedder = _vector(data)
    text = _text(data, "text", empty=True)
    speakers = _strings(data.get("speakers"), "speakers")
    return Memory(
        id=_text(data, "id"),
        bank=bank,
        document=_text(data, "document"),
        kind=_text(data, "kind") if "kind" in data else "turn",
        text=text,
        record_ids=_strings(data.get("record_ids"), "record_ids"),
        occurred_at=_dt(data.get("occurred_at"), "occurred_at"),
        said_at=_dt(data.get("said_at"), "said_at"),
        speakers=speakers,
        entities=(
            _strings(data["entities"], "entities")
            if data.get("entities") is not None
            else extract_entities(text, speakers)
        ),
        tags=_strings(data.get("tags"), "tags"),
        content_hash=str(data.get("content_hash", "")),
        embedding=embedding,
        embedder=embedder,
        first_line=_line(data.get("first_line"), "first_line"),
        last_line=_line(data.get("last_line"), "last_line"),
    )


@dataclass
class _Document:
    """A document line with its memories, checked."""

    data: dict[str, Any]
    cursor: Cursor
    records: list[str]
    memories: list[Memory] = field(default_factory=list)


@dataclass
class _Log:
    """A context log with its lines, checked."""

    name: str
    created: datetime | None
    updated: datetime | None
    messages: list[Message] = field(default_factory=list)
    summaries: list[StoredSummary] = field(default_factory=list)
    frontier: dict[str, Any] | None = None
    pins: list[StoredPin] = field(default_factory=list)


def _document(data: dict[str, Any]) -> _Document:
    _text(data, "id")
    cursor = data.get("cursor") or {}
    if not isinstance(cursor, dict) or not isinstance(data.get("metadata") or {}, dict):
        raise ValueError("cursor and metadata must be objects")
    _strings(data.get("tags"), "tags")
    for key in ("source", "format"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ValueError(f"{key} is not a string")
    return _Document(
        data,
        Cursor(**{k: v for k, v in cursor.items() if k != "version"}),
        list(_strings(data.get("records"), "records")),
    )


def _log_line(log: _Log, kind: str, data: Mapping[str, Any]) -> None:
    fields = {k: v for k, v in data.items() if k not in ("type", "log")}
    if kind == "log_message":
        log.messages.append(message_from_json(fields["message"]))
    elif kind == "summary":
        summary = StoredSummary(
            **{**fields, "children": _strings(fields.get("children"), "children")}
        )
        if not isinstance(summary.text, str):
            raise ValueError("summary text is not a string")
        log.summaries.append(summary)
    elif kind == "frontier":
        if not isinstance(fields.get("frontier"), dict):
            raise ValueError("frontier is not an object")
        log.frontier = fields["frontier"]
    else:
        log.pins.append(StoredPin(**fields))


def _correction(data: Mapping[str, Any]) -> Correction:
    state = _text(data, "state")
    if state not in CORRECTION_STATES:
        raise ValueError(f"state {state!r} is not one of {', '.join(CORRECTION_STATES)}")
    replacement = data.get("replacement")
    if replacement is not None and not isinstance(replacement, str):
        raise ValueError("replacement is not a string")
    if (state == "superseded") != bool(replacement):
        raise ValueError("a superseded memory, and only one, names its replacement")
    note = data.get("note") or ""
    if not isinstance(note, str):
        raise ValueError("note is not a string")
    return Correction(_text(data, "memory"), state, replacement, note, _dt(data.get("at"), "at"))


Item = _Document | _Log | Correction


def _items(lines: Iterable[bytes], source: str, bank: str | None) -> Iterator[str | Item]:
    """The export's bank name (first), then its documents and logs, each checked whole: a
    bad line raises InputError naming the line, before anything of its item is yielded."""
    current: Item | None = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InputError(f"{where}: not a JSON line") from None
        kind = data.get("type") if isinstance(data, dict) else None
        if number == 1:
            if kind != "lamina-export":
                raise InputError(f"{where}: not a Lamina export (no lamina-export header)")
            if data.get("version") != FORMAT_VERSION:
                raise InputError(f"{where}: export format {data.get('version')} not supported")
            name = bank or data.get("bank")
            if not isinstance(name, str):
                raise InputError(f"{where}: the export names no bank")
            try:
                yield check_bank_name(name)
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
            continue
        try:
            if kind in ("document", "log"):
                if current is not None:
                    yield current
                if kind == "document":
                    current = _document(data)
                else:
                    current = _Log(
                        _text(data, "id"),
                        _dt(data.get("created_at"), "created_at"),
                        _dt(data.get("updated_at"), "updated_at"),
                    )
            elif kind == "correction":
                if current is not None:
                    yield current
                current = None
                yield _correction(data)
            elif kind in ("log_message", "summary", "frontier", "pin"):
                if not isinstance(current, _Log) or data.get("log") != current.name:
                    raise InputError(f"{where}: {kind} outside its log")
                _log_line(current, kind, data)
            elif kind == "memory":
                if not isinstance(current, _Document) or data.get("document") != current.data["id"]:
                    raise InputError(f"{where}: memory outside its document")
                current.memories.append(_memory(bank or "", data))
            else:
                raise InputError(f"{where}: unknown line type {kind!r}")
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
            what = "field" if isinstance(exc, KeyError) else "value"
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(f"{where}: bad {kind} ({what}: {detail})") from None
    if current is not None:
        yield current


def _check(store: Store, lines: Iterable[bytes], source: str, bank: str | None) -> str:
    """Reads the whole export, checking every line, and returns the bank it goes into.
    Nothing is written: an import is all or nothing."""
    target = ""
    memory_ids: dict[str, str] = {}
    dims: dict[str, int] = {}
    for item in _items(lines, source, bank):
        if isinstance(item, str):
            target = item
        elif isinstance(item, _Document):
            for memory in item.memories:
                if memory.id in memory_ids:
                    raise InputError(f"{source}: memory {memory.id!r} appears twice")
                memory_ids[memory.id] = memory.document
                if memory.embedding is not None and memory.embedder is not None:
                    dim = dims.setdefault(memory.embedder, len(memory.embedding))
                    if dim != len(memory.embedding):
                        raise InputError(
                            f"{source}: memory {memory.id!r} has a vector of"
                            f" {len(memory.embedding)} dimensions, others from"
                            f" {memory.embedder} have {dim}"
                        )
    if not target:
        raise InputError(f"{source}: empty (no lamina-export header)")
    if store.get_bank(target) is not None:
        _check_against_bank(store, target, memory_ids, dims, source)
    return target


def _check_against_bank(
    store: Store, bank: str, memory_ids: Mapping[str, str], dims: Mapping[str, int], source: str
) -> None:
    """The export's memories keep their documents, and its vectors the bank's dimensions."""
    ids = list(memory_ids)
    for start in range(0, len(ids), 500):
        for memory in store.get_memories(bank, ids[start : start + 500]):
            if memory.document != memory_ids[memory.id]:
                raise InputError(
                    f"{source}: memory {memory.id!r} belongs to document {memory.document!r}"
                    f" in bank {bank!r}, not {memory_ids[memory.id]!r}"
                )
    wanted = {e for e in dims if store.bank_embedders(bank).get(e)}
    for row in store.iter_memories(bank) if wanted else ():
        embedder, vector = row.memory.embedder, row.memory.embedding
        if embedder in wanted and vector is not None:
            wanted.discard(embedder)
            if len(vector) != dims[embedder]:
                raise InputError(
                    f"{source}: vectors from {embedder} have {dims[embedder]} dimensions,"
                    f" the bank's have {len(vector)}"
                )
            if not wanted:
                break


def import_bank(
    store: Store,
    lines: Iterable[bytes] | Callable[[], Iterable[bytes]],
    *,
    bank: str | None = None,
    source: str = "<input>",
) -> dict[str, int | str]:
    """Load an export into a bank (its own name unless `bank` is given). The whole export is
    checked before anything is written (finite unit vectors of one dimension per embedder,
    matching the bank's; names, ids, types and dates; a memory never moves to another
    document), so a bad export changes nothing; what is written is redacted again, for
    exports made before redaction covered a secret. `lines` may be a function that opens the
    export afresh, which saves holding it in memory between the check and the write."""
    read = lines if callable(lines) else (lambda kept=list(lines): kept)
    target = _check(store, read(), source, bank)
    store.ensure_bank(target)
    redactor = Redactor()
    counts = {"documents": 0, "memories": 0, "records": 0, "logs": 0, "corrections": 0}
    for item in _items(read(), source, target):
        if isinstance(item, _Document):
            counts["records"] += _write_document(store, target, item, redactor)
            counts["documents"] += 1
            counts["memories"] += len(item.memories)
        elif isinstance(item, _Log):
            _write_log(store, target, item, redactor)
            counts["logs"] += 1
        elif isinstance(item, Correction):
            store.save_correction(target, replace(item, note=redactor.redact(item.note)[0]))
            counts["corrections"] += 1
    return {"bank": target, **counts}


def _write_document(store: Store, bank: str, item: _Document, redactor: Redactor) -> int:
    memories = []
    for memory in item.memories:
        public = strip_private(memory.text)[0]
        text, found = redactor.redact(public)
        if found or public != memory.text:
            entities = tuple(redactor.redact(e)[0] for e in memory.entities)
            memory = replace(memory, text=text, entities=entities)
        memories.append(memory)
    document = str(item.data["id"])
    outcome = store.apply_retain(
        RetainBatch(
            bank=bank,
            document=document,
            expected_version=store.get_cursor(bank, document).version,
            cursor=item.cursor,
            records=item.records,
            memories=memories,
            metadata=redact_json(item.data.get("metadata") or {}, lambda t: redactor.redact(t)[0]),
            tags=item.data.get("tags") or [],
            source=item.data.get("source"),
            format=item.data.get("format"),
        )
    )
    return outcome.new_records


def _write_log(store: Store, bank: str, item: _Log, redactor: Redactor) -> None:
    # A message left empty by its private spans stays, empty: summaries and pins count
    # positions in the log.
    public = [hide_private(m) or replace(m, blocks=(), records=()) for m in item.messages]
    store.append_log_messages(bank, item.name, [redact_message(m, redactor)[0] for m in public])
    for summary in item.summaries:
        text = redactor.redact(strip_private(summary.text)[0])[0]
        store.save_summary(bank, item.name, replace(summary, text=text))
    if item.frontier is not None:
        store.save_frontier(bank, item.name, item.frontier)
    for pin in item.pins:
        store.save_pin(bank, item.name, pin)
    if item.created is not None and item.updated is not None:
        store.set_log_times(bank, item.name, item.created, item.updated)
