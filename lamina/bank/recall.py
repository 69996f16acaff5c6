"""Recall: what a caller asks for and what it gets back, and how a query is read.

Channels rank the bank's memories independently: **dense** (cosine between the query's and the
memories' vectors; the query embedded with the names most memories say, a conversation's
participants, as "they": see `without_common`), **lexical** (BM25), when the query names a time
("last May", "two weeks ago", "in 2023"), **time** (closeness to that time, resolved against
`RecallOptions.now`), and when it names entities (lamina.text.entities: names, identifiers,
paths), **entities** (BM25 of the entities query and memory share, each entity one term). The
store runs each channel's search (lamina.bank.plan); their scores are fused and the budget
filled (lamina.bank.assemble): by default by a calibrated logistic model (lamina.bank.fusion:
the channels' min-max normalised scores, the entity channel's divided by `entity_scale`
instead, and for the best candidates the memory's kind, length and whether its speaker is the
participant the query names), or by CombSUM or weighted reciprocal-rank fusion on request.
Near-duplicates collapse (a result most of whose records better results already show is
dropped), and the budget is filled in rank order; a result part of which better results
already show comes back without the lines they show. Every result carries its score and, per
channel, its rank and raw score, so a user can see why it was recalled.

This module holds the options and results, and the reading of a query every channel shares.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .corrections import Corrections
    from .expand import Expansion
    from .fusion import FusionModel
else:
    from .._lazy import numpy as np

from ..memories import Memory
from ..store.search import SearchFilter
from ..tags import format_memory_block
from ..text.entities import ENTITY_PREFIX, extract_entities
from ..text.lexical import tokenize
from ..text.when import TimeRange, resolve_time_expressions

__all__ = [
    "Floor",
    "FloorCheck",
    "RecallHit",
    "RecallOptions",
    "RecallResult",
]


ENTITY_WEIGHT = 1.0
"""The entity channel's weight in the default fusion: the same as every other channel's. On
LoCoMo (`lamina bench locomo`), any@10 / all@10 0.808 / 0.693 against 0.807 / 0.691 without
the channel (0.5 gives the same at 10 and one question more at 5; names there are mostly the
speakers', which every memory shares); on code sessions an identifier named in the query
finds the memory naming it where its words alone do not."""


@dataclass(frozen=True, slots=True)
class Floor:
    """What at least one returned memory must reach for a recall to return anything: a raw
    dense score (the cosine of its vector with the query's) of `dense`, or a lexical coverage
    (the share of the query's terms it holds, each weighted by its idf in the bank) of
    `coverage`; a memory the time channel found (the query names a time it was said near)
    reaches it too. Below it, nothing the bank holds answers the query ("write a haiku about
    autumn"), and the least bad memories are noise in a prompt. Either threshold 0: off.

    Judged only with the dense channel: a lexical-only recall (the hook's answer when the
    model is not ready in time) returns its memories as without a floor, since coverage alone
    tells the two apart badly (it would silence three in four questions about the project).

    The defaults, chosen on the dev sets with the default model (`lamina bench quiet`, with
    and without `--per-session`): 86-96% of off-topic prompts silenced, questions about the
    project answered 0-4.2 points less often (85.1% to 84.2% on the claude-code sessions in
    one bank, 58.3% to 54.2% on the entire-dev sessions a bank each). Coverage anywhere from
    0.45 to 0.6 gives the same; a dense floor of 0.26 silences 82-95% for at most 2.6 points,
    0.30 86-98% for up to 5.3. The dense threshold is in the default model's (minilm-l6)
    cosines."""

    dense: float = 0.28
    coverage: float = 0.5

    @property
    def off(self) -> bool:
        return self.dense <= 0 or self.coverage <= 0


@dataclass(frozen=True, slots=True)
class FloorCheck:
    """How a recall's memories measured against `RecallOptions.floor`, and whether it held
    them back (it returns no memories then, and says why here)."""

    floor: Floor
    dense: float | None
    """The best raw dense score among the memories (None: the dense channel was not used)."""
    coverage: float
    """The best lexical coverage among the memories (0 without any)."""
    dated: bool
    """A memory was found by the time channel."""
    held_back: int
    """Memories the recall would have returned and did not (0 when it passed)."""

    @property
    def passed(self) -> bool:
        return self.held_back == 0

    def reason(self) -> str:
        """One line: why the memories were held back (or that they were not)."""
        if self.dense is None:
            return "floor not applied: no dense score (a lexical-only recall)"
        measured = f"best dense {self.dense:.2f}, best term coverage {self.coverage:.2f}"
        if self.passed:
            return f"above the floor ({'found by time, ' if self.dated else ''}{measured})"
        return (
            f"nothing reaches the floor ({measured}; floor dense {self.floor.dense:g} or "
            f"coverage {self.floor.coverage:g}): {self.held_back} memories held back"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "dense": None if self.dense is None else round(self.dense, 4),
            "coverage": round(self.coverage, 4),
            "dated": self.dated,
            "held_back": self.held_back,
            "floor": {"dense": self.floor.dense, "coverage": self.floor.coverage},
            "reason": self.reason(),
        }


@dataclass(frozen=True, slots=True)
class RecallOptions(SearchFilter):
    """How to recall: which memories may be returned (the fields of `SearchFilter`: documents,
    tags, kinds, since, until, exclude) and how they are ranked and fitted."""

    budget: int = 1_024
    """Tokens the returned memories may take (their text, counted with lamina.tokens)."""
    limit: int = 50
    """At most this many results, whatever the budget."""
    now: datetime | None = None
    """Reference time for relative expressions ("last May", "two weeks ago"); default: now."""
    time_text: str | None = None
    """The text whose time expressions drive the time channel; None: the whole query. A query
    composed from a prompt and the turns before it passes the prompt, so a date quoted earlier
    in the conversation ("I restored one last year") does not stand for the question's own."""
    channel_weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "dense": 1.0,
            "lexical": 1.0,
            "time": 1.0,
            "entities": ENTITY_WEIGHT,
        }
    )
    """A channel's weight in the fusion; a channel left out weighs 0 (and the entity channel,
    then, is not computed)."""
    fusion: str = "learned"
    """`learned`: the calibrated model (lamina.bank.fusion; `model`), fitted on synthetic
    questions: on LoCoMo any@10 / all@10 0.846 / 0.724, better on both halves than `combsum`
    (0.822 / 0.700): each channel's scores min-max normalised over the candidates, weighted
    (`channel_weights`) and added; `rrf`: weighted reciprocal-rank fusion (0.813 / 0.683).
    With `learned`, `channel_weights` only says which channels count (weight above 0)."""
    model: FusionModel | None = None
    """The `learned` fusion's coefficients; None: the ones shipped for the embedder that made
    the bank's vectors (`lamina.bank.fusion.model_for`; lamina/data/fusion*.json)."""
    rrf_k: int = 60
    depth: int = 200
    """How deep each channel's ranking goes into the fusion."""
    framed: bool = False
    """The results will be shown as a memory block (`RecallResult.block`): the block's own
    tokens and each result's bullet and date count against the budget with the texts, so the
    block as a whole fits it (the hook's `budget` is what the prompt grows by)."""
    spread: bool = True
    """For a question asking for several things ("what books has Tim read?", "how many
    times...", `LIST_QUESTION`), the first `SPREAD_RESULTS` results are spread over episodes
    (see `spread`), with the learned fusion only: on LoCoMo all@10 0.724 to 0.730 (multi-hop
    0.218 to 0.254), better on both halves, nothing lower within 1,000 tokens. Windows then
    also get the model's `list_window` weight (lamina.bank.fusion.ADJUSTMENTS): the several
    things are said in separate lines, and a window spends the top results on its context."""
    dense_chars: int | None = None
    """The dense channel embeds at most the last this many characters of the query (from a
    word's start); None: all of it, up to the model's token limit. For a query composed of the
    turns before a prompt and then the prompt (the hook's): the prompt and the newest context
    are embedded, and a query costs the embedding of about 128 tokens, not 256."""
    collapse: bool = True
    """Drop a result when more than half of its records are already in better results (a
    window that repeats a turn shown above, say), and leave out of a result the lines better
    results already show: on LoCoMo, evidence found within 1,000 tokens any / all 0.893 /
    0.780 without, 0.904 / 0.800 with (better on both halves; `lamina bench locomo`)."""
    floor: Floor | None = None
    """Return nothing unless some memory reaches this floor (see `Floor`; the result's
    `floor` says how they measured). None: off, the best memories return however weak they
    are. The prompt hook sets it (lamina.integrations.claude_code: `[hook] floor`)."""
    corrections: Corrections | None = None
    """The bank's marks (lamina.bank.corrections): a memory marked wrong is left out, one
    superseded yields to its replacement. `MemoryBank.recall` reads them when this is None."""
    show_wrong: bool = False
    """Return the memories marked wrong too, after every other result, each with its mark."""


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory: its text (`text`, or shortened to fit: `shortened`), its relevance
    (`score`), and per search channel its rank and raw score (`channels`)."""

    memory: Memory
    score: float
    """Relevance from 0 to 1, higher is better, never higher than the result's above it
    (lamina.bank.relevance): what every surface shows."""
    channels: Mapping[str, Mapping[str, float]]
    tokens: int
    shortened: bool = False
    """The memory's text was cut to its best part around the query to fit the budget."""
    fused: float = 0.0
    """The fused score recall ranked by (with the learned fusion, the model's log-odds),
    before it became `score`."""
    correction: Mapping[str, Any] | None = None
    """Its mark (`state` wrong, with `show_wrong`), or the memories it `replaces`."""

    @property
    def text(self) -> str:
        return self.memory.text

    @property
    def time(self) -> datetime | None:
        return self.memory.time

    def as_dict(self) -> dict[str, Any]:
        m = self.memory
        return {
            "id": m.id,
            "text": m.text,
            "score": round(self.score, 6),
            "time": m.time.isoformat() if m.time else None,
            "document": m.document,
            "kind": m.kind,
            "source": {
                "first_record": m.first_record,
                "last_record": m.last_record,
                "first_line": m.first_line,
                "last_line": m.last_line,
                "records": len(m.record_ids),
            },
            "speakers": list(m.speakers),
            "tokens": self.tokens,
            "shortened": self.shortened,
            "channels": {k: dict(v) for k, v in self.channels.items()},
            **({"correction": dict(self.correction)} if self.correction else {}),
        }


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What a recall found: its hits, best first (iterating the result gives them), how many
    memories it considered, their tokens together, and `block()` for a prompt."""

    query: str
    hits: list[RecallHit]
    considered: int
    tokens: int
    expansion: Expansion | None = None
    """What a query expander added to the query (`MemoryBank.recall(..., expander=...)`)."""
    floor: FloorCheck | None = None
    """How the memories measured against `RecallOptions.floor`, when one was set."""
    awaiting_vectors: int | None = None
    """Memories of the bank without a vector yet, found by their words only (told by
    `MemoryBank.recall`; None where not asked)."""

    def __iter__(self) -> Iterator[RecallHit]:
        """The hits, best first: `for hit in bank.recall(...)`."""
        return iter(self.hits)

    def block(self, now: datetime | None = None) -> str:
        """The hits as a `<lamina_memories>` block for a prompt."""
        return format_memory_block(self.hits, now=now)

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "results": [h.as_dict() for h in self.hits],
            "considered": self.considered,
            "tokens": self.tokens,
            **({"expansion": self.expansion.as_dict()} if self.expansion is not None else {}),
            **({"floor": self.floor.as_dict()} if self.floor is not None else {}),
            **(
                {"awaiting_vectors": self.awaiting_vectors}
                if self.awaiting_vectors is not None
                else {}
            ),
        }


def search_filter(options: RecallOptions) -> SearchFilter:
    """The fields of `options` that filter which memories recall may return."""
    return SearchFilter(**{f.name: getattr(options, f.name) for f in fields(SearchFilter)})


def entity_scale(size: int) -> float:
    """What one shared entity named by a single memory scores (BM25 at average length): the
    entity channel's scores are divided by this rather than min-max normalised, so that
    sharing only common entities (a speaker's name, said in most memories) adds little."""
    return math.log(1 + (size - 0.5) / 1.5) if size > 1 else 1.0


COMMON_ENTITY_SHARE = 0.05
"""A query entity named by more than this share of the bank's memories (and by more than
COMMON_ENTITY_FLOOR of them) is left out of the entity channel: it tells few memories apart
(a speaker's name, said in most memories of a conversation) and, on a large bank, reading
every memory that names it costs more than the rest of the recall."""
COMMON_ENTITY_FLOOR = 50


def weighs(options: RecallOptions, channel: str) -> bool:
    """Whether `channel` weighs in the fusion. A channel that does not is not searched at all:
    it costs nothing, and its candidates do not reach the fusion through another channel (the
    time channel scores every candidate the others propose)."""
    return options.channel_weights.get(channel, 0.0) > 0


def query_entities(query: str, options: RecallOptions) -> tuple[str, ...]:
    """The query's entities, when the entity channel counts."""
    if not weighs(options, "entities"):
        return ()
    return extract_entities(query)


def distinctive(entities: Sequence[str], df: Callable[[str], int], size: int) -> tuple[str, ...]:
    """The entities some memory names and not too many do (see COMMON_ENTITY_SHARE); `df`
    gives how many memories hold an entity term, `size` the bank's memories."""
    most = max(COMMON_ENTITY_FLOOR, COMMON_ENTITY_SHARE * size)
    return tuple(e for e in entities if 0 < df(ENTITY_PREFIX + e) <= most)


def without_common(query: str, entities: Sequence[str], df: Callable[[str], int], size: int) -> str:
    """The query the dense channel embeds: the entities most of the bank's memories name (see
    `distinctive`: a conversation's participants) said as "they" ("their" for "Jon's"). They
    tell no memory apart, and in the vector they pull towards every memory about the name
    rather than about the question: on LoCoMo, any@10 0.808 to 0.815 and all@10 0.693 to 0.699,
    better on both halves of the conversations."""
    most = max(COMMON_ENTITY_FLOOR, COMMON_ENTITY_SHARE * size)
    for entity in entities:
        if df(ENTITY_PREFIX + entity) > most:
            query = re.sub(
                rf"(?<!\w){re.escape(entity)}('s|\u2019s)?(?!\w)",
                lambda m: "their" if m.group(1) else "they",
                query,
                flags=re.IGNORECASE,
            )
    return query


def lexical_query(query: str, entities: Sequence[str], df: Callable[[str], int], size: int) -> str:
    """The query the lexical channel reads: without the names most of the bank's memories say
    (see `without_common`), unless nothing else is left. The fusion's speaker feature says
    whose line a memory is; the name as a word also matches the other participant's lines
    that address them ("Thanks, Melanie!"). On LoCoMo, any@10 / all@10 / any@1000t 0.842 /
    0.722 / 0.905 to 0.846 / 0.724 / 0.911, no worse on either half."""
    stripped = without_common(query, entities, df, size)
    return stripped if tokenize(stripped) else query


def query_ranges(query: str, options: RecallOptions) -> list[TimeRange]:
    """The times the query names (or `options.time_text`, when given), when the time channel
    counts."""
    if not weighs(options, "time"):
        return []
    text = query if options.time_text is None else options.time_text
    return resolve_time_expressions(text, options.now)


TIME_FLOOR = 0.05
"""Time scores below this are 0: beyond ln(20) = 3.0 range lengths from the range."""


def time_reach(r: TimeRange) -> float:
    """How far (seconds) from a range a memory still gets a time score."""
    return max(r.days, 1.0) * 86400 * math.log(1 / TIME_FLOOR)


def time_scores_of(
    times: npt.NDArray[np.float64], ranges: Sequence[TimeRange]
) -> npt.NDArray[np.float32]:
    """1 inside a range, decaying with the distance to it in units of the range's length."""
    best = np.zeros(len(times), dtype=np.float64)
    known = ~np.isnan(times)
    for r in ranges:
        start, end = r.start.timestamp(), r.end.timestamp()
        distance = np.where(times < start, start - times, np.where(times >= end, times - end, 0))
        scale = max(r.days, 1.0) * 86400
        best = np.maximum(best, np.where(known, np.exp(-distance / scale), 0.0))
    best[best < TIME_FLOOR] = 0.0
    return best.astype(np.float32)


def newest(query: str, chars: int | None) -> str:
    """The last `chars` characters of `query`, from a word's start (all of it when None)."""
    if chars is None or len(query) <= chars:
        return query
    tail = query[len(query) - chars :]
    cut = tail.find(" ")
    return tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
