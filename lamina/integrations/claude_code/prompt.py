"""The memories for one prompt: what UserPromptSubmit injects, computed the same way by a fresh
hook process (the cold path) and by the warm server (lamina.integrations.claude_code.warm).

`answer_prompt` composes the recall query from the prompt and the transcript's last turns,
recalls from the bank leaving out what this session still has in its context, and formats the
`<lamina_memories>` block, writing how long each stage took into `stages` (seconds) as it goes,
so a caller that gives up at its deadline still knows where the time went.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..._fields import field_dict
from ...embed.base import QueryVectors

if TYPE_CHECKING:
    from ...bank.bank import MemoryBank
    from ...bank.plan import RecallPlan
    from ...bank.query import TailQueries
    from ...bank.recall import Floor, RecallHit, RecallOptions, RecallResult
    from ...embed import Embedder
    from ...messages import Message

__all__ = [
    "PromptAnswer",
    "PromptPlan",
    "PromptRequest",
    "answer_of",
    "answer_prompt",
    "last_compaction",
    "plan_prompt",
    "prompt_options",
    "prompt_query",
]


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
    floor_dense: float = 0.0
    floor_coverage: float = 0.0
    """The floor some memory must reach for any to be injected (lamina.bank.recall.Floor);
    either 0: off."""

    def as_json(self) -> dict[str, Any]:
        return field_dict(self)

    @property
    def floor(self) -> Floor | None:
        from ...bank.recall import Floor

        floor = Floor(self.floor_dense, self.floor_coverage)
        return None if floor.off else floor

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
        floors: dict[str, float] = {}
        for key in ("floor_dense", "floor_coverage"):
            value = data.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValueError(f"{key}: expected a number from 0 to 1")
            floors[key] = float(value)
        return cls(
            prompt=texts["prompt"],
            bank=texts["bank"],
            session=texts["session"],
            transcript=texts["transcript"],
            context_turns=numbers["context_turns"],
            max_query_chars=numbers["max_query_chars"],
            budget=numbers["budget"],
            floor_dense=floors["floor_dense"],
            floor_coverage=floors["floor_coverage"],
        )


@dataclass(frozen=True, slots=True)
class PromptAnswer:
    context: str
    """The `<lamina_memories>` block ("" when nothing was found)."""
    memories: int
    lexical_only: bool = False
    """The query was not embedded in time (or the model failed): dense channel left out."""
    bank_found: bool = True
    ids: tuple[str, ...] = ()
    """The injected memories' ids, best first (the hook log keeps them: what was injected)."""
    floor: dict[str, Any] | None = None
    """How the memories measured against the request's floor (`FloorCheck.as_dict`; None
    when it is off): its `reason` says why nothing was injected when they were held back."""
    shown: tuple[dict[str, Any], ...] = ()
    """Each injected memory's id, kind, document, score and tokens (and the memories it
    `replaces`), best first: what the injection log keeps (lamina.integrations.claude_code.
    injections)."""


DENSE_QUERY_CHARS = 512
"""The dense channel embeds the newest 512 characters of a prompt's query (about 128 tokens):
the prompt and the context just before it. The whole 800-character query costs the default
model about 15 ms of CPU to embed, this about 10; the earlier 3-layer model, which read only
128 tokens from the start, often left the prompt itself out."""
_BOUNDARY = b'"compact_boundary"'
_CODEX_BOUNDARY = b'"type":"compacted"'
"""A Codex rollout's compaction record (serde_json writes no spaces)."""
_FINGERPRINT = 64
"""Bytes before a scanned end that must still be there for the scan to count."""
_LONGEST = max(len(_BOUNDARY), len(_CODEX_BOUNDARY))
_CORE = b"compact"
"""What both marks hold: one search for it finds either."""
_MARKS = tuple((mark, mark.index(_CORE)) for mark in (_BOUNDARY, _CODEX_BOUNDARY))


def _last_boundary(data: Any, start: int, end: int) -> int:
    """Where the last compaction record's mark in `data[start:end]` begins (-1: none): the last
    `compact` that is part of a mark, searched from the end back (one pass for both marks, the
    bytes read those after the last compaction; all of them for a session never compacted)."""
    high = end
    while (at := data.rfind(_CORE, start, high)) >= 0:
        for mark, offset in _MARKS:
            begin = at - offset
            if (
                begin >= start
                and begin + len(mark) <= end
                and data[begin : begin + len(mark)] == mark
            ):
                return int(begin)
        high = at + len(_CORE) - 1  # the next `compact` before this one
    return -1


@dataclass(frozen=True, slots=True)
class _Scanned:
    file: tuple[int, int]
    size: int
    fingerprint: bytes
    found: datetime | None


_scanned: OrderedDict[str, _Scanned] = OrderedDict()
_scanned_lock = threading.Lock()


def last_compaction(transcript: str) -> datetime | None:
    """When the session was last compacted (the timestamp of its last compact_boundary, or of
    a Codex rollout's last `compacted` record), found from the end of the file back to that
    record; None when it never was. A file scanned before in this process (the warm server's
    case: once a prompt) and only appended to since is scanned from where that scan ended."""
    import mmap

    from ...bank.query import only_appended

    try:
        with Path(transcript).open("rb") as handle:
            info = os.fstat(handle.fileno())
            file, size = (info.st_dev, info.st_ino), info.st_size
            with _scanned_lock:
                held = _scanned.get(transcript)
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                start = 0
                if held is not None and only_appended(
                    handle, file, size, held.file, held.size, held.fingerprint
                ):
                    start = max(0, held.size - _LONGEST + 1)
                at = _last_boundary(data, start, size)
                if at < 0:
                    found = held.found if start and held is not None else None
                else:
                    line = data.rfind(b"\n", 0, at) + 1
                    end = data.find(b"\n", at)
                    record = orjson.loads(data[line : end if end >= 0 else len(data)])
                    found = None
                    if isinstance(record, dict):
                        from ...messages import parse_timestamp

                        found = parse_timestamp(record.get("timestamp"))
                fingerprint = data[max(0, size - _FINGERPRINT) : size]
    except (OSError, ValueError):  # a record still being written is read again next time
        return None
    with _scanned_lock:
        _scanned[transcript] = _Scanned(file, size, fingerprint, found)
        _scanned.move_to_end(transcript)
        while len(_scanned) > 64:
            _scanned.popitem(last=False)
    return found


class _Ahead(QueryVectors):
    """Queries embedded in the background, and the embedder that hands their vectors to the
    recalls asking for those texts (instead of embedding them a second time)."""

    def __init__(self, embedder: Embedder, texts: Sequence[str]) -> None:
        super().__init__(embedder)
        self.texts = tuple(dict.fromkeys(texts))
        self.ready = threading.Event()


def _embed_in_background(embedder: Embedder, texts: Sequence[str]) -> _Ahead:
    """Embed `texts` in a thread of its own (loading the model on first use); `ready` is set
    when all are done, and only if they succeeded. The thread is a daemon: one still inside
    the model when the hook leaves is never joined."""
    ahead = _Ahead(embedder, texts)

    def embed() -> None:
        try:
            for text in ahead.texts:
                ahead.vectors[text] = embedder.embed_query(text)
        except Exception:
            return
        ahead.ready.set()

    threading.Thread(target=embed, name="lamina-embed", daemon=True).start()
    return ahead


def prompt_options(
    request: PromptRequest,
    embedder: str,
    exclude: dict[str, datetime | None] | None = None,
    time_text: str | None = None,
) -> RecallOptions:
    """The recall options of a prompt's recall: framed as a memory block within the request's
    budget, its floor, the fusion fitted for the bank's `embedder`, the newest
    DENSE_QUERY_CHARS embedded, `exclude`d documents left out, `time_text` (the prompt's
    own words) framing the time channel. `lamina bench quiet` recalls with these too."""
    from ...bank.fusion import model_for
    from ...bank.recall import RecallOptions

    return RecallOptions(
        budget=request.budget,
        exclude=exclude or {},
        time_text=time_text,
        framed=True,
        model=model_for(embedder),
        dense_chars=DENSE_QUERY_CHARS,
        floor=request.floor,
    )


def _shown(hit: RecallHit) -> dict[str, Any]:
    memory = hit.memory
    out: dict[str, Any] = {
        "id": memory.id,
        "kind": memory.kind,
        "document": memory.document,
        "score": round(hit.score, 4),
        "tokens": hit.tokens,
    }
    if hit.correction and hit.correction.get("replaces"):
        out["replaces"] = list(hit.correction["replaces"])
    return out


def answer_of(result: RecallResult, lexical_only: bool = False) -> PromptAnswer:
    """What the prompt hook injects for `result`: its `<lamina_memories>` block, clamped
    under Claude Code's 10,000-character limit (it moves a longer context to a file), the
    lowest-ranked memories dropped first. The web inspector's recall preview shows this too."""
    from .contract import clamped

    block, shown = clamped(result)
    ids = tuple(hit.memory.id for hit in result.hits[:shown])
    floor = result.floor.as_dict() if result.floor is not None else None
    details = tuple(_shown(hit) for hit in result.hits[:shown])
    return PromptAnswer(
        block, shown, lexical_only=lexical_only, ids=ids, floor=floor, shown=details
    )


def prompt_query(
    request: PromptRequest, messages: Sequence[Message] | None = None
) -> tuple[str, str | None]:
    """The recall query of `request`'s prompt and the text whose time words count (None: the
    whole query): composed from the prompt and the last turns of `messages` (a transcript, as
    read), or, without a transcript, the prompt alone."""
    from ...bank.query import QueryOptions, compose_recall_query
    from ...turns import clean_text

    if messages is None:
        return clean_text(request.prompt)[: request.max_query_chars], None
    shape = QueryOptions(context_turns=request.context_turns, max_chars=request.max_query_chars)
    composed = compose_recall_query(messages, request.prompt, shape)
    return composed.query, composed.prompt


def plan_prompt(
    memory_bank: MemoryBank,
    request: PromptRequest,
    query: str,
    time_text: str | None,
    exclude: dict[str, datetime | None] | None = None,
    model: Embedder | None = None,
    *,
    documents: frozenset[str] | None = None,
    judge_alone: bool = True,
) -> PromptPlan:
    """The recall of a prompt's composed `query` as the hook makes it (`prompt_options`), with
    the bank's marks (a memory marked wrong is never injected); `model`: the bank's embedder;
    `documents`: only these. Mid-session the query carries the last turns, which match the
    bank whatever the prompt asks: the floor judges the prompt alone, as if it opened a session
    (what `lamina bench quiet` measures), and the query with its turns chooses what fills
    (`judge_alone`; False: the floor judges the query, as Lamina did before)."""
    from ...turns import clean_text

    model = model or memory_bank.embedder_for(request.bank)
    options = replace(prompt_options(request, model.name, exclude, time_text), documents=documents)
    alone_query = clean_text(request.prompt)[: request.max_query_chars]
    alone = None
    if judge_alone and options.floor is not None and alone_query and query != alone_query:
        alone_options = replace(prompt_options(request, model.name, exclude), documents=documents)
        alone = memory_bank.plan(alone_query, request.bank, alone_options, model)
        options = replace(options, floor=None)
    return PromptPlan(memory_bank.plan(query, request.bank, options, model), alone)


class PromptPlan:
    """A prompt's recall (`plan_prompt`): the plan of its composed query and, when that query
    carries turns before the prompt, the plan of the prompt alone, which the floor judges."""

    def __init__(self, plan: RecallPlan, alone: RecallPlan | None) -> None:
        self.plan, self.alone = plan, alone

    @property
    def dense_texts(self) -> tuple[str, ...]:
        """What the dense channel embeds (for a caller that embeds it ahead)."""
        return (self.plan.dense_text,) + ((self.alone.dense_text,) if self.alone else ())

    def recall(self, embedder: Embedder | None) -> RecallResult:
        """The recall, with the dense channel when given an `embedder`; a lexical-only one is
        not judged (see `lamina.bank.recall.Floor`)."""
        result = self.plan.recall(embedder)
        if self.alone is None or embedder is None:
            return result
        judged = self.alone.judge(embedder, self.plan.pool)
        if judged is None:
            return result
        held = 0 if judged.passed else len(result.hits)
        hits = result.hits if judged.passed else []
        return replace(result, hits=hits, floor=replace(judged, held_back=held))


def answer_prompt(
    memory_bank: MemoryBank,
    request: PromptRequest,
    stages: dict[str, float],
    *,
    dense_until: float | None = None,
    early: Callable[[PromptAnswer], None] | None = None,
    queries: TailQueries | None = None,
    judge_alone: bool = True,
) -> PromptAnswer:
    """Recall for one prompt.

    Without `dense_until` the embedder is used as it is (the warm server holds a loaded model).
    With it (a time.monotonic() instant; the cold path), the query is embedded in the
    background while a lexical-only answer is computed and handed to `early`; then, if the
    embedding is ready by `dense_until`, the full answer is computed and returned, else the
    lexical one. A caller whose deadline passes meanwhile still has the early answer.
    `queries` (the warm server's) composes the query from what it kept of the transcript,
    reading only what was appended since; the same query either way. The floor judges the
    prompt alone (`judge_alone`; False: the query with its last turns, as Lamina did before,
    which `lamina bench quiet` measures against)."""
    from ...bank.query import QueryOptions, recall_query_for_file

    mark = time.monotonic()
    if memory_bank.store.get_bank(request.bank) is None:
        stages["open_store"] = stages.get("open_store", 0.0) + time.monotonic() - mark
        return PromptAnswer("", 0, bank_found=False)
    now = time.monotonic()
    stages["open_store"] = stages.get("open_store", 0.0) + now - mark
    mark = now
    shape = QueryOptions(context_turns=request.context_turns, max_chars=request.max_query_chars)
    time_text: str | None = None  # the query's own time words: only the prompt's count
    if request.transcript and Path(request.transcript).is_file():
        if queries is not None:
            composed = queries.query(request.transcript, request.prompt, shape)
        else:
            composed = recall_query_for_file(request.transcript, request.prompt, shape)
        query, time_text = composed.query, composed.prompt
        compacted = last_compaction(request.transcript)
    else:
        query, time_text = prompt_query(request)
        compacted = None
    exclude = {request.session: compacted} if request.session else {}
    model = memory_bank.embedder_for(request.bank)
    # One plan: the cold path recalls twice (lexical only, then with the dense channel), the
    # second asking the store only for what the first did not (lamina.bank.plan).
    plan = plan_prompt(
        memory_bank, request, query, time_text, exclude, model, judge_alone=judge_alone
    )
    now = time.monotonic()
    stages["query"] = now - mark
    mark = now

    def recall(embedder: Embedder | None) -> PromptAnswer:
        return answer_of(plan.recall(embedder), lexical_only=embedder is None)

    embedder: Embedder = model
    if dense_until is not None:
        # The texts the dense channel will embed: the recalls below are then handed their
        # vectors.
        embedder = ahead = _embed_in_background(model, plan.dense_texts)
        lexical = recall(None)
        if early is not None:
            early(lexical)
        now = time.monotonic()
        stages["lexical"] = now - mark
        mark = now
        if not ahead.ready.wait(max(0.0, dense_until - time.monotonic())):
            stages["embedding"] = time.monotonic() - mark
            return lexical
        now = time.monotonic()
        stages["embedding"] = now - mark
        mark = now
    answer = recall(embedder)
    stages["search"] = time.monotonic() - mark
    return answer
