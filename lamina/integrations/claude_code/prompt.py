"""The memories for one prompt: what UserPromptSubmit injects, computed the same way by a fresh
hook process (the cold path) and by the warm server (lamina.integrations.claude_code.warm).

`answer_prompt` composes the recall query from the prompt and the transcript's last turns,
recalls from the bank leaving out what this session still has in its context, and formats the
`<lamina_memories>` block, writing how long each stage took into `stages` (seconds) as it goes,
so a caller that gives up at its deadline still knows where the time went.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ...bank.bank import MemoryBank

__all__ = ["PromptAnswer", "PromptRequest", "answer_prompt", "last_compaction"]


@dataclass(frozen=True, slots=True)
class PromptRequest:
    """One UserPromptSubmit, as the hook read it (the bank already resolved)."""

    prompt: str
    bank: str
    session: str = ""
    transcript: str = ""
    context_turns: int = 3
    max_query_chars: int = 800
    budget: int = 1024

    def as_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "bank": self.bank,
            "session": self.session,
            "transcript": self.transcript,
            "context_turns": self.context_turns,
            "max_query_chars": self.max_query_chars,
            "budget": self.budget,
        }

    @classmethod
    def from_json(cls, data: object) -> PromptRequest:
        """Checked field by field: raises ValueError naming the first bad field."""
        if not isinstance(data, dict):
            raise ValueError("the request is not a JSON object")
        texts: dict[str, str] = {}
        for key in ("prompt", "bank", "session", "transcript"):
            value = data.get(key, "")
            if not isinstance(value, str) or len(value) > 1_000_000:
                raise ValueError(f"{key}: expected a string")
            texts[key] = value
        if not texts["bank"]:
            raise ValueError("bank: missing")
        numbers: dict[str, int] = {}
        for key, default, top in (
            ("context_turns", 3, 100),
            ("max_query_chars", 800, 100_000),
            ("budget", 1024, 1_000_000),
        ):
            value = data.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise ValueError(f"{key}: expected a whole number from 0 to {top}")
            numbers[key] = value
        return cls(
            prompt=texts["prompt"],
            bank=texts["bank"],
            session=texts["session"],
            transcript=texts["transcript"],
            context_turns=numbers["context_turns"],
            max_query_chars=numbers["max_query_chars"],
            budget=numbers["budget"],
        )


@dataclass(frozen=True, slots=True)
class PromptAnswer:
    context: str
    """The `<lamina_memories>` block ("" when nothing was found)."""
    memories: int
    lexical_only: bool = False
    """The query was not embedded in time (or the model failed): dense channel left out."""
    bank_found: bool = True


def last_compaction(transcript: str) -> datetime | None:
    """When the session was last compacted (the timestamp of its last compact_boundary),
    found from the end of the file without reading it all; None when it never was."""
    import mmap

    try:
        with (
            Path(transcript).open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            at = data.rfind(b'"compact_boundary"')
            if at < 0:
                return None
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            record = orjson.loads(data[start : end if end >= 0 else len(data)])
    except (OSError, ValueError):
        return None
    from ...messages import parse_timestamp

    return parse_timestamp(record.get("timestamp")) if isinstance(record, dict) else None


def _warm_up_embedding(memory_bank: MemoryBank, query: str, until: float) -> bool:
    """Embed the query in a thread of its own (loading the model on first use) and wait for it
    until `until` (time.monotonic()); True when the model answered in time. The thread is a
    daemon: one still inside the model when the hook leaves is never joined."""
    done = threading.Event()
    failed: list[BaseException] = []

    def embed() -> None:
        try:
            memory_bank.embedder.embed_query(query)
        except BaseException as exc:  # the dense channel is dropped, the answer is not
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=embed, name="lamina-embed", daemon=True).start()
    return done.wait(max(0.0, until - time.monotonic())) and not failed


def answer_prompt(
    memory_bank: MemoryBank,
    request: PromptRequest,
    stages: dict[str, float],
    *,
    dense_until: float | None = None,
) -> PromptAnswer:
    """Recall for one prompt. With `dense_until` (a time.monotonic() instant) the query's
    embedding must be ready by then, else the answer is lexical only; without it the embedder
    is used as it is (the warm server holds a loaded model)."""
    from ...bank.query import QueryOptions, recall_query_for_file
    from ...bank.recall import RecallOptions
    from ...turns import clean_text

    mark = time.monotonic()
    if memory_bank.store.get_bank(request.bank) is None:
        stages["open_store"] = stages.get("open_store", 0.0) + time.monotonic() - mark
        return PromptAnswer("", 0, bank_found=False)
    now = time.monotonic()
    stages["open_store"] = stages.get("open_store", 0.0) + now - mark
    mark = now
    options = QueryOptions(context_turns=request.context_turns, max_chars=request.max_query_chars)
    if request.transcript and Path(request.transcript).is_file():
        query = recall_query_for_file(request.transcript, request.prompt, options).query
        compacted = last_compaction(request.transcript)
    else:
        query = clean_text(request.prompt)[: request.max_query_chars]
        compacted = None
    now = time.monotonic()
    stages["query"] = now - mark
    mark = now
    dense = True
    if dense_until is not None:
        dense = _warm_up_embedding(memory_bank, query, dense_until)
        now = time.monotonic()
        stages["embedding"] = now - mark
        mark = now
    exclude = {request.session: compacted} if request.session else {}
    result = memory_bank.recall(
        query, request.bank, RecallOptions(budget=request.budget, exclude=exclude), dense=dense
    )
    now = time.monotonic()
    stages["search"] = now - mark
    mark = now
    context = result.block() if result.hits else ""
    stages["format"] = time.monotonic() - mark
    return PromptAnswer(context, len(result.hits), lexical_only=not dense)
