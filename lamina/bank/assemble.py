"""Fusing the channels' rankings and filling the budget: the second half of a recall.

The channels' rankings (of slots: a recall's candidates numbered) are fused (the calibrated
model of lamina.bank.fusion, CombSUM or reciprocal-rank fusion), then the budget is filled in
the fused order: near-duplicates collapse, corrections apply, a restatement yields to its
originals, a memory too large for what is left is shortened around the query, and the floor
(`RecallOptions.floor`) decides whether anything returns at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..memories import Memory, memory_tokens
from ..tags import BLOCK_TOKENS, framing_tokens
from ..text.lexical import idf, tokenize
from ..text.shorten import piece_estimator, shorten
from ..text.units import SUMMARY
from ..tokens import count_text
from .fusion import (
    CHANNEL_FEATURES,
    MEMORY_FEATURES,
    RERANK,
    default_model,
    pool_features,
    rerank_features,
    stage_order,
)
from .recall import (
    Floor,
    FloorCheck,
    RecallHit,
    RecallOptions,
    RecallResult,
    entity_scale,
    search_filter,
)
from .relevance import ceiling, ranked, relevance

__all__ = ["Counts", "assemble", "check_floor", "combsum", "fuse", "judge_floor"]

_MAX_SKIPPED = 25
"""Results too large for what is left of the budget that are passed over before giving up."""
_MIN_USEFUL_TOKENS = 8
_MIN_SHORTENED_TOKENS = 48
"""A memory too large for what is left of the budget is shortened around the query when at
least this much is left; below that it is passed over."""


def piece_tokens(memory: Memory, tokens: int) -> Callable[[str], int]:
    """Tokens of pieces of a memory (for shortening it): estimated from the memory's own
    count (see `shorten.piece_estimator`), so the prompt path never loads a tokenizer to
    shorten one; counted exactly for memories stored without a count (the tokenizer is
    loaded for those anyway)."""
    if memory.tokens is None or not memory.text:
        return count_text
    return piece_estimator(memory.text, tokens)


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


def assemble(
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
    else:
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
    dated = any("time" in h.channels for h in hits)
    check = judge_floor(query, [h.memory.text for h in hits], dense, dated, floor, counts)
    return check if check.passed else replace(check, held_back=len(hits))


def judge_floor(
    query: str,
    texts: Sequence[str],
    dense: Sequence[float] | None,
    dated: bool,
    floor: Floor,
    counts: Counts,
) -> FloorCheck:
    """The floor's rule (see `check_floor`) over memories' `texts` and raw `dense` scores;
    held back, it counts one memory (the caller knows how many it holds back)."""
    best_dense = max(dense) if dense else None
    best_coverage = 0.0
    unique = sorted(set(tokenize(query)))
    if texts and unique:
        size, df = counts(unique)
        weights = {t: idf(max(size, 1), df.get(t, 0)) for t in unique}
        best_coverage = max(coverage(weights, text) for text in texts)
    passed = (
        best_dense is None  # lexical only: not judged (see `Floor`)
        or dated
        or best_dense >= floor.dense
        or best_coverage >= floor.coverage
    )
    return FloorCheck(floor, best_dense, best_coverage, dated, 0 if passed else 1)


ORIGINALS_LOOKAHEAD = 64
"""How far down the fused order recall looks for the originals of a restatement."""


def _restates(memory: Memory) -> bool:
    """A compaction summary's part (lamina.text.units.SUMMARY): what it says, the
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
