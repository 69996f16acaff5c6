"""Retain: add a transcript, or what is new in it, to a bank. Incremental and idempotent.

Each document has a cursor: how far it has been retained (a byte offset for line-based files),
where its last, still open, turn starts, and a fingerprint of the retained prefix. Retaining a
growing transcript after every turn therefore reads only the open turn and what follows it; a
record is stored once (the store ignores record ids it has seen) and a unit is embedded again
only if its text changed. A file rewritten or compacted in place fails the fingerprint and is
read again from its start; record ids and content hashes keep that free of duplicates. A last
line still being written is left for the next retain. Each retain is one transaction guarded by
the cursor's version, so a crash leaves the bank as before or as after, and two processes
retaining the same file at once store everything once (the loser re-reads and retries).

Text first, vectors after: the transaction stores the memories and their lexical index without
vectors, so they are recalled by their words as soon as it commits; then the same retain embeds
them (the same batches as when vectors were stored with the text, so the same vectors) and
writes each vector only onto the memory whose content it was made from. A retain that stops
between the two leaves memories awaiting vectors: `MemoryBank`'s next retain of the bank, or
`lamina reindex`, embeds them; nothing is stored twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._fields import field_dict
from ..embed import Embedder, derived_window_vector
from ..errors import InputError, ReadError, ReadWarning, StoreError
from ..fingerprint import file_hash, prefix_fingerprint
from ..llm import LLMError
from ..memories import Cursor, Memory
from ..messages import Message
from ..private import hide_private_all
from ..readers import Reader, detect_format, get_reader, reader_for
from ..readers.base import WarningSink, first_json_lines, open_source, read_head
from ..readers.claude_code import is_subagent_file, read_claude_code
from ..store.base import RetainBatch, Store
from ..text.entities import extract_entities
from ..text.redact import Redactor
from ..text.units import (
    Segment,
    Unit,
    UnitOptions,
    build_units,
    content_hash,
    memory_id,
    memory_id_of,
    segments,
    unit_keys,
    units_signature,
    whole_turns,
)
from ..tokens import count_text
from .extract import MAX_FACTS, FactExtractor

__all__ = ["RetainOptions", "RetainReport", "Retainer", "default_document_id"]

_ATTEMPTS = 8
_EMBED_STEP = 256
"""Units embedded per call, so progress can be told during a long ingest."""

ProgressSink = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class RetainOptions:
    units: UnitOptions = field(default_factory=UnitOptions)
    redactor: Redactor = field(default_factory=Redactor)
    embed: bool = True
    """Embed new units now (off: vectors are filled later by `lamina reindex`)."""
    extractor: FactExtractor | None = None
    """Extract facts from each new turn with a model (optional; none by default)."""


@dataclass
class RetainReport:
    bank: str
    document: str
    status: str
    """`unchanged`, `retained`, `reread` (the file changed before the cursor), or `skipped`
    (memory was paused: the cursor moved past what the file holds, nothing kept)."""
    new_records: int = 0
    memories_added: int = 0
    memories_updated: int = 0
    embedded: int = 0
    redactions: int = 0
    facts: int = 0
    fact_errors: list[str] = field(default_factory=list)
    warnings: list[ReadWarning] = field(default_factory=list)
    pending_partial_line: bool = False
    seconds: float = 0.0
    text_seconds: float = 0.0
    """Until the text was committed (recallable by its words); `seconds` runs until the
    vectors were written too."""
    text_cpu_seconds: float = 0.0
    """The process's CPU time (every thread's, user + system) until the text was committed;
    `cpu_seconds` until the vectors were written too. Unlike wall time, they do not grow with
    what else the machine is doing."""
    cpu_seconds: float = 0.0
    attempts: int = 1
    awaiting: _Awaiting | None = field(default=None, repr=False, compare=False)
    """What the retain committed without vectors, for `Retainer.fill` (None once filled)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            **field_dict(self, leave_out=("attempts", "awaiting")),
            "warnings": [str(w) for w in self.warnings],
            "seconds": round(self.seconds, 4),
            "text_seconds": round(self.text_seconds, 4),
        }


@dataclass(frozen=True, slots=True)
class _Awaiting:
    """Memories one retain committed before their vectors: their units in the order retain
    embeds them (windows after), with the text, id and content hash each was stored with."""

    units: list[Unit]
    texts: Mapping[str, str]
    ids: Mapping[str, str]
    hashes: Mapping[str, str]


def _signed(rules: str, fingerprint: str) -> str:
    """A fingerprint tagged with the unit rules it was retained under: when the rules change,
    the old cursor no longer matches, and the document is read again from its start and its
    units rebuilt (memories the new rules no longer make are deleted)."""
    return f"{rules}:{fingerprint}" if fingerprint else ""


def default_document_id(path: str, format: str) -> str:
    """Claude Code transcripts: their session id (subagents: session/agent); other agents'
    sessions (Codex, Gemini CLI, Copilot CLI): their session id; else the file name without
    extension."""
    if format == "claude-code":
        for value in first_json_lines(read_head(path), limit=50):
            if isinstance(value, Mapping) and isinstance(value.get("sessionId"), str):
                agent = value.get("agentId")
                session = str(value["sessionId"])
                return f"{session}/{agent}" if isinstance(agent, str) and agent else session
        return Path(path).stem
    described = source_metadata(get_reader(format, path), path).get("session_id")
    return described if isinstance(described, str) and described else Path(path).stem


def source_metadata(reader: Reader, path: str) -> dict[str, Any]:
    """What a reader says about the source as a whole (`document_metadata`: the agent that
    wrote a session, its id and version), stored with the document; {} when it says
    nothing."""
    describe = getattr(reader, "document_metadata", None)
    if not callable(describe):
        return {}
    try:
        found = describe(path)
    except (OSError, ReadError):
        return {}
    return dict(found) if isinstance(found, Mapping) else {}


class Retainer:
    """Retains transcripts into a store, embedding with the given embedder."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        options: RetainOptions | None = None,
        *,
        progress: ProgressSink | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.options = options or RetainOptions()
        self.progress = progress
        """Told (stage, done, total) while reading (bytes) and embedding (units)."""

    def _tell(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    # -- entry points ----------------------------------------------------------------------
    def retain_file(
        self,
        path: str,
        bank: str,
        *,
        document: str | None = None,
        format: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        vectors_later: bool = False,
    ) -> RetainReport:
        """Retain a transcript file. `vectors_later`: return once the text is committed,
        leaving the vectors to the caller's `fill(report, bank)` (a retain of several files
        commits every file's text before loading the model)."""
        if not Path(path).is_file():
            open_source(path).close()  # raises the reason: missing, a directory, a FIFO
            raise InputError(f"{path}: no such file")
        # A named format the file plainly is not fails here, before a document is made.
        reader = reader_for(path, format, option="format")
        doc = document or default_document_id(path, reader.name)
        described = source_metadata(reader, path)
        if described:
            metadata = {**described, **(metadata or {})}
        started, cpu = time.perf_counter(), time.process_time()
        for attempt in range(1, _ATTEMPTS + 1):
            if reader.name == "claude-code":
                report = self._retain_lines(path, bank, doc, tags, metadata)
            else:
                report = self._retain_whole(path, bank, doc, reader.name, tags, metadata)
            if report is not None:
                report.attempts = attempt
                return self._finish(report, bank, started, cpu, fill=not vectors_later)
        raise StoreError(f"{path}: retain kept losing to concurrent writers; try again")

    def retain_messages(
        self,
        messages: Sequence[Message],
        bank: str,
        document: str,
        *,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> RetainReport:
        """Retain messages given in code (the whole list each time; already-retained records
        and unchanged units cost nothing but a lookup)."""
        started, cpu = time.perf_counter(), time.process_time()
        fingerprint = _signed(
            units_signature(self.options.units),
            hashlib.sha256(
                "\x00".join(f"{m.id}:{hash_text(m)}" for m in messages).encode()
            ).hexdigest()[:32],
        )
        kept = hide_private_all(messages)
        for attempt in range(1, _ATTEMPTS + 1):
            cursor = self.store.get_cursor(bank, document)
            if cursor.fingerprint == fingerprint and cursor.version > 0:
                return RetainReport(bank, document, "unchanged", seconds=_since(started))
            new_cursor = Cursor(
                offset=len(messages),
                open_offset=len(messages),
                records=len(messages),
                fingerprint=fingerprint,
                version=cursor.version,
            )
            report = self._commit(
                bank, document, kept, cursor, new_cursor, tags, metadata, None, None, []
            )
            if report is not None:
                report.attempts = attempt
                return self._finish(report, bank, started, cpu)
        raise StoreError(f"{document}: retain kept losing to concurrent writers; try again")

    def skip_file(
        self,
        path: str,
        bank: str,
        document: str,
        format: str | None = None,
        upto: int | None = None,
    ) -> RetainReport:
        """Move the document's cursor past every complete line of a Claude Code transcript
        (those ending before `upto`, when given) without reading or keeping any of them (memory
        was paused): a later retain starts there. Returns a report with status `skipped` and
        nothing added. Other formats are read whole at every retain: their messages up to now
        are noted as paused instead (`PAUSED_KEY` in the document's metadata) and never kept by
        a later retain."""
        started = time.perf_counter()
        rules = units_signature(self.options.units)
        name = format or detect_format(path).name
        if name != "claude-code":
            return self._skip_whole(path, bank, document, name, started)

        def to_last_line(cursor: Cursor) -> tuple[Cursor, None] | None:
            with Path(path).open("rb") as handle:
                data = handle.read()
            # A last line still being written stays for later.
            offset = data.rfind(b"\n", 0, len(data) if upto is None else upto) + 1
            if cursor.version > 0 and offset <= cursor.offset:
                return None
            moved = Cursor(
                offset=offset,
                open_offset=offset,
                open_line=data.count(b"\n", 0, offset) + 1,
                records=cursor.records,
                fingerprint=_signed(rules, prefix_fingerprint(path, offset)),
                # The size seen: all of it, unless a later part is left for a retain to read.
                size=len(data) if upto is None else offset,
                version=cursor.version,
            )
            return moved, None

        return self._skip(path, bank, document, name, started, to_last_line)

    def _skip_whole(
        self, path: str, bank: str, document: str, format: str, started: float
    ) -> RetainReport:
        fingerprint = _signed(units_signature(self.options.units), file_hash(path))

        def past_every_message(cursor: Cursor) -> tuple[Cursor, dict[str, Any]] | None:
            if cursor.version > 0 and cursor.fingerprint == fingerprint:
                return None
            count = sum(1 for _ in get_reader(format, path).read(path, lambda _w: None))
            paused = _paused(self.store, bank, document)
            if count > cursor.offset:
                paused.append([cursor.offset, count])
            moved = Cursor(
                offset=count,
                open_offset=count,
                records=cursor.records,
                fingerprint=fingerprint,
                size=Path(path).stat().st_size,
                version=cursor.version,
            )
            return moved, {PAUSED_KEY: paused}

        return self._skip(path, bank, document, format, started, past_every_message)

    def _skip(
        self,
        path: str,
        bank: str,
        document: str,
        format: str,
        started: float,
        advance: Callable[[Cursor], tuple[Cursor, Mapping[str, Any] | None] | None],
    ) -> RetainReport:
        """Move the document's cursor where `advance` says (with the document metadata it
        gives; None: the cursor is there already), keeping nothing; tried again when a
        concurrent retain moved the cursor first."""
        for attempt in range(1, _ATTEMPTS + 1):
            cursor = self.store.get_cursor(bank, document)
            moved = advance(cursor)
            if moved is None:
                return RetainReport(bank, document, "unchanged", seconds=_since(started))
            new_cursor, metadata = moved
            batch = RetainBatch(
                bank=bank,
                document=document,
                expected_version=cursor.version,
                cursor=new_cursor,
                records=[],
                memories=[],
                metadata=metadata,
                source=path,
                format=format,
            )
            if self.store.apply_retain(batch).committed:
                return RetainReport(
                    bank, document, "skipped", seconds=_since(started), attempts=attempt
                )
        raise StoreError(f"{path}: skip kept losing to concurrent writers; try again")

    def _finish(
        self, report: RetainReport, bank: str, started: float, cpu: float, fill: bool = True
    ) -> RetainReport:
        """Times the committed text (`started`: wall clock, `cpu`: process CPU time at the
        start), then embeds what it committed (`fill`; not when `fill` is False)."""
        report.text_seconds = _since(started)
        report.text_cpu_seconds = time.process_time() - cpu
        if not fill:
            report.seconds, report.cpu_seconds = report.text_seconds, report.text_cpu_seconds
            return report
        self.fill(report, bank)
        report.seconds = _since(started)
        report.cpu_seconds = time.process_time() - cpu
        return report

    def fill(self, report: RetainReport, bank: str) -> int:
        """Embed the memories `report`'s retain committed without vectors, in the batches a
        retain always embedded them in (so their vectors are those it would have stored with
        the text), and write each vector only onto a memory still holding the content it was
        made from (another retain may have replaced it meanwhile). Returns how many were
        written; `report.embedded` counts them."""
        awaiting, report.awaiting = report.awaiting, None
        if awaiting is None or self.embedder is None or not awaiting.units:
            return 0
        plain = [u for u in awaiting.units if u.kind != "window"]
        matrices = self._embedding(plain, awaiting.texts)
        vectors = self._embed(awaiting.units, awaiting.texts, bank, awaiting.ids, matrices)
        by_id = {awaiting.ids[key]: vector for key, vector in vectors.items()}
        hashes = {awaiting.ids[key]: awaiting.hashes[key] for key in vectors}
        written = self.store.set_embeddings(bank, by_id, self.embedder.name, hashes=hashes)
        report.embedded += written
        return written

    # -- line-based files (Claude Code JSONL) ----------------------------------------------
    def _retain_lines(
        self,
        path: str,
        bank: str,
        document: str,
        tags: Sequence[str],
        metadata: Mapping[str, Any] | None,
    ) -> RetainReport | None:
        cursor = self.store.get_cursor(bank, document)
        size = Path(path).stat().st_size
        rules = units_signature(self.options.units)
        prefix_ok = (
            cursor.offset <= size
            and _signed(rules, prefix_fingerprint(path, cursor.offset)) == cursor.fingerprint
        )
        if cursor.version > 0 and prefix_ok and size == cursor.size:
            return RetainReport(bank, document, "unchanged")
        start, first_line = (cursor.open_offset, cursor.open_line) if prefix_ok else (0, 1)
        if start == 0:
            first_line = 1
        warnings: list[ReadWarning] = []
        messages: list[Message] = []
        for message in read_claude_code(
            path,
            warnings.append,
            start=start,
            stop=size,
            first_line=first_line,
            subagent=is_subagent_file(path),
        ):
            messages.append(message)
            if message.source.end_offset is not None:
                self._tell("reading", message.source.end_offset, size)
        partial = any(w.reason.startswith("incomplete last line") for w in warnings)
        warnings = [w for w in warnings if not w.reason.startswith("incomplete last line")]
        offset = max((m.source.end_offset or 0 for m in messages), default=start)
        # Private spans go before turns are found: a prompt that was all private starts none.
        messages = hide_private_all(messages)
        segs = segments(messages, self.options.units.rules)
        if segs:
            # Re-read from the first turn the next retain may still change: the open (last)
            # turn, and the turns that share a window with it.
            reopen = min(len(segs), max(1, self.options.units.windows))
            opener = messages[segs[-reopen].start]
            open_offset = opener.source.offset or start
            open_line = opener.source.line
        else:
            open_offset, open_line = start, first_line
        new_cursor = Cursor(
            offset=offset,
            open_offset=open_offset,
            open_line=open_line,
            records=cursor.records,
            fingerprint=_signed(rules, prefix_fingerprint(path, offset)),
            size=max(size, offset),
            version=cursor.version,
        )
        report = self._commit(
            bank, document, messages, cursor, new_cursor, tags, metadata, path, "claude-code",
            warnings,
        )  # fmt: skip
        if report is not None:
            report.status = "retained" if prefix_ok or cursor.version == 0 else "reread"
            report.pending_partial_line = partial
        return report

    # -- whole-document formats ------------------------------------------------------------
    def _retain_whole(
        self,
        path: str,
        bank: str,
        document: str,
        format: str,
        tags: Sequence[str],
        metadata: Mapping[str, Any] | None,
    ) -> RetainReport | None:
        cursor = self.store.get_cursor(bank, document)
        fingerprint = _signed(units_signature(self.options.units), file_hash(path))
        if cursor.version > 0 and cursor.fingerprint == fingerprint:
            return RetainReport(bank, document, "unchanged")
        warnings: list[ReadWarning] = []
        sink: WarningSink = warnings.append
        read = list(get_reader(format, path).read(path, sink))
        paused = _paused(self.store, bank, document)
        said = [m for n, m in enumerate(read) if not any(a <= n < b for a, b in paused)]
        messages = hide_private_all(said)
        new_cursor = Cursor(
            offset=len(read),
            open_offset=len(read),
            records=len(read),
            fingerprint=fingerprint,
            size=Path(path).stat().st_size,
            version=cursor.version,
        )
        return self._commit(
            bank, document, messages, cursor, new_cursor, tags, metadata, path, format, warnings
        )

    # -- the shared part -------------------------------------------------------------------
    def _commit(
        self,
        bank: str,
        document: str,
        messages: Sequence[Message],
        cursor: Cursor,
        new_cursor: Cursor,
        tags: Sequence[str],
        metadata: Mapping[str, Any] | None,
        source: str | None,
        format: str | None,
        warnings: list[ReadWarning],
    ) -> RetainReport | None:
        redactions = 0

        def redact(text: str) -> str:
            nonlocal redactions
            clean, count = self.options.redactor.redact(text)
            redactions += count
            return clean

        # Secrets are replaced in what was said before units are cut from it; the pass over
        # each unit's text below is a second guard (its matches were counted here already).
        units, segs = build_units(messages, self.options.units, redact)
        ids = {unit.key: memory_id(document, unit) for unit in units}
        kept = set(ids.values())
        texts: dict[str, str] = {}
        hashes: dict[str, str] = {}

        def changed_among(group: Sequence[Unit]) -> list[Unit]:
            for unit in group:
                text, _again = self.options.redactor.redact(unit.text)  # counted above
                texts[unit.key] = _storable(text)
                hashes[unit.key] = content_hash(unit, texts[unit.key])
            stored = self.store.content_hashes(bank, [ids[u.key] for u in group])
            return [u for u in group if stored.get(ids[u.key]) != hashes[u.key]]

        # Windows come last among the units: their vectors are made from their parts'.
        changed = changed_among([u for u in units if u.kind != "window"])
        facts, stale, fact_errors = self._facts(bank, document, whole_turns(units, changed))
        for unit in facts:
            text, count = self.options.redactor.redact(unit.text)
            texts[unit.key] = _storable(text)
            redactions += count
            ids[unit.key] = memory_id(document, unit)
            hashes[unit.key] = content_hash(unit, texts[unit.key])
        # Windows come after the units they are made of, as `fill` embeds them.
        changed += changed_among([u for u in units if u.kind == "window"])
        changed += facts
        stale += self._gone(bank, document, messages, segs, units, kept)
        entities = {u.key: extract_entities(texts[u.key], u.speakers) for u in changed}
        tokens = {u.key: count_text(texts[u.key]) for u in changed}
        all_tags = tuple(dict.fromkeys(tags))
        memories = [
            Memory(
                id=ids[u.key],
                bank=bank,
                document=document,
                kind=u.kind,
                text=texts[u.key],
                record_ids=u.record_ids,
                occurred_at=u.occurred_at,
                said_at=u.said_at or u.occurred_at,
                speakers=u.speakers,
                entities=entities[u.key],
                tags=all_tags,
                content_hash=hashes[u.key],
                embedding=None,  # written by `fill` once the text is committed
                embedder=None,
                first_line=u.first_line,
                last_line=u.last_line,
                tokens=tokens[u.key],
            )
            for u in changed
        ]
        batch = RetainBatch(
            bank=bank,
            document=document,
            expected_version=cursor.version,
            cursor=replace(new_cursor, records=cursor.records + len(messages)),
            records=[m.id for m in messages],
            memories=memories,
            delete_memories=stale,
            metadata=metadata,
            tags=list(tags),
            source=source,
            format=format,
        )
        outcome = self.store.apply_retain(batch)
        if not outcome.committed:
            return None
        return RetainReport(
            bank,
            document,
            "retained",
            new_records=outcome.new_records,
            memories_added=outcome.inserted,
            memories_updated=outcome.replaced,
            redactions=redactions,
            facts=len(facts),
            fact_errors=fact_errors,
            warnings=warnings,
            awaiting=_Awaiting(changed, texts, ids, hashes)
            if self.options.embed and self.embedder is not None
            else None,
        )

    def _gone(
        self,
        bank: str,
        document: str,
        messages: Sequence[Message],
        segs: Sequence[Segment],
        units: Sequence[Unit],
        kept: set[str],
    ) -> list[str]:
        """Memories of these messages that the unit rules no longer make: a turn that grew
        into parts, windows around it, units made under older rules."""
        candidates = {
            memory_id_of(document, kind, key)
            for kind, key in unit_keys(messages, segs, units, self.options.units)
        }
        candidates -= kept
        return list(self.store.content_hashes(bank, candidates)) if candidates else []

    def _facts(
        self, bank: str, document: str, changed: Sequence[Unit]
    ) -> tuple[list[Unit], list[str], list[str]]:
        """Fact units of the changed turns, ids of their facts from before that no longer
        exist, and the errors of turns whose extraction failed (those turns keep no facts)."""
        extractor = self.options.extractor
        if extractor is None:
            return [], [], []
        facts: list[Unit] = []
        errors: list[str] = []
        candidates: list[str] = []
        for unit in changed:
            if unit.kind not in ("turn", "part"):
                continue
            try:
                found = extractor.extract(unit.text, unit.occurred_at)
            except LLMError as exc:
                errors.append(f"{unit.key}: {exc}")
                found = []
            for n in range(MAX_FACTS):
                key = f"{unit.key}#fact{n}"
                if n < len(found):
                    fact = found[n]
                    facts.append(
                        replace(
                            unit,
                            key=key,
                            kind="fact",
                            text=fact.text,
                            occurred_at=fact.occurred_at or unit.occurred_at,
                            said_at=unit.occurred_at,
                            parts=(),
                        )
                    )
                else:
                    candidates.append(memory_id(document, replace(unit, key=key, kind="fact")))
        stale = list(self.store.content_hashes(bank, candidates)) if candidates else []
        return facts, stale, errors

    def _embedding(self, units: Sequence[Unit], texts: Mapping[str, str]) -> Iterator[Any]:
        """The vectors of the units that are embedded (all but windows), one matrix per
        `_EMBED_STEP` of them, in order: the batches a retain has always embedded, so the
        vectors are the same."""
        if not self.options.embed or self.embedder is None:
            return
        turns = [texts[u.key] for u in units if u.kind != "window"]
        for start in range(0, len(turns), _EMBED_STEP):
            yield self.embedder.embed_documents(turns[start : start + _EMBED_STEP])

    def _embed(
        self,
        units: Sequence[Unit],
        texts: Mapping[str, str],
        bank: str,
        ids: Mapping[str, str],
        matrices: Iterator[Any],
    ) -> dict[str, Any]:
        """The units' vectors: `matrices` (from `_embedding`) for all but windows, whose
        vectors are made from their parts'."""
        if not self.options.embed or self.embedder is None or not units:
            return {}
        turns = [u for u in units if u.kind != "window"]
        vectors: dict[str, Any] = {}
        done = 0
        for matrix in matrices:
            part = turns[done : done + len(matrix)]
            vectors.update({u.key: matrix[i] for i, u in enumerate(part)})
            done += len(part)
            self._tell("embedding", done, len(turns))
        windows = [u for u in units if u.kind == "window"]
        # A window's vector is derived from its turns' vectors, not embedded again; turns
        # retained earlier lend theirs from the store.
        missing = {p for w in windows for p in w.parts if p not in vectors and p in ids}
        if missing:
            key_of = {ids[p]: p for p in missing}
            for memory in self.store.get_memories(bank, list(key_of)):
                if memory.embedding is not None and memory.embedder == self.embedder.name:
                    vectors[key_of[memory.id]] = memory.embedding
        for unit in windows:
            derived = derived_window_vector([vectors.get(p) for p in unit.parts])
            if derived is not None:
                vectors[unit.key] = derived
            else:
                vectors[unit.key] = self.embedder.embed_documents([texts[unit.key]])[0]
        wanted = {u.key for u in units}
        return {k: v for k, v in vectors.items() if k in wanted}


def hash_text(message: Message) -> str:
    return hashlib.sha1(repr(message.blocks).encode()).hexdigest()[:12]


PAUSED_KEY = "paused_messages"
"""Document metadata: the [start, end) message positions said while memory was paused, in a
transcript that is read whole (not Claude Code's, whose cursor simply moves past them)."""


def _paused(store: Store, bank: str, document: str) -> list[list[int]]:
    found = store.get_document(bank, document)
    ranges = found.metadata.get(PAUSED_KEY) if found is not None else None
    if not isinstance(ranges, list):
        return []
    return [
        [int(r[0]), int(r[1])]
        for r in ranges
        if isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)
    ]


def _since(started: float) -> float:
    return time.perf_counter() - started


def _storable(text: str) -> str:
    """Text every store keeps as it is: NUL characters (which PostgreSQL's text type refuses)
    become U+FFFD, the replacement character."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text
