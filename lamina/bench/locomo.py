"""`lamina bench locomo`: recall quality on LoCoMo, against BM25-only and dense-only baselines.

Each conversation goes into its own bank, its session dates as times. For every question of
categories 1-4 with at least one valid evidence id, recall runs and its ranked memories are
expanded into dialog turns: a memory spanning several turns contributes them in order, with
turns already seen skipped, and the top k are the first k turns of that expansion. A question
scores any@k when at least one evidence turn is in its top k and all@k when every one is;
session level does the same with the sessions of those turns. `any@1000t` and `all@1000t` (and
at 2,000) do the same for the turns of the memories returned within that many tokens of text
(ranked memories taken in order, one that no longer fits passed over, as recall fills a budget;
nothing shortened). Scores are micro-averaged over questions, per category, overall and per
half of the conversations (`halves`: conv-26/30 and conv-41/42/43; a change counts only when it
helps on both, tuned on one and read on the other). The generated fields (`observation`,
`session_summary`, `event_summary`) are never read. The baselines rank the same units with one
channel each; `rrf` is Lamina with reciprocal-rank fusion instead of its default CombSUM, to
show what the fusion choice is worth. `turns-bm25` is the plain baseline: BM25 over single
dialog turns ("speaker: text", lowercased words, no stemming), outside Lamina altogether.

`--date-style` asks the same questions with their dates written another way (`numeric-dmy`
"07.07.2023", `numeric-mdy` "07/07/2023", `iso` "2023-07-07"; see lamina.bench.date_styles), so
recall on dates in numbers can be compared with dates in words. Every variant also reports
`dated`: the questions that name a date with a numeric form (the same questions in every style).
"""

from __future__ import annotations

import math
import re
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from ..bank.bank import MemoryBank
from ..bank.expand import QueryExpander
from ..bank.fusion import FusionModel, read_model
from ..bank.recall import RecallOptions
from ..embed import get_embedder
from ..progress import Progress
from ..readers.locomo import LocomoSample, read_locomo_samples
from ..store.sqlite import SQLiteStore
from ..tokens import count_text
from .common import (
    database_url_option,
    embedder_option,
    emit,
    json_option,
    locomo_file,
    percentiles,
)
from .date_styles import DATE_STYLES, DateStyle, date_phrases, restyle

__all__ = ["evaluate", "locomo_bench"]

KS = (5, 10, 20)
TOKEN_BUDGETS = (1_000, 2_000)
CATEGORIES = (1, 2, 3, 4)
HALVES: dict[str, frozenset[str]] = {
    "conv-26+30": frozenset({"conv-26", "conv-30"}),
    "conv-41+42+43": frozenset({"conv-41", "conv-42", "conv-43"}),
}
"""The split-half check: each half's figures, to tune on one and read on the other."""
BASELINE = "turns-bm25"
_LIMIT = 100
"""Memories ranked per question: enough to fill the largest token budget."""
VARIANTS: dict[str, dict[str, Any]] = {
    "lamina": {},
    "bm25": {"fusion": "combsum", "channel_weights": {"lexical": 1.0}},
    "dense": {"fusion": "combsum", "channel_weights": {"dense": 1.0}},
    "combsum": {"fusion": "combsum"},
    "rrf": {"fusion": "rrf"},
    "turns-bm25": {},
}


def _session_of(turn: str) -> str:
    return turn.split(":", 1)[0]


def expand(record_lists: Sequence[Sequence[str]], sample_id: str) -> list[str]:
    """Dialog ids of ranked memories, in order, each once."""
    seen: dict[str, None] = {}
    prefix = f"{sample_id}:"
    for records in record_lists:
        for record in records:
            if record.startswith(prefix):
                seen.setdefault(record[len(prefix) :], None)
    return list(seen)


def within_tokens(
    ranked: Sequence[tuple[Sequence[str], int]], sample_id: str, budget: int
) -> set[str]:
    """Dialog ids of the ranked memories (records, tokens) returned within `budget` tokens:
    taken in order, one that no longer fits passed over."""
    used = 0
    chosen: list[Sequence[str]] = []
    for records, tokens in ranked:
        if used + tokens <= budget:
            used += tokens
            chosen.append(records)
    return set(expand(chosen, sample_id))


def half_of(sample_id: str) -> str | None:
    return next((name for name, ids in HALVES.items() if sample_id in ids), None)


_WORD = re.compile(r"[a-z0-9]+")


class TurnsBM25:
    """The plain baseline: BM25 (k1 1.2, b 0.75) over one conversation's single dialog turns,
    as "speaker: text", lowercased words, no stemming and no stop words."""

    def __init__(self, sample: LocomoSample) -> None:
        self.ids: list[str] = []
        self.tokens: list[int] = []
        self.tf: list[dict[str, int]] = []
        df: dict[str, int] = defaultdict(int)
        for message in sample.messages:
            text = f"{message.speaker}: {message.text}"
            self.ids.append(message.id)
            self.tokens.append(count_text(text))
            counts: dict[str, int] = defaultdict(int)
            for word in _WORD.findall(text.lower()):
                counts[word] += 1
            self.tf.append(counts)
            for word in counts:
                df[word] += 1
        n = len(self.tf)
        self.lengths = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.lengths) / n if n else 1.0
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def rank(self, query: str, limit: int) -> list[tuple[Sequence[str], int]]:
        """The best `limit` turns for `query` as (records, tokens), best first."""
        words = _WORD.findall(query.lower())
        scored: list[tuple[float, int]] = []
        for i, counts in enumerate(self.tf):
            score = 0.0
            norm = 1.2 * (0.25 + 0.75 * self.lengths[i] / self.avg)
            for word in words:
                f = counts.get(word, 0)
                if f:
                    score += self.idf[word] * f * 2.2 / (f + norm)
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [((self.ids[i],), self.tokens[i]) for _score, i in scored[:limit]]


class Tally:
    def __init__(self) -> None:
        self.hits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.count: dict[str, int] = defaultdict(int)

    def add(
        self,
        category: int,
        ranked: Sequence[str],
        evidence: Sequence[str],
        budgeted: Mapping[int, set[str]] | None = None,
        half: str | None = None,
        dated: bool = False,
    ) -> None:
        """One question: `ranked` its dialog ids in order, `budgeted` those returned within
        each token budget; `dated` when it names a date (tallied apart as well)."""
        keys = ["overall", f"category_{category}"]
        if half is not None:
            keys.append(f"half_{half}")
        if dated:
            keys.append("dated")
        for key in keys:
            self.count[key] += 1
            for budget, found in (budgeted or {}).items():
                self.hits[key][f"turn_any@{budget}t"] += any(e in found for e in evidence)
                self.hits[key][f"turn_all@{budget}t"] += all(e in found for e in evidence)
            for k in KS:
                top = ranked[:k]
                tops = set(top)
                sessions = {_session_of(t) for t in top}
                ev_sessions = {_session_of(e) for e in evidence}
                self.hits[key][f"turn_any@{k}"] += any(e in tops for e in evidence)
                self.hits[key][f"turn_all@{k}"] += all(e in tops for e in evidence)
                self.hits[key][f"session_any@{k}"] += bool(ev_sessions & sessions)
                self.hits[key][f"session_all@{k}"] += ev_sessions <= sessions

    def scores(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in sorted(self.count, key=lambda k: (k != "overall", k)):
            n = self.count[key]
            figures = {name: round(v / n, 4) for name, v in sorted(self.hits[key].items())}
            out[key] = {"questions": n, **figures}
        return out


def evaluate(
    bank: MemoryBank,
    samples: Sequence[LocomoSample],
    variants: Sequence[str],
    model: FusionModel | None = None,
    expander: QueryExpander | None = None,
    date_style: DateStyle = "words",
) -> dict[str, Any]:
    """Every question of CATEGORIES recalled by each variant, its dates written in `date_style`;
    `model`, when given, is the `lamina` variant's fusion instead of the shipped one;
    `expander`, when given, expands the `lamina` variant's queries (lamina.bank.expand)."""
    tallies = {v: Tally() for v in variants}
    latencies: list[float] = []
    questions = [
        (s, q) for s in samples for q in s.questions if q.category in CATEGORIES and q.evidence
    ]
    baselines = {s.sample_id: TurnsBM25(s) for s in samples} if BASELINE in variants else {}
    skipped = 0
    with Progress("recall", total=len(questions) * len(variants), unit="q") as progress:
        done = 0
        for sample, question in questions:
            asked = restyle(question.question, date_style)
            dated = bool(date_phrases(question.question))
            for variant in variants:
                returned: list[tuple[Sequence[str], int]]
                if variant == BASELINE:
                    returned = baselines[sample.sample_id].rank(asked, _LIMIT)
                else:
                    options = RecallOptions(
                        budget=1_000_000, limit=_LIMIT, now=_now(sample), **VARIANTS[variant]
                    )
                    if variant == "lamina" and model is not None:
                        options = replace(options, model=model)
                    started = time.perf_counter()
                    result = bank.recall(
                        asked,
                        _bank_name(sample),
                        options,
                        expander=expander if variant == "lamina" else None,
                    )
                    if result.expansion is not None and result.expansion.skipped:
                        skipped += 1
                    if variant == "lamina":
                        latencies.append((time.perf_counter() - started) * 1000)
                    returned = [(h.memory.record_ids, h.tokens) for h in result.hits]
                ranked = expand([records for records, _tokens in returned], sample.sample_id)
                budgeted = {b: within_tokens(returned, sample.sample_id, b) for b in TOKEN_BUDGETS}
                tallies[variant].add(
                    question.category,
                    ranked,
                    question.evidence,
                    budgeted,
                    half_of(sample.sample_id),
                    dated,
                )
                done += 1
                progress.update(done)
    out: dict[str, Any] = {}
    for variant in variants:
        scores = tallies[variant].scores()
        out[variant] = {
            **scores["overall"],
            "by_category": {k: v for k, v in scores.items() if k.startswith("category_")},
            "halves": {k[5:]: v for k, v in scores.items() if k.startswith("half_")},
            "dated": scores.get("dated", {"questions": 0}),
        }
    if latencies and "lamina" in out:
        out["lamina"]["recall_ms"] = percentiles(latencies)
    if expander is not None and "lamina" in out:
        out["lamina"]["expansion"] = {"model": expander.name, "skipped": skipped}
    if "lamina" in out:
        out["lamina"]["lead"] = lead(out)
    return out


LEAD_FIGURES = ("turn_any@10", "turn_all@10", "turn_any@1000t", "turn_all@1000t")


def lead(results: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Lamina's lead over each baseline run (in points: hundredths), overall and per half,
    on the figures the issue's targets name."""
    ours = results["lamina"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for baseline in ("bm25", BASELINE):
        if baseline not in results:
            continue
        theirs = results[baseline]
        parts = {"overall": (ours, theirs)}
        parts.update({h: (ours["halves"][h], theirs["halves"][h]) for h in ours["halves"]})
        out[baseline] = {
            part: {f: round(100 * (a[f] - b[f]), 2) for f in LEAD_FIGURES}
            for part, (a, b) in parts.items()
        }
    return out


def _now(sample: LocomoSample) -> datetime | None:
    """ "Now" for a conversation's questions: the date of its last session."""
    dates = [s.date_time for s in sample.sessions if s.date_time is not None]
    return max(dates) if dates else None


def _bank_name(sample: LocomoSample, prefix: str = "") -> str:
    return f"{prefix}locomo-{sample.sample_id}"


def compare_stores(
    sqlite_bank: MemoryBank, url: str, samples: Sequence[LocomoSample]
) -> dict[str, Any]:
    """Lamina on PostgreSQL (searching in the database) against the SQLite bank already
    built: its scores, and how much of each question's top 10 the two stores share."""
    from ..store.postgres import PostgresStore

    prefix = f"bench-{int(time.time())}-"
    pg = MemoryBank(PostgresStore(url), sqlite_bank.embedder)
    started = time.perf_counter()
    for sample in samples:
        pg.retain_messages(sample.messages, _bank_name(sample, prefix), sample.sample_id)
    retain_s = time.perf_counter() - started
    tally = Tally()
    overlaps: list[float] = []
    same_order = 0
    latencies: list[float] = []
    questions = [
        (s, q) for s in samples for q in s.questions if q.category in CATEGORIES and q.evidence
    ]
    with Progress("postgres", total=len(questions), unit="q") as progress:
        for done, (sample, question) in enumerate(questions, 1):
            options = RecallOptions(budget=1_000_000, limit=40, now=_now(sample))
            started = time.perf_counter()
            ours = pg.recall(question.question, _bank_name(sample, prefix), options)
            latencies.append((time.perf_counter() - started) * 1000)
            theirs = sqlite_bank.recall(question.question, _bank_name(sample), options)
            a = [h.memory.id for h in ours.hits[:10]]
            b = [h.memory.id for h in theirs.hits[:10]]
            overlaps.append(len(set(a) & set(b)) / max(len(b), 1))
            same_order += a == b
            ranked = expand([h.memory.record_ids for h in ours.hits], sample.sample_id)
            tally.add(question.category, ranked, question.evidence)
            progress.update(done)
    for sample in samples:
        pg.delete_bank(_bank_name(sample, prefix))
    pg.close()
    return {
        **tally.scores()["overall"],
        "top10_overlap_with_sqlite": round(statistics.mean(overlaps), 4),
        "top10_identical_share": round(same_order / len(questions), 4),
        "retain_turns_per_s": round(sum(len(s.messages) for s in samples) / retain_s, 1),
        "recall_ms": percentiles(latencies),
    }


@click.command("locomo")
@click.option("--data", default=None, help="LoCoMo JSON file (default: the shared dev set).")
@click.option(
    "--variant",
    "variants",
    multiple=True,
    type=click.Choice(sorted(VARIANTS)),
    help="Only these variants (default: all).",
)
@database_url_option("Also run Lamina on this PostgreSQL database and compare it with SQLite.")
@click.option(
    "--model",
    "model_file",
    default=None,
    metavar="PATH",
    help="The fusion model (a file `lamina bench fusion --write` made) instead of the shipped "
    "one: fitted on one half of the conversations, read on the other.",
)
@embedder_option(
    "The dense channel's model, by name (see lamina.embed.get_embedder: 'default', "
    "'minilm-l6', 'hash')."
)
@click.option(
    "--expand-with",
    "expand_model",
    default=None,
    metavar="PROVIDER:MODEL",
    help="Expand the lamina variant's queries with this model (lamina.bank.expand; needs its "
    "extra and key; its tokens are spent, uncapped, on every question).",
)
@click.option(
    "--date-style",
    type=click.Choice(DATE_STYLES),
    default="words",
    show_default=True,
    help="Write the dates of the questions this way (only the question text changes; "
    "'words' asks them as the dataset does).",
)
@json_option
def locomo_bench(
    data: str | None,
    variants: tuple[str, ...],
    database_url: str | None,
    model_file: str | None,
    embedder_name: str,
    expand_model: str | None,
    date_style: DateStyle,
    as_json: bool,
) -> None:
    """Recall quality on LoCoMo (turn and session level), with baselines, throughput, latency;
    with --database-url, the same on PostgreSQL and the agreement of the two stores.

    Example: lamina bench locomo --variant lamina --variant bm25 --json"""
    data = locomo_file(data)
    model = read_model(model_file) if model_file else None
    samples = read_locomo_samples(data)
    chosen = list(variants) or list(VARIANTS)
    with tempfile.TemporaryDirectory(prefix="lamina-locomo-") as tmp:
        bank = MemoryBank(SQLiteStore(Path(tmp) / "lamina.db"), get_embedder(embedder_name))
        turns = sum(len(s.messages) for x in samples for s in x.sessions)
        bank.embedder.embed_query("warm up")  # load the model outside the timing
        started, cpu = time.perf_counter(), time.process_time()
        text_s = text_cpu = 0.0
        for sample in samples:
            messages = [m for session in sample.sessions for m in session.messages]
            report = bank.retain_messages(messages, _bank_name(sample), sample.sample_id)
            text_s += report.text_seconds
            text_cpu += report.text_cpu_seconds
        retain_s = time.perf_counter() - started
        retain_cpu = time.process_time() - cpu
        again: list[float] = []
        unchanged = 0
        for sample in samples:
            messages = [m for session in sample.sessions for m in session.messages]
            t0 = time.perf_counter()
            report = bank.retain_messages(messages, _bank_name(sample), sample.sample_id)
            again.append((time.perf_counter() - t0) * 1000)
            unchanged += report.status == "unchanged"
        expander = None
        if expand_model:
            from ..llm import get_llm

            expander = QueryExpander(get_llm(expand_model))
        results = evaluate(bank, samples, chosen, model, expander, date_style)
        units = sum(bank.stats(_bank_name(s)).memories for s in samples)
        if database_url:
            results["postgres"] = compare_stores(bank, database_url, samples)
        bank.close()
    if "lamina" in results:
        # Until everything is embedded (the figure measured before retain committed its
        # text first), and until the text was committed: recalled by its words from then on.
        results["lamina"]["retain_turns_per_s"] = round(turns / retain_s, 1)
        results["lamina"]["retain_text_turns_per_s"] = round(turns / max(text_s, 1e-9), 1)
        results["lamina"]["retain_s"] = {
            "text_committed": round(text_s, 2),
            "all_embedded": round(retain_s, 2),
        }
        # The same in CPU time (every thread of the process): what a quiet machine's wall
        # time would be with one core, unmoved by other processes' load.
        results["lamina"]["retain_text_turns_per_cpu_s"] = round(turns / max(text_cpu, 1e-9), 1)
        results["lamina"]["retain_cpu_s"] = {
            "text_committed": round(text_cpu, 2),
            "all_embedded": round(retain_cpu, 2),
        }
        results["lamina"]["reretain_unchanged_ms"] = {
            "median": round(statistics.median(again), 2),
            "max": round(max(again), 2),
            "all_unchanged": unchanged == len(samples),
        }
    emit(
        {
            "benchmark": "locomo",
            "data": data,
            "conversations": len(samples),
            "turns": turns,
            "memories": units,
            "embedder": bank.embedder.name,
            "date_style": date_style,
            **results,
        },
        as_json,
    )
