"""`lamina bench latency`: recall latency at 10k and 100k memories, against exact brute force.

The bank is built from the shared data: real turns (LoCoMo and Claude Code) embedded once, then
varied into N memories (texts recombined from two real turns, vectors distinct random mixes of
three real ones plus noise, see `vary`), so building 100k memories does not take an hour of
embedding. Serving recall (every channel) is timed apart for questions that name a time (the
time channel searches) and those that do not, and so is a new process's first recall. The
queries are LoCoMo questions, embedded at query time (the timing includes query embedding).
Recall searches the SQLite database (what every process does); the baseline computes the same
ranking the slow, obvious way from the whole bank loaded in process (a Python loop of dot
products, full sorts, no cached masks), so the run also checks that the search in the database
returns exactly the same top 10. That check needs a fusion the baseline can compute, CombSUM;
`learned_fusion_recall_ms` times the same recalls with the default, calibrated fusion
(lamina.bank.fusion), which also reads the best 64 candidates' memories.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..bank.assemble import combsum
from ..bank.bank import MemoryBank
from ..bank.plan import recall_from_store
from ..bank.recall import RecallOptions
from ..errors import InputError
from ..memories import Cursor, Memory
from ..readers import read_transcript
from ..readers.locomo import read_locomo_samples
from ..store.base import RetainBatch
from ..store.sqlite import SQLiteStore
from ..text.entities import entity_terms
from ..text.lexical import BM25Index
from ..text.when import resolve_time_expressions
from ..turns import conversational_text
from .common import (
    SERVING,
    Precomputed,
    database_url_option,
    emit,
    json_option,
    percentiles,
    recall_ms,
    serving_recall_ms,
    shared_data_dir,
    sizes_option,
)

__all__ = ["latency_bench"]

BATCH = 5_000


def _base_texts() -> tuple[list[str], list[str]]:
    locomo = shared_data_dir("locomo")
    claude = shared_data_dir("claude-code")
    if locomo is None or claude is None:
        raise InputError("../shared/data (locomo and claude-code) is needed for this benchmark")
    samples = read_locomo_samples(str(locomo / "locomo-dev.json"))
    texts = [f"{m.speaker}: {m.text}" for s in samples for x in s.sessions for m in x.messages]
    for path in sorted(claude.glob("*.jsonl")):
        for message in read_transcript(str(path)).messages:
            text = conversational_text(message)
            if text:
                texts.append(f"{message.role.value}: {text[:1500]}")
    questions = [q.question for s in samples for q in s.questions if q.category in (1, 2, 3, 4)]
    return texts, questions


MIXED = 3
"""Real vectors mixed into each memory's vector."""
NOISE = 0.03
"""Gaussian noise per dimension added to the mix (about 0.6 of a unit vector's norm at 384
dimensions): every memory's vector is distinct, its neighbours still the real ones' kin."""


def vary(
    vectors: np.ndarray, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`count` distinct, realistic vectors: each a random convex mix (Dirichlet weights) of
    MIXED real vectors plus NOISE, normalised, with the indices of the real ones mixed (the
    first two name the memory's texts). The previous recipe (two real vectors plus noise of
    0.02) reused each real vector about 187 times at a million, so that a bank was mostly
    near-duplicates and HNSW recall@10 against an exact scan (0.39) measured ties."""
    picks = rng.integers(0, len(vectors), size=(count, MIXED))
    weights = rng.dirichlet(np.ones(MIXED), size=count).astype(np.float32)
    mixed = np.einsum("nk,nkd->nd", weights, vectors[picks])
    mixed += rng.normal(0, NOISE, mixed.shape).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return mixed.astype(np.float32), picks


def build(
    bank: MemoryBank, name: str, n: int, texts: list[str], vectors: np.ndarray, seed: int = 7
) -> None:
    """A bank of `n` memories: texts of two real turns, vectors from `vary`, one every 7
    minutes from 2023-01-01 (13 years at a million), 500 a document; `seed` picks them."""
    rng = np.random.default_rng(seed)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    made = 0
    while made < n:
        memories: list[Memory] = []
        varied, picks = vary(vectors, min(BATCH, n - made), rng)
        for vec, (a, b, *_rest) in zip(varied, picks.tolist(), strict=True):
            when = start + timedelta(minutes=made * 7)
            memories.append(
                Memory(
                    id=f"m{made}",
                    bank=name,
                    document=f"doc{made // 500}",
                    kind="turn",
                    text=f"{texts[a]}\n{texts[b]}",
                    record_ids=(f"r{made}",),
                    occurred_at=when,
                    said_at=when,
                    content_hash=str(made),
                    embedding=vec,
                    embedder=bank.embedder.name,
                )
            )
            made += 1
        by_doc: dict[str, list[Memory]] = {}
        for memory in memories:
            by_doc.setdefault(memory.document, []).append(memory)
        for doc, group in by_doc.items():
            current = bank.store.get_cursor(name, doc)
            records = [m.record_ids[0] for m in group]
            bank.store.apply_retain(
                RetainBatch(name, doc, current.version, Cursor(), records, group)
            )


def split_dated(questions: list[str], count: int, seed: int) -> tuple[list[str], list[str]]:
    """`count` questions naming a time (the time channel searches) and `count` naming none,
    drawn at random (with repeats when fewer exist)."""
    dated = [q for q in questions if resolve_time_expressions(q)]
    undated = [q for q in questions if q not in set(dated)]
    picks = random.Random(seed)
    return (
        [dated[picks.randrange(len(dated))] for _ in range(count)],
        [undated[picks.randrange(len(undated))] for _ in range(count)],
    )


def _first_recall(args: tuple[str, str, str]) -> tuple[float, float]:
    """In a new process: the first recall of a question from a SQLite bank (the query's vector
    computed before the clock) and the process's peak RSS after it (MB)."""
    db, name, query = args
    store = SQLiteStore(db)
    bank = MemoryBank(store)
    embedder = Precomputed(bank.embedder, [query])
    [ms] = recall_ms(store, name, [query], embedder, SERVING)
    bank.close()
    return ms, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Loaded:
    """A whole bank in memory, for the exact baseline: ids, vectors and a BM25 index."""

    def __init__(self, bank: MemoryBank, name: str) -> None:
        self.ids: list[str] = []
        self.lexical = BM25Index()
        rows: list[Any] = []
        for row in bank.store.iter_memories(name):
            self.ids.append(row.memory.id)
            self.lexical.add(row.memory.text, entity_terms(row.memory.entities))
            rows.append(row.memory.embedding)
        dim = next((len(r) for r in rows if r is not None), 1)
        self.has_vector = np.array([r is not None for r in rows], dtype=bool)
        self.matrix = np.array(
            [r if r is not None else np.zeros(dim, dtype=np.float32) for r in rows],
            dtype=np.float32,
        ).reshape(len(rows), dim)


def _baseline(bank: MemoryBank, loaded: _Loaded, query: str, depth: int = 10) -> list[str]:
    """The same ranking computed the slow, obvious way: every memory scored by both channels,
    full sorts instead of partial selection, then the same fusion."""
    qv = bank.embedder.embed_query(query)
    dense = np.array([float(row @ qv) for row in loaded.matrix], dtype=np.float32)
    lexical = loaded.lexical.scores(query)
    channels = {}
    for channel, scores, ok in (
        ("lexical", lexical, lexical > 0),
        ("dense", dense, loaded.has_vector),
    ):
        order = sorted(np.flatnonzero(ok).tolist(), key=lambda i: (-float(scores[i]), i))
        channels[channel] = (order[:200], scores)
    fused = combsum(channels, {"lexical": 1.0, "dense": 1.0})
    ranked = sorted(fused, key=lambda s: (-fused[s], s))
    return [loaded.ids[s] for s in ranked[:depth]]


@click.command("latency")
@sizes_option("--memories", "sizes", help="Bank sizes to measure.")
@click.option("--queries", type=int, default=200, show_default=True)
@database_url_option(
    "Also measure this PostgreSQL database (banks lamina-bench-<size> are kept there)."
)
@sizes_option(
    "--pg-memories", "pg_sizes", help="Bank sizes on PostgreSQL (add 1000000 for the million)."
)
@click.option(
    "--baseline-max",
    type=int,
    default=100_000,
    show_default=True,
    help="Largest SQLite bank also ranked by the slow exact baseline (it loads the bank).",
)
@click.option("--fresh", is_flag=True, help="Rebuild the PostgreSQL banks even if present.")
@json_option
def latency_bench(
    sizes: tuple[int, ...],
    queries: int,
    database_url: str | None,
    pg_sizes: tuple[int, ...],
    baseline_max: int,
    fresh: bool,
    as_json: bool,
) -> None:
    """Recall latency and memory at 10k and 100k memories; with --database-url, PostgreSQL
    too (up to a million), HNSW against exact search, and retain throughput with 4 writers.

    Example: lamina bench latency --memories 10000 --queries 100 --json"""
    texts, questions = _base_texts()
    picks = random.Random(3)
    asked = [questions[picks.randrange(len(questions))] for _ in range(queries)]
    others = random.Random(4)
    warmup = [questions[others.randrange(len(questions))] for _ in range(queries)]
    dated, undated = split_dated(questions, queries, 5)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lamina-latency-") as tmp:
        db = Path(tmp) / "lamina.db"
        store = SQLiteStore(db)
        bank = MemoryBank(store)
        started = time.perf_counter()
        vectors = bank.embedder.embed_documents(texts)
        embed_s = time.perf_counter() - started
        for n in sizes:
            name = f"bench-{n}"
            started = time.perf_counter()
            build(bank, name, n, texts, vectors)
            build_s = time.perf_counter() - started
            started = time.perf_counter()
            loaded = _Loaded(bank, name) if n <= baseline_max else None
            load_s = time.perf_counter() - started
            options = RecallOptions(
                budget=1_000_000,
                limit=10,
                collapse=False,
                channel_weights={"lexical": 1.0, "dense": 1.0, "time": 0.0},
                fusion="combsum",  # the fusion the exact baseline computes
            )
            learned: list[float] = []
            ours: list[float] = []
            without_embedding: list[float] = []
            precomputed = Precomputed(bank.embedder, sorted(set(asked) | set(dated + undated)))
            embed_only: list[float] = []
            base: list[float] = []
            agree = 0
            for query in asked:
                t0 = time.perf_counter()
                result = bank.recall(query, name, options)
                ours.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                bank.recall(query, name, replace(options, fusion="learned"))
                learned.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                recall_from_store(store, name, query, precomputed, options)
                without_embedding.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                bank.embedder.embed_query(query)
                embed_only.append((time.perf_counter() - t0) * 1000)
                if loaded is not None:
                    t0 = time.perf_counter()
                    exact = _baseline(bank, loaded, query)
                    base.append((time.perf_counter() - t0) * 1000)
                    got = [h.memory.id for h in result.hits[:10]]
                    agree += got == exact[: len(got)]
            serving_ms = serving_recall_ms(store, name, precomputed, dated, undated)
            context = multiprocessing.get_context("spawn")
            firsts: list[float] = []
            rss: list[float] = []
            for query in undated[:3] + dated[:2]:
                with context.Pool(1) as pool:
                    ms, peak = pool.apply(_first_recall, ((str(db), name, query),))
                firsts.append(ms)
                rss.append(peak)
            results[str(n)] = {
                "memories": n,
                "lamina_recall_ms": percentiles(ours),
                "learned_fusion_recall_ms": percentiles(learned),
                "recall_ms_without_query_embedding": percentiles(without_embedding),
                "query_embedding_ms": percentiles(embed_only),
                **serving_ms,
                "new_process_first_recall_ms": percentiles(firsts),
                "new_process_peak_rss_mb": round(max(rss), 1),
                "baseline_exact_ms": percentiles(base) if loaded is not None else None,
                "top_results_agree_with_exact": (
                    round(agree / len(asked), 3) if loaded is not None else None
                ),
                "build_s": round(build_s, 1),
                "whole_bank_load_s": round(load_s, 2),
            }
        results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        results["database_mb"] = round(sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6, 1)
        results["base_texts"] = len(texts)
        results["base_embedding_s"] = round(embed_s, 1)
        results["embedder"] = bank.embedder.name
        if database_url:
            from .postgres import postgres_latency, retain_throughput, sqlite_throughput

            results["postgres"] = postgres_latency(
                database_url, pg_sizes, texts, vectors, asked, bank.embedder, build,
                warmup=warmup, fresh=fresh, dated=dated, undated=undated,
            )  # fmt: skip
            results["postgres"]["data"] = (
                "synthetic: texts recombined from two real turns, vectors random mixes of"
                " three real ones plus noise, all distinct (see `vary`)"
            )
            results["retain_throughput"] = {
                "postgres": retain_throughput(database_url),
                "sqlite": sqlite_throughput(),
            }
        bank.close()
    emit({"benchmark": "latency", **results}, as_json)
