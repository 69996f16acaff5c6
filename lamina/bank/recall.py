"""Recall: the best memories for a query, within a token budget, with the reasons why.

Channels rank the bank's memories independently: **dense** (cosine between the query's and the
memories' vectors; the query embedded with the names most memories say, a conversation's
participants, as "they": see `without_common`), **lexical** (BM25), when the query names a time
("last May", "two weeks ago", "in 2023"), **time** (closeness to that time, resolved against
`RecallOptions.now`), and when it names entities (lamina.bank.entities: names, identifiers,
paths), **entities** (BM25 of the entities query and memory share, each entity one term). Their
scores are fused: by default by a calibrated logistic model (lamina.bank.fusion: the channels'
min-max normalised scores, the entity channel's divided by `entity_scale` instead, and for the
best candidates the memory's kind, length and whether its speaker is the participant the query
names), or by CombSUM or weighted reciprocal-rank fusion on request. Near-duplicates
collapse (a result most of whose records better results already show is dropped), and the
budget is filled in rank order; a result part of which better results already show comes back
without the lines they show. Every result carries its score and, per channel, its rank and
raw score, so a user can see why it was recalled.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .corrections import Corrections
    from .expand import Expansion
    from .index import BankIndex
else:
    from .._lazy import numpy as np

from ..embed import Embedder
from ..memories import Memory, memory_tokens
from ..store.search import SearchFilter, SearchStore
from ..tags import BLOCK_TOKENS, format_memory_block, framing_tokens
from ..text.entities import ENTITY_PREFIX, entity_terms, extract_entities
from ..text.lexical import idf, tokenize
from ..text.shorten import piece_estimator, shorten
from ..text.units import SUMMARY
from ..text.when import TimeRange, resolve_time_expressions
from ..tokens import count_text
from .fusion import (
    CHANNEL_FEATURES,
    MEMORY_FEATURES,
    RERANK,
    FusionModel,
    default_model,
    pool_features,
    rerank_features,
    stage_order,
)
from .relevance import ceiling, ranked, relevance

__all__ = [
    "Floor",
    "FloorCheck",
    "RecallHit",
    "RecallOptions",
    "RecallResult",
    "dense_query_from_store",
    "recall_from_index",
    "recall_from_store",
]

_MAX_SKIPPED = 25
"""Results too large for what is left of the budget that are passed over before giving up."""
_MIN_USEFUL_TOKENS = 8
_MIN_SHORTENED_TOKENS = 48
"""A memory too large for what is left of the budget is shortened around the query when at
least this much is left; below that it is passed over."""
_PAGE = 32
"""Memories fetched at a time, in fused order, when the store does the searching."""


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
class RecallOptions:
    budget: int = 1_024
    """Tokens the returned memories may take (their text, counted with lamina.tokens)."""
    limit: int = 50
    """At most this many results, whatever the budget."""
    documents: frozenset[str] | None = None
    tags: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude: Mapping[str, datetime | None] = field(default_factory=dict)
    """Documents left out: wholly (None), or only what was said at or after a time (the part
    of a live session still in the model's context; what was compacted away stays)."""
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
        }


def search_filter(options: RecallOptions) -> SearchFilter:
    """The fields of `options` that filter which memories recall may return."""
    return SearchFilter(
        documents=options.documents,
        tags=options.tags,
        kinds=options.kinds,
        since=options.since,
        until=options.until,
        exclude=options.exclude,
    )


def piece_tokens(memory: Memory, tokens: int) -> Callable[[str], int]:
    """Tokens of pieces of a memory (for shortening it): estimated from the memory's own
    count (see `shorten.piece_estimator`), so the prompt path never loads a tokenizer to
    shorten one; counted exactly for memories stored without a count (the tokenizer is
    loaded for those anyway)."""
    if memory.tokens is None or not memory.text:
        return count_text
    return piece_estimator(memory.text, tokens)


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


def _top(
    scores: npt.NDArray[np.floating[Any]], candidates: npt.NDArray[np.bool_], depth: int
) -> list[int]:
    """The best `depth` candidates by score, best first (ties: lower slot first)."""
    masked = np.where(candidates, scores, -np.inf)
    count = int(candidates.sum())
    if count == 0:
        return []
    depth = min(depth, count)
    if depth < len(masked):
        part = np.argpartition(-masked, depth - 1)[:depth]
    else:
        part = np.arange(len(masked))
    order = part[np.lexsort((part, -masked[part]))]
    return [int(i) for i in order if np.isfinite(masked[i])]


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


def channel_rankings(
    index: BankIndex,
    query: str,
    query_vector: npt.NDArray[np.float32] | None,
    keep: npt.NDArray[np.bool_],
    depth: int,
    ranges: Sequence[TimeRange] = (),
    entities: Sequence[str] = (),
    lexical_channel: bool = True,
) -> dict[str, tuple[list[int], npt.NDArray[np.float32]]]:
    """Each channel's ranking (slots, best first) and its raw scores; the entity channel only
    when the query names entities that some memory names too, the dense one only given a
    query vector, the lexical one unless `lexical_channel` is false."""
    out: dict[str, tuple[list[int], npt.NDArray[np.float32]]] = {}
    if lexical_channel:
        lexical = index.lexical.scores(query)
        out["lexical"] = (_top(lexical, keep & (lexical > 0), depth), lexical)
    if entities:
        named = index.lexical.scores(entity_terms(entities))
        ranking = _top(named, keep & (named > 0), depth)
        if ranking:
            out["entities"] = (ranking, named)
    if query_vector is not None and index.dim == query_vector.shape[0] and len(index):
        dense = index.matrix @ query_vector
        out["dense"] = (_top(dense, keep & index.has_vector, depth), dense)
    if ranges and len(index):
        # As the stores do it (`recall_from_store`): the time channel proposes memories,
        # then ranks every proposed memory it scores.
        scores = time_scores_of(index.times, ranges)
        proposed = time_proposals(index.times, keep, ranges, depth)
        proposed.update(slot for ranking, _scores in out.values() for slot in ranking)
        dated = sorted((s for s in proposed if scores[s] > 0), key=lambda s: (-scores[s], s))
        out = {"time": (dated[:depth], scores), **out}
    return out


def time_proposals(
    times: npt.NDArray[np.float64],
    keep: npt.NDArray[np.bool_],
    ranges: Sequence[TimeRange],
    depth: int,
) -> set[int]:
    """The memories the time channel adds to the candidates, as a store's `time_search` finds
    them: for each range, every memory inside it, then the nearest outside it (within
    `time_reach`) up to `depth` in all; nothing for a range holding more than `depth`. Inside
    a range every memory scores the same, so there the channel cannot say which few matter
    (taking the first `depth` in storage order left the rest of a long range out for no
    reason): the other channels' candidates inside it still get its score."""
    out: set[int] = set()
    known = ~np.isnan(times)
    for r in ranges:
        start, end = r.start.timestamp(), r.end.timestamp()
        with np.errstate(invalid="ignore"):
            inside = keep & known & (times >= start) & (times < end)
            count = int(inside.sum())
            if count > depth:
                continue
            out.update(int(s) for s in np.flatnonzero(inside))
            reach = time_reach(r)
            need = depth - count
            if need <= 0 or reach <= 0:
                continue
            before = keep & known & (times < start) & (times >= start - reach)
            after = keep & known & (times >= end) & (times < end + reach)
        near = np.flatnonzero(before | after)
        distance = np.maximum(start - times[near], times[near] - end)
        order = np.lexsort((near, distance))[:need]
        out.update(int(s) for s in near[order])
    return out


def fuse(
    rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: int
) -> dict[int, float]:
    """Weighted reciprocal-rank fusion."""
    fused: dict[int, float] = {}
    for channel, ranking in rankings.items():
        weight = weights.get(channel, 0.0)
        if weight <= 0:
            continue
        for rank, slot in enumerate(ranking):
            fused[slot] = fused.get(slot, 0.0) + weight / (k + rank + 1)
    return fused


def combsum(
    channels: Mapping[str, tuple[Sequence[int], npt.NDArray[np.floating[Any]]]],
    weights: Mapping[str, float],
    scales: Mapping[str, float] | None = None,
) -> dict[int, float]:
    """Weighted sum of each channel's scores, min-max normalised over that channel's
    candidates, for every memory any channel proposed. A channel given a scale is divided by
    it instead (and capped at 1)."""
    pool = sorted({slot for ranking, _scores in channels.values() for slot in ranking})
    if not pool:
        return {}
    slots = np.array(pool, dtype=np.int64)
    total = np.zeros(len(slots), dtype=np.float64)
    for name, (ranking, scores) in channels.items():
        weight = weights.get(name, 0.0)
        if weight <= 0 or not ranking:
            continue
        top = scores[list(ranking)].astype(np.float64)
        low, high = float(top.min()), float(top.max())
        if scales and name in scales:
            normalised = np.clip(scores[slots] / scales[name], 0.0, 1.0)
        elif high <= low:
            normalised = (scores[slots] >= high).astype(np.float64)
        else:
            normalised = np.clip((scores[slots] - low) / (high - low), 0.0, None)
        total += weight * normalised
    return {int(slot): float(score) for slot, score in zip(slots, total, strict=True)}


def recall_from_index(
    index: BankIndex,
    query: str,
    embedder: Embedder | None,
    options: RecallOptions,
) -> RecallResult:
    channels, considered = index_channels(index, query, embedder, options)
    return _assemble(
        query,
        channels,
        index.memories.__getitem__,
        index.tokens,
        considered,
        options,
        len(index.lexical),
        lambda terms: (len(index.lexical), {t: index.lexical.df(t) for t in terms}),
    )


def index_channels(
    index: BankIndex,
    query: str,
    embedder: Embedder | None,
    options: RecallOptions,
) -> tuple[dict[str, tuple[list[int], npt.NDArray[np.float32]]], int]:
    """Each channel's ranking of the index's slots and its scores, and how many memories the
    filters keep."""
    keep = index.mask(
        documents=set(options.documents) if options.documents is not None else None,
        tags=set(options.tags) if options.tags else None,
        kinds=set(options.kinds) if options.kinds is not None else None,
        since=options.since,
        until=options.until,
        exclude=options.exclude,
    )
    found = query_entities(query, options)
    vector = None
    dense = weighs(options, "dense") and embedder is not None and index.dim is not None
    if embedder is not None and dense and query.strip():
        size = len(index.lexical)
        newest = _newest(query, options.dense_chars)
        vector = embedder.embed_query(without_common(newest, found, index.lexical.df, size))
    ranges = query_ranges(query, options)
    entities = distinctive(found, index.lexical.df, len(index.lexical))
    lexical = lexical_query(query, found, index.lexical.df, len(index.lexical))
    channels = channel_rankings(
        index, lexical, vector, keep, options.depth, ranges, entities, weighs(options, "lexical")
    )
    return channels, int(keep.sum())


def _assemble(
    query: str,
    channels: Mapping[str, tuple[list[int], npt.NDArray[np.float32]]],
    memory_at: Callable[[int], Memory | None],
    tokens_at: Callable[[int], int],
    considered: int,
    options: RecallOptions,
    size: int,
    counts: Counts,
    prefetch: Callable[[list[int]], None] | None = None,
) -> RecallResult:
    """Fuse the channels' rankings (of slots) and fill the budget in rank order.

    `size` is the number of memories BM25 counts (for the entity channel's scale); `counts`
    the bank's document frequencies (for `options.floor`); `prefetch`, when given, is told
    the fused order before any `memory_at` call."""
    rankings = {name: ranking for name, (ranking, _scores) in channels.items()}
    if options.fusion == "learned":
        fused, order = _learned(query, channels, memory_at, tokens_at, options, size, prefetch)
        return _fill(
            query,
            channels,
            rankings,
            fused,
            order,
            memory_at,
            tokens_at,
            considered,
            options,
            counts,
        )
    if options.fusion == "rrf":
        fusing = dict(rankings)
        if "entities" in channels:
            # Ranks carry no scale: keep only memories that share an entity worth at least
            # half a rare one, or a name said in most memories would rank every one of them.
            ranking, scores = channels["entities"]
            floor = 0.5 * entity_scale(size)
            fusing["entities"] = [slot for slot in ranking if scores[slot] >= floor]
        fused = fuse(fusing, options.channel_weights, options.rrf_k)
    else:
        fused = combsum(channels, options.channel_weights, {"entities": entity_scale(size)})
    order = sorted(fused, key=lambda s: (-fused[s], s))
    if prefetch is not None:
        prefetch(order)
    return _fill(
        query, channels, rankings, fused, order, memory_at, tokens_at, considered, options, counts
    )


def _learned(
    query: str,
    channels: Mapping[str, tuple[list[int], npt.NDArray[np.float32]]],
    memory_at: Callable[[int], Memory | None],
    tokens_at: Callable[[int], int],
    options: RecallOptions,
    size: int,
    prefetch: Callable[[list[int]], None] | None,
) -> tuple[dict[int, float], list[int]]:
    """The calibrated fusion (lamina.bank.fusion): every candidate scored by its channel
    features, then the best RERANK again with their memories' own features added."""
    model = options.model or default_model()
    used = {
        name: channel
        for name, channel in channels.items()
        if options.channel_weights.get(name, 0.0) > 0
    }
    slots, features = pool_features(used, entity_scale(size))
    if not len(slots):
        return {}, []
    base = features @ model.vector(CHANNEL_FEATURES) + model.bias
    fused = {int(s): float(v) for s, v in zip(slots, base, strict=True)}
    order = [int(slots[i]) for i in stage_order(slots, base)]
    if prefetch is not None:
        prefetch(order)
    head = order[:RERANK]
    memories = [memory_at(slot) for slot in head]
    tokens = [
        tokens_at(slot) if m is not None else 0 for slot, m in zip(head, memories, strict=True)
    ]
    extra = rerank_features(query, memories, tokens) @ model.vector(MEMORY_FEATURES)
    listing = options.spread and LIST_QUESTION.search(options.time_text or query) is not None
    windows = model.weights.get("list_window", 0.0) if listing else 0.0
    for slot, memory, value in zip(head, memories, extra, strict=True):
        if memory is not None:
            fused[slot] += float(value) + (windows if memory.kind == "window" else 0.0)
    read = dict(zip(head, memories, strict=True))
    head.sort(key=lambda s: (-fused[s], s))
    if listing:
        head = spread(head, fused, read)
    return fused, head + order[RERANK:]


LIST_QUESTION = re.compile(
    r"\bhow many\s+(?:[\w-]+\s+){1,3}?(?:has|have|does|do|did)\b"
    r"|\bboth\b|\b(?:kinds|types|sorts) of\b"
    r"|^\s*(?:what|which)\s+(?:[\w-]+\s+){0,2}?[\w-]+s\s+(?:has|have|does|do|did|is|are|was|were)\b"
    r"|^\s*what\s+(?:has|have)\s+\w+(?:'s)?\s+\w+(?:ed|en|t)\b",
    re.IGNORECASE,
)
"""A question whose answer is several things, often said on different days: "how many
times has...", "both", "kinds of", a plural asked about ("what books has...", "which cities
did..."), or "what has X done". Not "how many tests passed": one statement holds that."""
SPREAD_RESULTS = 5
"""Results chosen with `spread`'s penalties; the rest follow in fused order."""
SPREAD_PENALTY = 1.0
"""Log-odds taken off a memory for each better result from its episode."""
EPISODE_SECONDS = 86_400.0
"""Memories of one document said less than this apart belong to one episode."""


def spread(
    head: Sequence[int], fused: Mapping[int, float], memories: Mapping[int, Memory | None]
) -> list[int]:
    """`head` (best first) with its first SPREAD_RESULTS chosen one at a time, each the best
    after penalties: SPREAD_PENALTY for every result already chosen from its episode (the
    same document, said within EPISODE_SECONDS). Evidence
    for a list question is spread over sessions (on LoCoMo's multi-hop questions, nearly
    every evidence turn is in a session of its own), while similar lines of one session
    crowd the top. Measured and not kept: spreading all questions (single-hop questions lose
    more than list questions gain), or more than 5 results (any@10 lower on single-hop)."""
    left = list(head)
    score = {slot: fused[slot] for slot in left}
    said: dict[int, tuple[str, float | None]] = {}
    for slot in left:
        memory = memories.get(slot)
        if memory is not None:
            said[slot] = (memory.document, memory.time.timestamp() if memory.time else None)
    chosen: list[int] = []
    while left and len(chosen) < SPREAD_RESULTS:
        best = max(left, key=lambda s: (score[s], -s))
        left.remove(best)
        chosen.append(best)
        if best not in said:
            continue
        document, when = said[best]
        for slot in left:
            other = said.get(slot)
            if other is not None and other[0] == document:
                t = other[1]
                if t is None or when is None or abs(t - when) < EPISODE_SECONDS:
                    score[slot] -= SPREAD_PENALTY
    return chosen + left


def _fill(
    query: str,
    channels: Mapping[str, tuple[list[int], npt.NDArray[np.float32]]],
    rankings: Mapping[str, Sequence[int]],
    fused: Mapping[int, float],
    order: Sequence[int],
    memory_at: Callable[[int], Memory | None],
    tokens_at: Callable[[int], int],
    considered: int,
    options: RecallOptions,
    counts: Counts,
) -> RecallResult:
    """Fill the budget in the fused order; nothing, when no memory reaches `options.floor`
    (`counts` gives the bank's document frequencies of terms, for the lexical coverage)."""
    ranks = {
        name: {slot: r for r, slot in enumerate(ranking)} for name, ranking in rankings.items()
    }

    hits: list[RecallHit] = []
    taken: list[int] = []
    covered: set[str] = set()
    covered_whole: set[str] = set()
    shown: set[str] = set()
    used = skipped = 0
    budget = options.budget - (BLOCK_TOKENS if options.framed else 0)
    framing = framing_tokens if options.framed else (lambda _text: 0)
    queue = list(order)
    put_back: set[int] = set()
    taken_ids: set[str] = set()
    where = search_filter(options)  # what a replacement recall did not search for must pass
    replaced: dict[int, int] = {}  # slot -> tokens of the replacement shown in its place
    held = _originals(order, memory_at)
    for slot in queue:  # restatements put back are appended: they come after the rest
        if len(hits) >= options.limit:
            break
        memory = memory_at(slot)
        if memory is None:
            continue  # replaced or forgotten by a retain since the search ranked it
        note: Mapping[str, Any] | None = None
        if options.corrections is not None:
            # Marked wrong: left out, or put back after the rest; superseded: its replacement.
            original = memory
            memory, note = options.corrections.resolve(memory, where, options.show_wrong)
            if memory is None or memory.id in taken_ids:
                continue
            if note and note.get("state") == "wrong" and slot not in put_back:
                put_back.add(slot)
                queue.append(slot)
                continue
            if memory is not original:
                replaced[slot] = memory_tokens(memory)
        if _restates(memory) and slot not in put_back and held(memory):
            put_back.add(slot)  # its originals are among the candidates: they come first
            queue.append(slot)
            continue
        records = set(memory.record_ids)
        # Parts of one long statement share its record: only a turn or window shown above
        # (not another part) makes a part redundant.
        seen = covered_whole if memory.kind in _PIECES else covered
        # What tools printed is in no turn or window (they show an actions line at most):
        # only its lines shown already are left out, below.
        whole = memory.kind != "activity"
        if options.collapse and whole and records and len(records & seen) * 2 > len(records):
            continue
        tokens = replaced[slot] if slot in replaced else tokens_at(slot)
        shortened = False
        if options.collapse and all(line in shown for line in memory.text.split("\n")):
            continue  # said word for word by a result above (a prompt sent twice)
        if options.collapse and records & covered:
            # Part of it is shown above (a window around a line returned already): the lines
            # shown there are not repeated, so the budget holds more distinct evidence.
            fresh = [line for line in memory.text.split("\n") if line not in shown]
            if not fresh:
                continue
            if len(fresh) <= memory.text.count("\n"):
                text = "\n".join(fresh)
                tokens = piece_tokens(memory, tokens)(text)
                memory = replace(memory, text=text, tokens=tokens)
        frame = framing(memory.text)
        if used + tokens + frame > budget:
            left = budget - used - frame
            count = piece_tokens(memory, tokens)
            short = (
                shorten(memory.text, query, left, count) if left >= _MIN_SHORTENED_TOKENS else None
            )
            # Its cuts may take more lines than the whole had: counted again with them.
            if short is not None and used + (cut := count(short)) + framing(short) <= budget:
                memory, tokens, shortened = replace(memory, text=short), cut, True
                frame = framing(short)
            else:
                skipped += 1
                if skipped >= _MAX_SKIPPED or left < _MIN_USEFUL_TOKENS:
                    break  # the budget is as full as it usefully gets
                continue
        detail: dict[str, dict[str, float]] = {}
        for name, (_ranking, scores) in channels.items():
            if slot in ranks[name]:
                detail[name] = {
                    "rank": ranks[name][slot] + 1,
                    "score": round(float(scores[slot]), 6),
                }
        hits.append(RecallHit(memory, 0.0, detail, tokens, shortened, fused[slot], note))
        taken.append(slot)
        taken_ids.add(memory.id)
        if memory.kind != "activity":
            # What tools did and printed stands beside what was said: it hides no statement.
            covered |= records
        shown.update(memory.text.split("\n"))
        if memory.kind not in _PIECES:
            covered_whole |= records
        used += tokens + frame
    hits = _with_relevance(hits, options, channels)
    floor = options.floor
    if floor is None or floor.off:
        return RecallResult(query, hits, considered, sum(hit.tokens for hit in hits))
    # Every candidate has a raw dense score, not only those the channel ranked; a channel
    # that ranked nothing (no vector of this embedder in the bank) is as good as absent.
    searched = "dense" in channels and len(channels["dense"][0]) > 0
    dense = [float(channels["dense"][1][slot]) for slot in taken] if searched else None
    check = check_floor(query, hits, dense, floor, counts)
    if not check.passed:
        hits = []
    return RecallResult(query, hits, considered, sum(hit.tokens for hit in hits), floor=check)


def _with_relevance(
    hits: Sequence[RecallHit],
    options: RecallOptions,
    channels: Mapping[str, tuple[list[int], npt.NDArray[np.float32]]],
) -> list[RecallHit]:
    """`hits` with their `score` set: relevance in 0..1 from their fused scores, never rising
    down the list (lamina.bank.relevance)."""
    found = [name for name, (ranking, _scores) in channels.items() if len(ranking)]
    top = ceiling(options.fusion, options.channel_weights, found, options.rrf_k)
    shown = ranked(relevance(hit.fused, options.fusion, top) for hit in hits)
    return [replace(hit, score=value) for hit, value in zip(hits, shown, strict=True)]


Counts = Callable[[Sequence[str]], tuple[int, Mapping[str, int]]]
"""The bank's live memories and how many hold each of some terms (`SearchStore.term_counts`)."""


def coverage(terms: Mapping[str, float], text: str) -> float:
    """The share of the weight of `terms` (term -> weight) the text holds."""
    total = sum(terms.values())
    if total <= 0:
        return 0.0
    held = set(tokenize(text))
    return sum(w for t, w in terms.items() if t in held) / total


def check_floor(
    query: str,
    hits: Sequence[RecallHit],
    dense: Sequence[float] | None,
    floor: Floor,
    counts: Counts,
) -> FloorCheck:
    """How `hits` measure against `floor`: their best raw dense score (`dense`: each hit's;
    None without the dense channel), their best lexical coverage of the query's terms (each
    term weighted by its idf in the bank, so a word most memories say counts for little and
    one the bank never saw for the most), and whether the time channel found one."""
    best_dense = max(dense) if dense else None
    dated = any("time" in h.channels for h in hits)
    best_coverage = 0.0
    unique = sorted(set(tokenize(query)))
    if hits and unique:
        size, df = counts(unique)
        weights = {t: idf(max(size, 1), df.get(t, 0)) for t in unique}
        best_coverage = max(coverage(weights, h.memory.text) for h in hits)
    passed = (
        best_dense is None  # lexical only: not judged (see `Floor`)
        or dated
        or best_dense >= floor.dense
        or best_coverage >= floor.coverage
    )
    return FloorCheck(floor, best_dense, best_coverage, dated, 0 if passed else len(hits))


ORIGINALS_LOOKAHEAD = 64
"""How far down the fused order recall looks for the originals of a restatement."""


def _restates(memory: Memory) -> bool:
    """A compaction summary's part (lamina.bank.units.SUMMARY): what it says, the
    conversation it summarises said first, at length."""
    return memory.speakers == (SUMMARY,)


def _session(document: str) -> str:
    """The session a document belongs to: a subagent's transcript (`session/agent`) to its
    parent's."""
    return document.partition("/")[0]


def _originals(
    order: Sequence[int], memory_at: Callable[[int], Memory | None]
) -> Callable[[Memory], bool]:
    """Whether a restatement's originals are among the best candidates: a memory of its
    session that is no restatement, within ORIGINALS_LOOKAHEAD of the fused order. Then the
    restatement comes after every other result (where both fit, both are shown); when the
    originals are gone (the session was not retained, or forgotten) it keeps its rank."""
    sessions: set[str] | None = None

    def held(memory: Memory) -> bool:
        nonlocal sessions
        if sessions is None:
            best = (memory_at(slot) for slot in order[:ORIGINALS_LOOKAHEAD])
            sessions = {_session(m.document) for m in best if m is not None and not _restates(m)}
        return _session(memory.document) in sessions

    return held


_PIECES = frozenset({"part", "activity"})
"""Memories holding one piece of a long turn (what was said, or the tool activity in words):
another piece of the same stretch does not make them redundant, only a whole turn or window."""

_WORKERS = 4
"""Threads running a recall's store searches at once (each on its own pooled connection)."""
_workers: tuple[int, ThreadPoolExecutor] | None = None
_workers_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The process's search threads (made again in a forked child, which has none)."""
    global _workers
    with _workers_lock:
        if _workers is None or _workers[0] != os.getpid():
            _workers = (os.getpid(), ThreadPoolExecutor(_WORKERS, "lamina-search"))
        return _workers[1]


def _entity_search(
    store: SearchStore,
    bank: str,
    entities: Sequence[str],
    counts: tuple[int, Mapping[str, int]],
    depth: int,
    where: SearchFilter,
) -> tuple[list[str], list[tuple[int, float]]]:
    """The entity channel: the query's distinctive entities (as terms) and their ranking;
    `counts` is the bank's size and how many memories name each entity."""
    size, df = counts
    named = entity_terms(distinctive(entities, lambda t: df.get(t, 0), size))
    return named, store.lexical_search(bank, named, depth, where) if named else []


def _time_search(
    store: SearchStore, bank: str, ranges: Sequence[TimeRange], depth: int, where: SearchFilter
) -> list[tuple[int, float]]:
    near: dict[int, float] = {}
    for r in ranges:
        near.update(store.time_search(bank, r.start, r.end, time_reach(r), depth, where))
    return list(near.items())


def _dense_query(
    query: str,
    entities: Sequence[str],
    counts: tuple[int, Mapping[str, int]],
    chars: int | None = None,
) -> str:
    return without_common(_newest(query, chars), entities, lambda t: counts[1].get(t, 0), counts[0])


def _newest(query: str, chars: int | None) -> str:
    """The last `chars` characters of `query`, from a word's start (all of it when None)."""
    if chars is None or len(query) <= chars:
        return query
    tail = query[len(query) - chars :]
    cut = tail.find(" ")
    return tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail


def _entities_and_counts(
    store: SearchStore, bank: str, query: str, options: RecallOptions
) -> tuple[tuple[str, ...], tuple[int, Mapping[str, int]]]:
    """The query's entities and how many memories name each (the bank's size first): the
    entity channel's choice, and what the dense and lexical queries leave out."""
    entities = query_entities(query, options)
    counts = store.term_counts(bank, entity_terms(entities)) if entities else (0, {})
    return entities, counts


def dense_query_from_store(
    store: SearchStore, bank: str, query: str, options: RecallOptions
) -> str:
    """The text `recall_from_store` embeds for `query` (for a caller that embeds it ahead)."""
    return _dense_query(
        query, *_entities_and_counts(store, bank, query, options), options.dense_chars
    )


def recall_from_store(
    store: SearchStore,
    bank: str,
    query: str,
    embedder: Embedder | None,
    options: RecallOptions,
) -> RecallResult:
    """The same recall as `recall_from_index`, with the store doing the searching.

    Each channel's ranking comes from the store; the fusion then needs every channel's score
    for every memory any channel proposed, so the proposed memories are scored here too, as
    the in-process index would score them. The channels' searches run at once (the lexical
    one in this thread, the others on the search threads), and so do the scorings."""
    where = search_filter(options)
    depth = options.depth
    ranges = query_ranges(query, options)
    entities, counts = _entities_and_counts(store, bank, query, options)
    terms = tokenize(lexical_query(query, entities, lambda t: counts[1].get(t, 0), counts[0]))
    workers = _executor()

    def embed_and_search(
        model: Embedder,
    ) -> tuple[npt.NDArray[np.float32], list[tuple[int, float]]]:
        # The query is embedded on a search thread, while this one reads the postings.
        embedded = model.embed_query(_dense_query(query, entities, counts, options.dense_chars))
        return embedded, store.dense_search(bank, embedded, depth, where, model.name)

    dense_job = (
        workers.submit(embed_and_search, embedder)
        if weighs(options, "dense") and embedder is not None and query.strip()
        else None
    )
    entity_job = (
        workers.submit(_entity_search, store, bank, entities, counts, depth, where)
        if entities
        else None
    )
    time_job = workers.submit(_time_search, store, bank, ranges, depth, where) if ranges else None
    count_job = workers.submit(store.count_memories, bank, where)
    found: dict[str, list[tuple[int, float]]] = {}
    if weighs(options, "lexical"):
        found["lexical"] = store.lexical_search(bank, terms, depth, where)
    named: list[str] = []
    size = counts[0]
    if entity_job is not None:
        named, ranking = entity_job.result()
        if ranking:
            found["entities"] = ranking
    vector: npt.NDArray[np.float32] | None = None
    if dense_job is not None:
        vector, found["dense"] = dense_job.result()
    if time_job is not None:
        found["time"] = time_job.result()
    pool = sorted({seq for ranking in found.values() for seq, _score in ranking})
    slot = {seq: i for i, seq in enumerate(pool)}

    # Each channel scores what it ranked; the pool's other members are scored on request.
    def rest(name: str) -> list[int]:
        known = {seq for seq, _score in found[name]}
        return [seq for seq in pool if seq not in known]

    scoring: dict[str, Future[dict[int, float]]] = {}
    if "entities" in found and (missing := rest("entities")):
        scoring["entities"] = workers.submit(store.lexical_scores, bank, named, missing)
    if vector is not None and embedder is not None and (missing := rest("dense")):
        scoring["dense"] = workers.submit(store.dense_scores, bank, vector, missing, embedder.name)
    times_job = workers.submit(store.memory_times, bank, pool) if ranges else None
    rescored: dict[str, dict[int, float]] = {}
    if "lexical" in found and (missing := rest("lexical")):
        rescored["lexical"] = store.lexical_scores(bank, terms, missing)
    rescored.update({name: job.result() for name, job in scoring.items()})

    channels: dict[str, tuple[list[int], npt.NDArray[np.float32]]] = {}
    if times_job is not None:
        times = np.full(len(pool), np.nan, dtype=np.float64)
        for seq, t in times_job.result().items():
            times[slot[seq]] = t
        scores = time_scores_of(times, ranges)
        dated = [i for i in range(len(pool)) if scores[i] > 0]
        channels["time"] = (sorted(dated, key=lambda i: (-scores[i], i))[:depth], scores)
    for name in ("lexical", "entities", "dense"):
        if name not in found:
            continue
        scores = np.zeros(len(pool), dtype=np.float32)
        known = dict(found[name])
        known.update(rescored.get(name, {}))
        for seq, score in known.items():
            scores[slot[seq]] = score
        ranked = [slot[seq] for seq, _score in found[name]]
        if name == "dense":
            ranked.sort(key=lambda i: (-scores[i], i))
        channels[name] = (ranked, scores)
    fetched: dict[int, Memory] = {}
    order: list[int] = []

    def prefetch(fused_order: list[int]) -> None:
        order.extend(fused_order)

    def memory_at(i: int) -> Memory | None:
        if pool[i] not in fetched and pool[i] not in gone:
            # Fetch along the fused order, a page at a time: most recalls need one page.
            start = order.index(i)
            page = [pool[j] for j in order[start : start + _PAGE] if pool[j] not in fetched]
            fetched.update(store.memories_by_seq(bank, page, with_embeddings=False))
            gone.update(seq for seq in page if seq not in fetched)
        return None if pool[i] in gone else fetched[pool[i]]

    gone: set[int] = set()
    token_counts: dict[int, int] = {}

    def tokens_at(i: int) -> int:
        if i not in token_counts:
            memory = memory_at(i)
            token_counts[i] = memory_tokens(memory) if memory is not None else 0
        return token_counts[i]

    considered = count_job.result()
    return _assemble(
        query,
        channels,
        memory_at,
        tokens_at,
        considered,
        options,
        size,
        lambda terms: store.term_counts(bank, terms),
        prefetch,
    )
