"""`lamina bench latency`: recall latency at 10k and 100k memories, against exact brute force.

The bank is built from the shared data: real turns (LoCoMo and Claude Code) embedded once, then
varied into N memories (texts recombined from two real turns, vectors the normalised mean of
theirs plus a little noise), so building 100k memories does not take an hour of embedding. The
queries are LoCoMo questions, embedded at query time (the timing includes query embedding).
Recall searches the SQLite database (what every process does); the baseline computes the same
ranking the slow, obvious way from the whole bank loaded in process (a Python loop of dot
products, full sorts, no cached masks), so the run also checks that the search in the database
returns exactly the same top 10. That check needs a fusion the baseline can compute, CombSUM;
`learned_fusion_recall_ms` times the same recalls with the default, calibrated fusion
(lamina.bank.fusion), which also reads the best 64 candidates' memories.
"""

from __future__ import annotations

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
from ..turns import conversational_text
from .common import Precomputed, emit, percentiles, shared_data_dir

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


def build(bank: MemoryBank, name: str, n: int, texts: list[str], vectors: np.ndarray) -> None:
    rng = np.random.default_rng(7)
    picks = random.Random(7)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    made = 0
    while made < n:
        memories: list[Memory] = []
        for _ in range(min(BATCH, n - made)):
            a, b = picks.randrange(len(texts)), picks.randrange(len(texts))
            vec = vectors[a] + vectors[b] + rng.normal(0, 0.02, vectors.shape[1])
            vec = (vec / np.linalg.norm(vec)).astype(np.float32)
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
@click.option(
    "--memories",
    "sizes",
    multiple=True,
    type=int,
    default=(10_000, 100_000),
    show_default=True,
    help="Bank sizes to measure.",
)
@click.option("--queries", type=int, default=200, show_default=True)
@click.option(
    "--database-url",
    default=None,
    metavar="URL",
    help="Also measure this PostgreSQL database (banks lamina-bench-<size> are kept there).",
)
@click.option(
    "--pg-memories",
    "pg_sizes",
    multiple=True,
    type=int,
    default=(10_000, 100_000),
    show_default=True,
    help="Bank sizes on PostgreSQL (add 1000000 for the million).",
)
@click.option("--fresh", is_flag=True, help="Rebuild the PostgreSQL banks even if present.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def latency_bench(
    sizes: tuple[int, ...],
    queries: int,
    database_url: str | None,
    pg_sizes: tuple[int, ...],
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
            loaded = _Loaded(bank, name)
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
            precomputed = Precomputed(bank.embedder, sorted(set(asked)))
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
                t0 = time.perf_counter()
                exact = _baseline(bank, loaded, query)
                base.append((time.perf_counter() - t0) * 1000)
                got = [h.memory.id for h in result.hits[:10]]
                agree += got == exact[: len(got)]
            results[str(n)] = {
                "memories": n,
                "lamina_recall_ms": percentiles(ours),
                "learned_fusion_recall_ms": percentiles(learned),
                "recall_ms_without_query_embedding": percentiles(without_embedding),
                "query_embedding_ms": percentiles(embed_only),
                "baseline_exact_ms": percentiles(base),
                "top_results_agree_with_exact": round(agree / len(asked), 3),
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
                warmup=warmup, fresh=fresh,
            )  # fmt: skip
            results["postgres"]["data"] = (
                "synthetic: texts recombined from two real turns, vectors the normalised mean"
                " of theirs plus noise (see `build`)"
            )
            results["retain_throughput"] = {
                "postgres": retain_throughput(database_url),
                "sqlite": sqlite_throughput(),
            }
        bank.close()
    emit({"benchmark": "latency", **results}, as_json)
