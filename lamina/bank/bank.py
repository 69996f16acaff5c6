"""`MemoryBank`: the library's front door to retain and recall.

    bank = MemoryBank.open()                       # SQLite in the data directory, or the
                                                   # configured PostgreSQL database
    bank.retain_file("session.jsonl", "my-project")
    result = bank.recall("which database did we pick?", "my-project")
    print(result.block())                          # a <lamina_memories> block for a prompt

It holds a store and an embedder (loaded lazily, on the first embed). Both stores search in
the database (`SearchStore`), so recall reads only what its query needs (lamina.bank.plan).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._closing import Closing
from ..config import Settings, resolve_settings
from ..embed import (
    Embedder,
    bank_embedder,
    default_embedder,
    derived_window_vector,
    shared_embedder,
)
from ..memories import Bank, BankStats, Correction, Document, Memory
from ..messages import Message
from ..store import open_store
from ..store.base import Store
from ..store.lookup import check_bank_name, require_bank, require_document
from ..store.search import SearchStore
from ..text.entities import extract_entities
from .fusion import model_for
from .plan import RecallPlan
from .recall import RecallOptions, RecallResult

if TYPE_CHECKING:
    from .expand import QueryExpander

    # Retain's modules (readers, units, redaction, fact extraction) load only when a bank
    # retains: a prompt's hook only recalls.
    from .retain import ProgressSink, Retainer, RetainOptions, RetainReport

__all__ = ["MemoryBank"]

_REINDEX_WRITE = 4096
"""Vectors `MemoryBank.reindex` writes at a time (each write makes readers refresh their
vector file, so not one per batch)."""


@dataclass
class _ReindexPlan:
    """A document's share of a reindex: its memories to embed and which memory holds each
    record's turn (and whether that turn's vector stands)."""

    turns: list[Memory] = field(default_factory=list)
    windows: list[Memory] = field(default_factory=list)
    turn_of: dict[str, tuple[str, bool]] = field(default_factory=dict)


class MemoryBank(Closing):
    """Retain transcripts into named banks and recall from them, on one store.

        bank = MemoryBank.open()                     # or MemoryBank.open(database_url=...)
        messages = read_message_list([{"role": "user", "content": "We chose Postgres."}])
        bank.retain_messages(messages.messages, "my-project", "session-1")
        hits = bank.recall("which database?", "my-project", RecallOptions(budget=500)).hits
        bank.close()

    A bank name is any short string (one per user, project or agent); a bank exists once
    something is retained into it. Within a bank, each retained source is a document with a
    caller-chosen id; retaining the same document again adds only what is new. Methods that take
    a bank or document name do not check that it exists (`banks()` and `documents()` list them);
    `forget_document` and `forget_memory` say how much they removed.

    `MemoryBank(store, embedder)` builds one on a store of your own (`lamina.store.open_store`)
    and an embedder of your own (the `Embedder` protocol); the default embedder is a small local
    model, loaded on the first embed.
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None = None,
        *,
        retain_options: RetainOptions | None = None,
    ) -> None:
        self.store = store
        self._embedder = embedder
        self._retain_options = retain_options
        self.progress: ProgressSink | None = None
        """Told (stage, done, total) during long retains (see Retainer)."""

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        *,
        database_url: str | None = None,
        embedder: Embedder | None = None,
        retain_options: RetainOptions | None = None,
        serving: bool = False,
        settings: Settings | None = None,
    ) -> MemoryBank:
        """A bank on the configured database (created and migrated on first use).

        `settings`: what an entry point resolved (lamina.config); without them they are
        resolved here: `database_url` wins, then $LAMINA_DATABASE_URL, the config file's
        `database_url`, and the SQLite file of the data directory `home`. Without `embedder`,
        the one the settings name ($LAMINA_EMBEDDER, the config file's `embedder`), else the
        bundled model. `serving`: this process answers many recalls (a server), so the store
        may keep what its searches read in memory between them."""
        if settings is None:
            settings = resolve_settings(home=home, database_url=database_url)
        if embedder is None and settings.embedder is not None:
            embedder = shared_embedder(settings.embedder)
        store = open_store(settings.database)
        if serving and hasattr(store, "keep_in_memory"):
            store.keep_in_memory = True
        return cls(store, embedder, retain_options=retain_options)

    @property
    def embedder(self) -> Embedder:
        """The embedder this bank was given or configured with, else the default model: what
        `reindex` embeds with. Each bank's own is `embedder_for`."""
        return self._embedder if self._embedder is not None else default_embedder()

    def embedder_for(self, bank: str) -> Embedder:
        """The embedder `bank`'s memories and queries are embedded with: the one given or
        configured (LAMINA_EMBEDDER, the config file's `embedder`); else the model that made
        most of the bank's vectors while this version ships it, so a bank keeps its model when
        an upgrade changes the default (`lamina reindex` moves it); else the default model
        (`lamina.embed.bank_embedder`). Costs one index probe."""
        if self._embedder is not None:
            return self._embedder
        return bank_embedder(self.store.bank_embedders(bank))

    def close(self) -> None:
        """Close the store (a database connection); the bank is not usable afterwards."""
        self.store.close()

    # -- retain ----------------------------------------------------------------------------
    @property
    def retain_options(self) -> RetainOptions:
        """How retain splits, redacts and embeds (`RetainOptions`); settable."""
        if self._retain_options is None:
            from .retain import RetainOptions

            self._retain_options = RetainOptions()
        return self._retain_options

    @retain_options.setter
    def retain_options(self, options: RetainOptions) -> None:
        self._retain_options = options

    def _retainer(self, bank: str) -> Retainer:
        from .retain import Retainer

        embedder = self.embedder_for(bank) if self.retain_options.embed else None
        return Retainer(self.store, embedder, self.retain_options, progress=self.progress)

    def prepare(self, bank: str) -> int:
        """Index a bank retained before its store searched in the database (SQLite banks
        from earlier versions), once; later calls cost one query. Retains call it, so the
        first retain after an upgrade does it (with progress); a recall that comes first does
        it then."""
        prepare = getattr(self.store, "prepare_search", None)
        if prepare is None or not isinstance(self.store, SearchStore):
            return 0
        if self.store.searchable(bank):
            return 0
        sink = self.progress

        def progress(done: int, total: int) -> None:
            if sink is not None:
                sink("indexing for search", done, total)

        return int(prepare(bank, progress))

    def retain_file(
        self,
        path: str | Path,
        bank: str,
        *,
        document: str | None = None,
        format: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        vectors_later: bool = False,
    ) -> RetainReport:
        """Retain a transcript file into `bank`; what was retained before is skipped.

            report = bank.retain_file("session.jsonl", "my-project")
            report.status, report.memories_added

        `format` is detected when None (`lamina formats` lists them); `document` defaults to
        an id from the file (a Claude Code session's id, else the file's name). `tags` and
        `metadata` are kept with the document; recall can filter on tags. A file read before
        is read again only from where the last retain stopped (Claude Code transcripts) or
        compared whole (other formats).

        `vectors_later`: return as soon as the text is committed (recalled by its words from
        then on), leaving its vectors to `fill_vectors([report, ...], bank)`; a caller retaining
        several files commits all their text first and loads the model once they are read.
        Vectors left unfilled (the process stopped) are filled by the next retain of the bank
        or by `reindex`."""
        self.prepare(check_bank_name(bank))
        report = self._retainer(check_bank_name(bank)).retain_file(
            str(path),
            check_bank_name(bank),
            document=document,
            format=format,
            tags=tags,
            metadata=self._clean(metadata),
            vectors_later=vectors_later,
        )
        if not vectors_later:
            report.embedded += self._complete(bank)
        return report

    def fill_vectors(self, reports: Sequence[RetainReport], bank: str) -> int:
        """Embed what `retain_file(..., vectors_later=True)` calls into `bank` committed
        without vectors (the vectors a retain that embeds at once stores), then any other
        memory of the bank still awaiting its vector; how many vectors were written (each
        report's `embedded` counts its own)."""
        check_bank_name(bank)
        retainer = self._retainer(bank)
        written = sum(retainer.fill(report, bank) for report in reports)
        more = self._complete(bank)
        if reports:
            reports[-1].embedded += more
        return written + more

    def skip_file(
        self,
        path: str | Path,
        bank: str,
        document: str,
        format: str | None = None,
        *,
        upto: int | None = None,
    ) -> RetainReport:
        """Move a transcript's cursor to its end (or to its last line ending before `upto`),
        keeping nothing of what it holds past the cursor: what was said while memory was
        paused is never retained later."""
        retainer = self._retainer(check_bank_name(bank))
        return retainer.skip_file(str(path), bank, document, format, upto)

    def retain_messages(
        self,
        messages: Sequence[Message] | Sequence[Any] | Any,
        bank: str,
        document: str,
        *,
        format: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> RetainReport:
        """Retain messages held in memory as the document `document` of `bank`.

            bank.retain_messages(openai_messages, "my-project", "chat-42")  # plain dicts
            bank.retain_messages(transcript.messages, "my-project", "chat-42")

        `messages` are Lamina `Message`s, or anything `lamina.read_message_list` reads (plain
        dicts in the OpenAI or Anthropic shape, SDK objects, Claude Code records; `format`
        detected when None): a message without an id then gets one from its content, scoped by
        the document, and the report's warnings say what could not be read (`InputError` when
        nothing could). Pass the whole conversation each time: messages already retained cost
        only a lookup, so a growing conversation is retained by calling this after every
        turn."""
        from .sent import is_messages, message_list

        check_bank_name(bank)
        transcript = None if is_messages(messages) else message_list(messages, document, format)
        read = transcript.messages if transcript is not None else list(messages)
        self.prepare(bank)
        report = self._retainer(bank).retain_messages(
            read, bank, document, tags=tags, metadata=self._clean(metadata)
        )
        report.embedded += self._complete(bank)
        if transcript is not None:
            report.warnings[:0] = transcript.warnings
        return report

    def retain_text(
        self,
        text: str,
        bank: str,
        document: str = "notes",
        *,
        speaker: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> RetainReport:
        """Retain a note (a decision, a preference, a fact) as a message of `document`.

            bank.retain_text("We chose SQLite for the embedded default.", "my-project")

        The same text retained into the same document again is stored once (its id comes
        from the two); it is dated now, and `speaker` says who said or decided it.
        `InputError` for a text of only whitespace. HTTP's and MCP's `retain_text` call this."""
        from .sent import note

        return self.retain_messages(
            [note(text, document, speaker=speaker)],
            bank,
            document,
            tags=tags,
            metadata=metadata,
        )

    def awaiting_vectors(self, bank: str) -> int:
        """How many of `bank`'s memories have no vector yet (a retain stores text first and
        embeds after; until then recall finds them by their words only)."""
        stats = self.store.bank_stats(bank)
        return max(0, stats.memories - stats.embedded)

    def _complete(self, bank: str) -> int:
        """After a retain: embed memories of `bank` still without vectors (left by a retain
        that stopped between storing its text and writing its vectors); how many."""
        if not self.retain_options.embed or not self.awaiting_vectors(bank):
            return 0
        return self.reindex(bank, missing=True)

    def _clean(self, metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """Document metadata a caller sent, with its secrets redacted like any stored text."""
        if not metadata:
            return metadata
        redactor = self.retain_options.redactor
        from ..text.redact import redact_json

        clean: Mapping[str, Any] = redact_json(metadata, lambda t: redactor.redact(t)[0])
        return clean

    # -- recall ----------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        bank: str,
        options: RecallOptions | None = None,
        *,
        dense: bool = True,
        expander: QueryExpander | None = None,
    ) -> RecallResult:
        """The best memories for `query` in `bank` that fit `options.budget` tokens.

            result = bank.recall("which database did we pick?", "my-project")
            for hit in result.hits:
                print(hit.score, hit.memory.text)
            prompt = result.block() + "\n\n" + user_prompt   # a <lamina_memories> block

        `RecallOptions` narrows it to documents, tags or a time range. With `dense=False` the
        query is not embedded and the dense channel is left out (the hook's answer when the
        model is not ready in time). With an `expander` (lamina.bank.expand; optional, it asks
        a language model), the query is recalled together with the search queries the model
        wrote for it; the result's `expansion` says what they were, or why there were none."""
        options = options or RecallOptions()
        if expander is not None:
            expansion = expander.expand(query)
            if not expansion.queries:
                return replace(self.recall(query, bank, options, dense=dense), expansion=expansion)
            # Only the question's own time words frame the time channel.
            own = query if options.time_text is None else options.time_text
            framed = replace(options, time_text=own)
            result = self.recall(f"{query}\n{expansion.text}", bank, framed, dense=dense)
            return replace(result, query=query, expansion=expansion)
        model = self.embedder_for(bank)
        result = self.plan(query, bank, options, model).recall(model if dense else None)
        return replace(result, awaiting_vectors=self.awaiting_vectors(bank))

    def plan(
        self,
        query: str,
        bank: str,
        options: RecallOptions | None = None,
        model: Embedder | None = None,
    ) -> RecallPlan:
        """A recall of `query` from `bank` that can be answered in steps sharing what the
        store returned (lamina.bank.plan): `plan.recall(None)` without the dense channel, then
        `plan.recall(embedder)` with it (the prompt hook's way). `recall` is one such plan.

        Sets what `options` leave to the bank: its corrections, and the fusion model fitted
        for the embedder of its vectors (`model`, default `embedder_for(bank)`). A bank
        retained by an earlier version is indexed for search first (see `prepare`)."""
        options = options or RecallOptions()
        if not isinstance(self.store, SearchStore):
            raise TypeError(f"{type(self.store).__name__} cannot search its memories")
        if options.corrections is None:
            from .corrections import Corrections

            options = replace(options, corrections=Corrections.load(self.store, bank))
        if options.model is None and options.fusion == "learned":
            # The dense channel only reads vectors this embedder made: its scores have that
            # model's scale and spread, so the coefficients fitted for it.
            name = (model or self.embedder_for(bank)).name
            options = replace(options, model=model_for(name))
        self.prepare(bank)
        return RecallPlan(self.store, bank, query, options)

    def warm_up(self, banks: int = 8) -> None:
        """Load the embedding model and the tokenizer, and recall once from up to `banks`
        banks (opening their vectors and postings), so that a server's first recall after it
        starts costs what the later ones do. For a background thread; failures are left to
        the first real recall to report."""
        from ..tokens import count_text

        names = [bank.name for bank in self.store.list_banks()[:banks]]
        models = {id(e): e for e in [self.embedder_for(name) for name in names] or [self.embedder]}
        for model in models.values():
            load = getattr(model, "load", None)
            if callable(load):  # a bundled embedder's model and both its tokenizers
                load()
            model.embed_query("warm up")
        count_text("warm up")
        for name in names:
            self.recall("warm up", name, RecallOptions(limit=1, budget=64))

    # -- banks and documents ---------------------------------------------------------------
    def banks(self) -> list[Bank]:
        """Every bank of the store, with its document and memory counts."""
        return self.store.list_banks()

    def stats(self, bank: str) -> BankStats:
        """Counts and sizes of one bank (zeros for a bank that does not exist)."""
        return self.store.bank_stats(bank)

    def require_bank(self, bank: str) -> str:
        """`bank` if it exists; `NotFoundError` otherwise (`lamina.store.lookup`)."""
        return require_bank(self.store, bank)

    def require_document(self, bank: str, document: str) -> str:
        """`document` if bank `bank` holds it; `NotFoundError` otherwise."""
        return require_document(self.store, bank, document)

    def documents(self, bank: str) -> list[Document]:
        """The documents retained into `bank` (empty for a bank that does not exist)."""
        return self.store.list_documents(bank)

    def agent_documents(
        self, bank: str, agents: Sequence[str], documents: Sequence[str] | None = None
    ) -> frozenset[str]:
        """The documents of `bank` retained from sessions of these agents (`claude-code`,
        `codex`, `gemini`, `copilot`: the `agent` a reader records in a document's metadata),
        among `documents` when given: `RecallOptions.documents` for recall by agent (an empty
        set recalls nothing)."""
        wanted = {agent.strip().lower() for agent in agents}
        found = {d.id for d in self.store.list_documents(bank) if d.metadata.get("agent") in wanted}
        return frozenset(found & set(documents) if documents else found)

    def forget_document(self, bank: str, document: str) -> int:
        """Remove a document and its memories; how many memories went (0: no such document)."""
        return self.store.delete_document(bank, document)

    def forget_memory(self, bank: str, memory_id: str) -> bool:
        """Remove one memory by id; False when there was none."""
        return self.store.delete_memory(bank, memory_id)

    # -- corrections (lamina.bank.corrections) ------------------------------------------------
    def mark_wrong(self, bank: str, memory_id: str, note: str = "") -> Correction:
        """Mark a memory wrong: recall leaves it out from now on (the prompt hook never
        injects it); `unmark` undoes it. `NotFoundError` for a bank or memory that is absent."""
        from .corrections import mark_memory

        bank = require_bank(self.store, bank)
        return mark_memory(self.store, bank, memory_id, "wrong", note=note)

    def supersede(self, bank: str, old: str, new: str, note: str = "") -> Correction:
        """Mark memory `old` superseded by memory `new`: where recall would return `old`, it
        returns `new` (once), noting that it replaces `old`; `unmark` undoes it."""
        from .corrections import mark_memory

        return mark_memory(
            self.store, require_bank(self.store, bank), old, "superseded", replacement=new,
            note=note,
        )  # fmt: skip

    def unmark(self, bank: str, memory_id: str) -> Correction:
        """Remove a memory's mark (returned); `NotFoundError` when it has none."""
        from .corrections import unmark_memory

        return unmark_memory(self.store, require_bank(self.store, bank), memory_id)

    def corrections(self, bank: str) -> list[Correction]:
        """The bank's marks, oldest first (empty for a bank that does not exist)."""
        return list(self.store.load_corrections(bank).values())

    def forget_before(self, bank: str, before: datetime) -> int:
        """Forget the memories of `bank` that happened before `before` (memories without a
        time stay); returns how many went. `retain_days` in the config file runs this after
        each retain; `lamina forget --older-than` on demand."""
        return self.store.forget_before(bank, before)

    def delete_bank(self, bank: str) -> bool:
        """Remove a bank with all its documents, memories and logs; False when there was none."""
        return self.store.delete_bank(bank)

    def memories(self, bank: str, *, with_embeddings: bool = True) -> Iterator[Memory]:
        """Every memory of `bank`, streamed (an export reads them this way)."""
        for row in self.store.iter_memories(bank, with_embeddings=with_embeddings):
            yield row.memory

    def refresh_entities(self, bank: str) -> int:
        """Extract every memory's entities again (memories stored before the entity channel
        have none); returns how many memories changed."""
        changed = {
            m.id: found
            for m in self.memories(bank, with_embeddings=False)
            if (found := extract_entities(m.text, m.speakers)) != tuple(m.entities)
        }
        return self.store.set_entities(bank, changed) if changed else 0

    def reindex(
        self, bank: str, *, batch: int = 256, force: bool = False, missing: bool = False
    ) -> int:
        """Embed again every memory whose vector is missing or from another embedder (every
        memory with `force`); returns how many were embedded. With `missing`, only memories
        without a vector, with the bank's own model (`embedder_for`), each written only if
        its content is still the one embedded.

        One pass reads the memories without their vectors, then the work goes a document at a
        time (a window's vector is the mean of its turns', as retain makes it, and a window's
        turns are in its document), written every few thousand vectors: memory stays bounded
        by a document, an interrupted reindex keeps what it wrote and the next one goes on from
        there. `self.progress` hears ("embedding", embedded so far, total to embed)."""
        self.prepare(bank)
        embedder = self.embedder_for(bank) if missing else self.embedder
        name = embedder.name
        plans: dict[str, _ReindexPlan] = {}
        hashes: dict[str, str] | None = {} if missing else None
        total = 0
        for memory in self.memories(bank, with_embeddings=False):
            plan = plans.get(memory.document)
            if plan is None:
                plan = plans[memory.document] = _ReindexPlan()
            todo = memory.embedder is None if missing else force or memory.embedder != name
            if memory.kind in ("turn", "line"):
                for record in memory.record_ids:
                    plan.turn_of[record] = (memory.id, not todo)
            if todo:
                total += 1
                if hashes is not None:
                    hashes[memory.id] = memory.content_hash
                if memory.kind == "window":
                    plan.windows.append(memory)
                else:
                    plan.turns.append(memory)
        sink = self.progress
        done = 0
        pending: dict[str, Any] = {}

        def write() -> None:
            nonlocal done
            if pending:
                done += self.store.set_embeddings(bank, pending, name, hashes=hashes)
                pending.clear()
            if sink is not None:
                sink("embedding", done, total)

        for plan in plans.values():
            if not plan.turns and not plan.windows:
                continue
            fresh: dict[str, Any] = {}
            for start in range(0, len(plan.turns), batch):
                part = plan.turns[start : start + batch]
                vectors = embedder.embed_documents([m.text for m in part])
                fresh.update({m.id: vectors[i] for i, m in enumerate(part)})
                pending.update({m.id: vectors[i] for i, m in enumerate(part)})
                if len(pending) >= _REINDEX_WRITE:
                    write()
                elif sink is not None:
                    sink("embedding", done + len(pending), total)
            # Turns whose vectors stand, read only when a window of theirs needs them.
            standing = sorted(
                {
                    plan.turn_of[r][0]
                    for window in plan.windows
                    for r in window.record_ids
                    if r in plan.turn_of and plan.turn_of[r][1]
                }
            )
            kept = (
                {m.id: m.embedding for m in self.store.get_memories(bank, standing)}
                if standing
                else {}
            )
            for window in plan.windows:
                parts = list(dict.fromkeys(plan.turn_of[r][0] for r in window.record_ids
                                           if r in plan.turn_of))  # fmt: skip
                derived = derived_window_vector([fresh.get(p, kept.get(p)) for p in parts])
                if derived is not None:
                    pending[window.id] = derived
                else:
                    pending[window.id] = embedder.embed_documents([window.text])[0]
                if len(pending) >= _REINDEX_WRITE:
                    write()
        write()
        return done
