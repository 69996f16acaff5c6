"""The PostgreSQL half of `lamina bench latency --database-url URL`.

Per bank size:
- recall p50/p95 with the searching done in the database, query embedding excluded (it is
  reported separately), in a process warmed up by other questions; that first pass (which
  also builds the packs of common terms) is reported apart, as is recall in a process that
  holds no pack yet (a hook process's situation);
- the same with one document left out (what the Claude Code hook always asks: everything
  but the current session);
- how often recall's top 10 is the one exact searches give (no HNSW, no lexical work bound);
- lexical search alone: as configured, without lists held in memory (every list read from
  its blocks) and exact, with the configured ranking's agreement with the exact one;
- the agreement of the HNSW dense ranking with an exact scan;
- the time to build the bank, the database's size, the postings' bytes (table, TOAST and
  indexes) per million memories, the lists held in memory and the server settings that
  matter (shared_buffers: the timings assume the bank's HNSW index fits).

Then retain throughput with four processes writing different conversations into one bank,
embedding excluded, on PostgreSQL and, as the baseline, on SQLite.

Banks are named `lamina-bench-v2-<size>` and kept between runs (a bank of the right size is
reused: building a million memories takes a while); `--fresh` rebuilds them.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..bank.bank import MemoryBank
from ..bank.plan import recall_from_store
from ..bank.recall import RecallOptions
from ..bank.retain import RetainOptions
from ..embed import Embedder
from ..readers.locomo import read_locomo_samples
from ..store import open_store
from ..store.postgres import PostgresStore
from ..store.postgres_search import EXACT_LIMIT
from ..store.search import SearchFilter
from ..text.lexical import tokenize
from .common import Precomputed, percentiles, recall_ms, serving_recall_ms, shared_data_dir

__all__ = ["postgres_latency", "retain_throughput"]

WRITERS = 4


def postgres_latency(
    url: str,
    sizes: Sequence[int],
    texts: list[str],
    vectors: npt.NDArray[np.float32],
    asked: list[str],
    embedder: Embedder,
    build: Any,
    *,
    warmup: Sequence[str] = (),
    fresh: bool = False,
    dated: Sequence[str] = (),
    undated: Sequence[str] = (),
    hnsw_queries: int = 50,
    lexical_queries: int = 100,
    exact_queries: int = 20,
    fresh_queries: int = 20,
) -> dict[str, Any]:
    store = PostgresStore(url)
    precomputed = Precomputed(
        embedder, sorted(set(asked) | set(warmup) | set(dated) | set(undated))
    )
    bank = MemoryBank(store, precomputed)
    options = RecallOptions(
        budget=1_000_000,
        limit=10,
        collapse=False,
        channel_weights={"lexical": 1.0, "dense": 1.0, "time": 0.0},
    )
    out: dict[str, Any] = {}
    for n in sizes:
        name = f"lamina-bench-v2-{n}"  # v2: the vectors of `vary`
        existing = store.count_memories(name, SearchFilter()) if store.get_bank(name) else 0
        reused = existing == n and not fresh
        build_s = index_s = None
        if not reused:
            store.delete_bank(name)
            store.ensure_bank(name)
            # A bulk load: without the HNSW index (which retains would otherwise build once
            # the bank passes EXACT_LIMIT, and then update row by row), built in one go after.
            started = time.perf_counter()
            with store.bulk_load(name):
                build(bank, name, n, texts, vectors)
                build_s = round(time.perf_counter() - started, 1)
                started = time.perf_counter()
            index_s = round(time.perf_counter() - started, 1)
            with store.pool.connection() as conn:
                conn.execute("VACUUM ANALYZE")
        # A process's first search: a store holding no pack in memory yet (a hook process's
        # situation), its pool opened before the clock starts.
        fresh_ms: list[float] = []
        for query in asked[:fresh_queries]:
            newcomer = PostgresStore(url)
            newcomer.count_memories(name, SearchFilter())
            t0 = time.perf_counter()
            recall_from_store(newcomer, name, query, precomputed, options)
            fresh_ms.append((time.perf_counter() - t0) * 1000)
            newcomer.close()
        # A server's: warmed up by other questions (a first pass that also builds the packs
        # of the common terms it meets, once a bank), so that the questions timed next find
        # some of their terms' packs in memory and read the others from the database.
        first = recall_ms(store, name, warmup or asked, precomputed, options)
        timings = recall_ms(store, name, asked, precomputed, options)
        serving_ms = serving_recall_ms(store, name, precomputed, dated, undated)
        # The hook's recall: everything but the current session (here the newest document).
        session = replace(options, exclude={f"doc{(n - 1) // 500}": None})
        excluding = recall_ms(store, name, asked, precomputed, session)
        agreement = _against_exact(store, name, asked[:exact_queries], precomputed, options)
        lexical = _lexical(store, name, asked, options.depth, lexical_queries)
        # HNSW against an exact scan: asked for 10 (ef_search HNSW_EF_SEARCH), and at
        # recall's depth (ef_search = depth), whose top 10 and whole list recall uses.
        overlap: list[float] = []
        deep: dict[int, list[float]] = {10: [], options.depth: []}
        hnsw_ms: list[float] = []
        exact_ms: list[float] = []
        for query in asked[:hnsw_queries]:
            vector = precomputed.embed_query(query)
            t0 = time.perf_counter()
            approximate = store.dense_search(name, vector, 10, SearchFilter(), embedder.name)
            hnsw_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            exact = store.dense_search(
                name, vector, options.depth, SearchFilter(), embedder.name, exact=True
            )
            exact_ms.append((time.perf_counter() - t0) * 1000)
            overlap.append(len({s for s, _ in approximate} & {s for s, _ in exact[:10]}) / 10)
            found = store.dense_search(name, vector, options.depth, SearchFilter(), embedder.name)
            for k, shares in deep.items():
                want = {s for s, _ in exact[:k]}
                shares.append(len({s for s, _ in found[:k]} & want) / max(len(want), 1))
        cache = store._pack_cache()
        out[str(n)] = {
            "memories": n,
            "recall_ms_without_query_embedding": percentiles(timings),
            **serving_ms,
            "first_pass_recall_ms": percentiles(first),
            "fresh_process_recall_ms": percentiles(fresh_ms),
            "recall_ms_excluding_one_session": percentiles(excluding),
            "packs_held_mb": round(cache.bytes / 1e6, 1) if cache is not None else 0,
            **agreement,
            **lexical,
            "dense_search_ms": percentiles(hnsw_ms),
            "dense_recall_at_10_vs_exact": round(float(np.mean(overlap)), 3),
            "dense_at_recall_depth": {
                "depth": options.depth,
                "recall_at_10_vs_exact": round(float(np.mean(deep[10])), 3),
                f"recall_at_{options.depth}_vs_exact": round(
                    float(np.mean(deep[options.depth])), 3
                ),
            },
            "dense_exact_scan_ms": percentiles(exact_ms),
            "dense_index": "hnsw" if n > EXACT_LIMIT else "exact scan",
            "build_s": build_s,
            "hnsw_build_s": index_s,
            "reused_existing_bank": reused,
        }
    out["database_mb"] = round((store.size_bytes() or 0) / 1e6, 1)
    out["disk_mb"] = _disk(store)
    out["postings"] = _postings(store)
    out["server_settings"] = _settings(store)
    store.close()
    return out


def _against_exact(
    store: PostgresStore, name: str, asked: list[str], embedder: Embedder, options: RecallOptions
) -> dict[str, Any]:
    """Recall's top 10 as configured against the top 10 of exact searches (every vector
    scanned, lexical search without its work bound)."""
    same = 0
    overlap: list[float] = []
    budget = store.lexical_search_budget
    for query in asked:
        got = [h.memory.id for h in recall_from_store(store, name, query, embedder, options).hits]
        store.lexical_search_budget, store.dense_exact = None, True
        try:
            hits = recall_from_store(store, name, query, embedder, options).hits
        finally:
            store.lexical_search_budget, store.dense_exact = budget, False
        want = [h.memory.id for h in hits]
        same += got[:10] == want[:10]
        overlap.append(len(set(got[:10]) & set(want[:10])) / max(len(want[:10]), 1))
    return {
        "recall_top10_identical_to_exact": f"{same}/{len(asked)}",
        "recall_top10_overlap_with_exact": round(float(np.mean(overlap)), 4) if asked else None,
    }


def _lexical(
    store: PostgresStore, name: str, asked: list[str], depth: int, queries: int
) -> dict[str, Any]:
    """Lexical search alone: as configured (common terms' lists held in memory, bounded
    work), without them (every list read from its blocks each time), and exact (no work
    bound), with how often the configured top `depth` is the exact one."""
    sample = asked[:queries]
    runs: dict[str, list[list[tuple[int, float]]]] = {}
    ms: dict[str, list[float]] = {}
    default_budget, default_packs = store.lexical_search_budget, store.lexical_pack_min
    modes = {
        "configured": (default_budget, default_packs),
        "without_packs": (default_budget, None),
        "exact": (None, default_packs),
    }
    try:
        for mode, (budget, packs) in modes.items():
            store.lexical_search_budget, store.lexical_pack_min = budget, packs
            runs[mode], ms[mode] = [], []
            for query in sample:
                t0 = time.perf_counter()
                found = store.lexical_search(name, tokenize(query), depth, SearchFilter())
                ms[mode].append((time.perf_counter() - t0) * 1000)
                runs[mode].append(found)
    finally:
        store.lexical_search_budget, store.lexical_pack_min = default_budget, default_packs
    same = sum(
        {s for s, _ in a} == {s for s, _ in b}
        for a, b in zip(runs["configured"], runs["exact"], strict=True)
    )
    overlap = [
        len({s for s, _ in a} & {s for s, _ in b}) / max(len(b), 1)
        for a, b in zip(runs["configured"], runs["exact"], strict=True)
    ]
    return {
        "lexical_search_ms": percentiles(ms["configured"]),
        "lexical_search_ms_without_packs": percentiles(ms["without_packs"]),
        "lexical_search_ms_exact": percentiles(ms["exact"]),
        "lexical_top_depth_identical_to_exact": f"{same}/{len(sample)}",
        "lexical_top_depth_overlap_with_exact": round(float(np.mean(overlap)), 4),
        "lexical_depth": depth,
        "lexical_budget": default_budget,
    }


def _disk(store: PostgresStore) -> dict[str, float]:
    """The largest relations of the database (MB; heap with its TOAST, or an index): where a
    bank's bytes go, the postings' table and indexes and each bank's HNSW index apart."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')"
            " ORDER BY 2 DESC LIMIT 16"
        ).fetchall()
    return {str(name): round(int(size) / 1e6, 1) for name, size in rows if int(size) >= 1e6}


def _postings(store: PostgresStore) -> dict[str, Any]:
    """The postings' bytes (pg_total_relation_size: table, TOAST and indexes) over every bank
    of the database, and per million of its memories."""
    with store.pool.connection() as conn:
        sizes = {
            str(name): int(size)
            for name, size in conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                " AND c.relname IN ('posting_blocks', 'term_counts')"
            )
        }
        row = conn.execute("SELECT count(*) FROM memories").fetchone()
    memories = int(row[0]) if row else 0
    blocks = sizes.get("posting_blocks", 0)
    return {
        "blocks_mb": round(blocks / 1e6, 1),
        "term_counts_mb": round(sizes.get("term_counts", 0) / 1e6, 1),
        "memories": memories,
        # bytes per memory x 1e6 memories / 1e9 bytes
        "blocks_gb_per_million_memories": round(blocks / memories / 1e3, 3) if memories else None,
    }


def _settings(store: PostgresStore) -> dict[str, str]:
    """The server settings the timings depend on."""
    names = ("server_version", "shared_buffers", "work_mem", "effective_cache_size", "fsync",
             "synchronous_commit", "max_parallel_workers_per_gather", "jit")  # fmt: skip
    with store.pool.connection() as conn:
        out = {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        out["pgvector"] = str((row.fetchone() or ("?",))[0])
    return out


# -- retain throughput ---------------------------------------------------------------------
_samples: list[Any] = []


def _load(data: str) -> None:
    """Each writer reads the conversations before the clock starts."""
    _samples.extend(read_locomo_samples(data))


def _writer(args: tuple[str, str, list[int]]) -> int:
    target, bank, picks = args
    samples = _samples
    memory = MemoryBank(open_store(target), retain_options=RetainOptions(embed=False))
    turns = 0
    for i in picks:
        sample = samples[i]
        report = memory.retain_messages(sample.messages, bank, sample.sample_id)
        turns += report.new_records
    memory.close()
    return turns


def retain_throughput(target: str, writers: int = WRITERS) -> dict[str, Any]:
    """Turns per second with `writers` processes retaining LoCoMo conversations into one bank
    (different conversations each, embedding excluded)."""
    folder = shared_data_dir("locomo")
    if folder is None:
        return {"skipped": "../shared/data/locomo not found"}
    data = str(folder / "locomo-dev.json")
    count = len(read_locomo_samples(data))
    bank = f"lamina-bench-writers-{int(time.time())}"
    store = open_store(target)
    store.migrate()
    jobs = [(target, bank, list(range(w, count, writers))) for w in range(writers)]
    context = multiprocessing.get_context("spawn")
    with context.Pool(writers, initializer=_load, initargs=(data,)) as pool:
        pool.map(_noop, range(writers), chunksize=1)  # every worker started and loaded
        started = time.perf_counter()
        turns = sum(pool.map(_writer, jobs))
        seconds = time.perf_counter() - started
    memories = store.bank_stats(bank).memories
    store.delete_bank(bank)
    store.close()
    return {
        "writers": writers,
        "turns": turns,
        "memories": memories,
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 1),
        "note": "workers started and data read before the clock; embedding excluded",
    }


def _noop(_: int) -> None:
    time.sleep(0.2)  # long enough that every worker takes one


def sqlite_throughput(writers: int = WRITERS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lamina-writers-") as tmp:
        return retain_throughput(str(Path(tmp) / "lamina.db"), writers)
