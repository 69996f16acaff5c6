"""Compare two versions of Lamina's PostgreSQL postings on the same bank, alternating, in one run.

Not part of the package. Each side is a Lamina source folder (or the installed one) and a
database holding the same bench bank in that version's layout (for instance a bank built by
`lamina bench latency --database-url A --pg-memories N` with the old version, a copy of A made
with `CREATE DATABASE B TEMPLATE A`, and B migrated by the new version). Rounds alternate
between the sides; each round is a new process that warms up on every question once (as a
serving process would: common terms' lists read into memory, packs built by the old
version) and then times:

- lexical search as configured, and exact (no work bound), for each question;
- recall in the database (lexical and dense, query embedding excluded), as the latency
  bench's PostgreSQL recall;
- a fresh process's first lexical search (nothing held in memory), for a few questions;
- retains as a hook makes them (a LoCoMo conversation growing two messages at a time, into
  a bank of its own beside the bench bank, embedding left out; the bank deleted after), and
  bulk retains of 500 memories each (as `lamina copy` makes them).

It also reports each database's postings bytes (table, TOAST and indexes, from
pg_total_relation_size, for whichever of postings, posting_packs and posting_blocks exist)
per million memories, and whether both sides rank every question identically.

    python tools/postings_ab.py --old-src /tmp/lamina-main --old-url URL_A \\
        --new-url URL_B --bank lamina-bench-v2-300000 --queries 100 --rounds 4 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

POSTING_RELATIONS = ("postings", "posting_packs", "posting_blocks")


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"p50": at(0.5), "p95": at(0.95), "n": len(ordered)}


def worker(url: str, bank: str, queries: int, fresh: int) -> dict[str, Any]:
    """One round in this process, with whichever Lamina is importable."""
    import lamina
    from lamina.bank.plan import recall_from_store
    from lamina.bank.recall import RecallOptions
    from lamina.bench.common import Precomputed
    from lamina.bench.latency import _base_texts
    from lamina.embed import default_embedder
    from lamina.store.postgres import PostgresStore
    from lamina.store.search import SearchFilter
    from lamina.text.lexical import tokenize

    _texts, questions = _base_texts()
    asked = questions[:queries]
    store = PostgresStore(url)
    embedder = Precomputed(default_embedder(), asked)
    options = RecallOptions(
        budget=1_000_000,
        limit=10,
        collapse=False,
        channel_weights={"lexical": 1.0, "dense": 1.0, "time": 0.0},
    )
    where = SearchFilter()
    # Warm-up: a serving process's state (and, on the old version, its packs built).
    for question in asked:
        store.lexical_search(bank, tokenize(question), 200, where)
        recall_from_store(store, bank, question, embedder, options)
    cold: list[float] = []
    for question in asked[:fresh]:
        newcomer = PostgresStore(url)
        newcomer.count_memories(bank, where)  # pool opened before the clock
        t0 = time.perf_counter()
        newcomer.lexical_search(bank, tokenize(question), 200, where)
        cold.append((time.perf_counter() - t0) * 1000)
        newcomer.close()
    lexical: list[float] = []
    exact: list[float] = []
    recall: list[float] = []
    ranked: list[list[tuple[int, float]]] = []
    budget = store.lexical_search_budget
    for question in asked:
        terms = tokenize(question)
        t0 = time.perf_counter()
        ranked.append(store.lexical_search(bank, terms, 200, where))
        lexical.append((time.perf_counter() - t0) * 1000)
        store.lexical_search_budget = None
        t0 = time.perf_counter()
        store.lexical_search(bank, terms, 200, where)
        exact.append((time.perf_counter() - t0) * 1000)
        store.lexical_search_budget = budget
        t0 = time.perf_counter()
        recall_from_store(store, bank, question, embedder, options)
        recall.append((time.perf_counter() - t0) * 1000)
    # Retains as a hook makes them: a conversation growing two messages at a time, each
    # retain adding a turn's memories to the terms' open blocks (embedding left out).
    from lamina.bank.bank import MemoryBank
    from lamina.bank.retain import RetainOptions
    from lamina.bench.common import shared_data_dir
    from lamina.readers.locomo import read_locomo_samples

    folder = shared_data_dir("locomo")
    assert folder is not None
    sample = read_locomo_samples(str(folder / "locomo-dev.json"))[0]
    messages = list(sample.messages)
    writer = MemoryBank(PostgresStore(url), retain_options=RetainOptions(embed=False))
    growing = f"ab-retain-{os.getpid()}"
    retains: list[float] = []
    for end in range(2, len(messages) + 1, 2):
        t0 = time.perf_counter()
        writer.retain_messages(messages[:end], growing, sample.sample_id)
        retains.append((time.perf_counter() - t0) * 1000)
    writer.store.delete_bank(growing)
    writer.close()
    # Bulk retains, as `lamina copy` or an import makes them: 500 memories of two bench texts
    # each per retain (no vectors).
    from lamina.memories import Cursor, Memory
    from lamina.store.base import RetainBatch

    texts = _texts
    bulk: list[float] = []
    loading = f"ab-bulk-{os.getpid()}"
    for batch in range(4):
        group = [
            Memory(
                id=f"b{batch}-{i}",
                bank=loading,
                document=f"doc{batch}",
                kind="turn",
                text=f"{texts[(7 * i + batch) % len(texts)]}\n{texts[(13 * i + 5) % len(texts)]}",
                record_ids=(f"r{i}",),
                content_hash=f"{batch}-{i}",
            )
            for i in range(500)
        ]
        t0 = time.perf_counter()
        store.apply_retain(
            RetainBatch(
                loading, f"doc{batch}", 0, Cursor(), [m.record_ids[0] for m in group], group
            )
        )
        bulk.append((time.perf_counter() - t0) * 1000)
    store.delete_bank(loading)
    with store.pool.connection() as conn:
        sizes = {
            str(name): int(size)
            for name, size in conn.execute(
                "SELECT relname, pg_total_relation_size(oid) FROM pg_class"
                " WHERE relkind = 'r' AND relname = ANY(%s)",
                (list(POSTING_RELATIONS),),
            )
        }
        memories = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]
    store.close()
    return {
        "lamina": str(Path(lamina.__file__).parent),
        "lexical_ms": lexical,
        "lexical_exact_ms": exact,
        "recall_ms": recall,
        "fresh_process_lexical_ms": cold,
        "retain_ms": retains,
        "bulk_retain_500_ms": bulk,
        "ranked": ranked,
        "postings_bytes": sizes,
        "memories": memories,
    }


def _run(src: str | None, url: str, bank: str, queries: int, fresh: int) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    else:
        env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-P", __file__, "worker", url, bank, str(queries), str(fresh)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        url, bank, queries, fresh = sys.argv[2:6]
        print(json.dumps(worker(url, bank, int(queries), int(fresh))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-src", help="folder holding the old version's lamina package")
    parser.add_argument("--old-url", required=True)
    parser.add_argument("--new-src", help="folder holding the new version (default: installed)")
    parser.add_argument("--new-url", required=True)
    parser.add_argument("--bank", required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--fresh", type=int, default=10)
    args = parser.parse_args()
    sides = {"old": (args.old_src, args.old_url), "new": (args.new_src, args.new_url)}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _round in range(args.rounds):
        for side, (src, url) in sides.items():
            runs[side].append(_run(src, url, args.bank, args.queries, args.fresh))
    out: dict[str, Any] = {"bank": args.bank, "queries": args.queries, "rounds": args.rounds}
    for side, results in runs.items():
        first = results[0]
        total = sum(first["postings_bytes"].values())
        out[side] = {
            "lamina": first["lamina"],
            "memories": first["memories"],
            "postings_bytes": first["postings_bytes"],
            "postings_gb_per_million_memories": round(total / first["memories"] * 1e6 / 1e9, 3),
            **{
                key: _percentiles([v for r in results for v in r[key]])
                for key in (
                    "lexical_ms",
                    "lexical_exact_ms",
                    "recall_ms",
                    "fresh_process_lexical_ms",
                    "retain_ms",
                    "bulk_retain_500_ms",
                )
            },
        }
    out["lexical_rankings_identical"] = all(
        old["ranked"] == new["ranked"] for old, new in zip(runs["old"], runs["new"], strict=True)
    )
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
