"""The short Python API: open a store, take a bank by name, retain and recall.

    import lamina

    with lamina.open() as store:                  # the data directory, a path, or a URL
        bank = store.bank("notes")
        bank.retain_text("We chose SQLite for the embedded default.", document="decisions")
        bank.retain_messages([{"role": "user", "content": "Which port? 8080, say."}])
        for hit in bank.recall("which database?", budget=500):
            print(hit.score, hit.text)              # relevance 0..1, best first

`MemoryStore` and `BankHandle` are thin: each call is one call of `MemoryBank` (the full API,
`store.memory_bank`), with the bank's name filled in and reads of a bank that does not exist
raising `NotFoundError`, as the command line exits 2 for them. A bank exists once something
is retained into it; taking a handle (`store.bank(name)`) reads and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._closing import Closing
from .bank.bank import MemoryBank
from .bank.recall import RecallOptions, RecallResult
from .errors import InputError, NotFoundError
from .store.lookup import check_bank_name

if TYPE_CHECKING:
    from .bank.retain import RetainReport
    from .embed import Embedder
    from .memories import BankStats, Document

__all__ = ["BankHandle", "MemoryStore", "open"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open(where: str | Path | None = None, *, embedder: Embedder | None = None) -> MemoryStore:
    """Open the memory store `where` names (created on first write); close it with `close()`
    or a `with` block.

        with lamina.open() as store: ...                      # the configured one
        with lamina.open("~/notes-memory") as store: ...      # a data directory
        with lamina.open("postgresql://localhost/lamina") as store: ...

    `where` is a database URL (`postgresql://...`, `sqlite:///path`), a SQLite file (a path
    ending in .db, .sqlite or .sqlite3, or an existing file), or a data directory (its
    `lamina.db`). None: the configured database ($LAMINA_DATABASE_URL, the config file, else
    the data directory, $LAMINA_HOME or `~/.local/share/lamina`). `embedder`: the `Embedder`
    to use instead of the configured or bundled one."""
    if where is None:
        return MemoryStore(MemoryBank.open(embedder=embedder))
    text = str(where)
    if "://" in text or text.startswith("sqlite:"):
        return MemoryStore(MemoryBank.open(database_url=text, embedder=embedder))
    path = Path(where).expanduser()
    if path.suffix in _SQLITE_SUFFIXES or path.is_file():
        return MemoryStore(MemoryBank.open(database_url=str(path), embedder=embedder))
    from .config import DATABASE_NAME

    target = str(path / DATABASE_NAME)
    return MemoryStore(MemoryBank.open(database_url=target, embedder=embedder))


class MemoryStore(Closing):
    """An open memory store: its banks by name (`bank`, `banks`), closed by `close()` or at
    the end of a `with` block.

        with lamina.open() as store:
            notes = store.bank("notes")
            print([bank.name for bank in store.banks()])

    `lamina.open()` makes one; `MemoryStore(memory_bank)` wraps a `MemoryBank` of your own
    (which it then closes)."""

    def __init__(self, memory_bank: MemoryBank) -> None:
        self.memory_bank = memory_bank
        """The full API over the same store (`MemoryBank`): every call takes a bank's name."""

    def bank(self, name: str) -> BankHandle:
        """The bank called `name`, to retain into and recall from; nothing is read or written
        until then. `InputError` for a name no bank can have (empty, over 200 characters, a
        slash or a control character)."""
        return BankHandle(self.memory_bank, check_bank_name(name))

    def banks(self) -> list[BankHandle]:
        """Every bank that holds something, by name."""
        return [BankHandle(self.memory_bank, b.name) for b in self.memory_bank.banks()]

    def close(self) -> None:
        """Close the store's database connection; the store and its banks are unusable after."""
        self.memory_bank.close()

    def __repr__(self) -> str:
        return f"<lamina.MemoryStore {self.memory_bank.store!r}>"


class BankHandle:
    """One bank of a `MemoryStore`, by name: retain into it, recall from it, list and forget
    what it holds.

        bank = store.bank("notes")
        bank.retain_text("The staging server is called ash.")
        hit = next(iter(bank.recall("staging server name")))
        print(hit.score, hit.text, hit.memory.document)

    Writing creates the bank; reading one that does not exist (`recall`, `documents`, `stats`,
    `forget`) raises `NotFoundError`."""

    def __init__(self, memory_bank: MemoryBank, name: str) -> None:
        self.memory_bank = memory_bank
        self.name = name

    def __repr__(self) -> str:
        return f"<lamina.BankHandle {self.name!r}>"

    def _existing(self) -> str:
        return self.memory_bank.require_bank(self.name)

    # -- writing -------------------------------------------------------------------------------
    def retain_text(
        self,
        text: str,
        *,
        document: str = "notes",
        speaker: str | None = None,
        tags: Sequence[str] = (),
    ) -> RetainReport:
        """Remember a note (a decision, a preference, a fact) in `document`; the same text in
        the same document is stored once. `speaker`: who said or decided it. `InputError` for
        an empty text."""
        return self.memory_bank.retain_text(text, self.name, document, speaker=speaker, tags=tags)

    def retain_messages(
        self,
        messages: Iterable[Any] | Mapping[str, Any],
        *,
        document: str = "conversation",
        format: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> RetainReport:
        """Remember a conversation as the document `document` (give each conversation its
        own, e.g. its chat id). `messages`: plain dicts in the OpenAI or Anthropic shape, SDK
        message objects, or `lamina.Message`s; `format` ("openai", "anthropic") is detected
        when None. Pass the whole conversation after every turn: what was retained before is
        skipped (a message without an id is known by its content). `InputError` when no
        message is given or none can be read; the report's `warnings` name any that could
        not."""
        given = list(messages) if not isinstance(messages, Mapping) else messages
        if not given:
            raise InputError("no messages given")
        return self.memory_bank.retain_messages(
            given, self.name, document, format=format, tags=tags, metadata=metadata
        )

    def retain_file(
        self,
        path: str | Path,
        *,
        document: str | None = None,
        format: str | None = None,
        tags: Sequence[str] = (),
    ) -> RetainReport:
        """Remember a transcript file (a Claude Code session, an OpenAI or Anthropic message
        list, LoCoMo); only what is new since its last retain is read. `document` defaults to
        the session's id or the file's name, `format` is detected when None."""
        return self.memory_bank.retain_file(
            path, self.name, document=document, format=format, tags=tags
        )

    # -- reading -------------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        budget: int = 1024,
        limit: int = 50,
        documents: Iterable[str] | None = None,
        options: RecallOptions | None = None,
    ) -> RecallResult:
        """The memories that best answer `query` within `budget` tokens, best first: iterate
        the result for its hits (`hit.score`, relevance from 0 to 1; `hit.text`;
        `hit.memory` for its document and time), or `result.block()` for a prompt.

        `documents`: only these documents. `options` (a `RecallOptions`) sets everything else
        (tags, a time range, the fusion) and then wins over `budget`, `limit` and `documents`.
        `NotFoundError` when the bank does not exist."""
        if options is None:
            chosen = frozenset(documents) if documents is not None else None
            options = RecallOptions(budget=budget, limit=limit, documents=chosen)
        return self.memory_bank.recall(query, self._existing(), options)

    def documents(self) -> list[Document]:
        """What the bank holds, one `Document` per retained source (`id`, `source`,
        `updated_at`, ...). `NotFoundError` when the bank does not exist."""
        return self.memory_bank.documents(self._existing())

    def stats(self) -> BankStats:
        """How much the bank holds: documents, memories, records, their time span.
        `NotFoundError` when the bank does not exist."""
        return self.memory_bank.stats(self._existing())

    def forget(
        self,
        document: str | None = None,
        *,
        memory: str | None = None,
        before: datetime | None = None,
        everything: bool = False,
    ) -> int:
        """Forget one of: a `document` (its memories and records), a `memory` (by id), what
        happened `before` a time (undated memories stay), or with `everything=True` the whole
        bank. Returns how many memories went. `NotFoundError` when the bank, the document or
        the memory does not exist; `InputError` unless exactly one is given."""
        chosen = [document is not None, memory is not None, before is not None, everything]
        if sum(chosen) != 1:
            raise InputError("forget: give one of document, memory, before or everything=True")
        name = self._existing()
        bank = self.memory_bank
        if document is not None:
            return bank.forget_document(name, bank.require_document(name, document))
        if memory is not None:
            if not bank.forget_memory(name, memory):
                raise NotFoundError(
                    f"no memory {memory!r} in bank {name!r}", what="memory", name=memory
                )
            return 1
        if before is not None:
            return bank.forget_before(name, before)
        held = bank.stats(name).memories
        bank.delete_bank(name)
        return held
