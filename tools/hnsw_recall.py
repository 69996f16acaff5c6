"""HNSW recall against an exact scan on a kept `lamina bench latency` bank, per ef_search.

For LoCoMo questions (embedded with the default model, as the bench bank's vectors were), the
bank's HNSW index is asked for the best `depth` memories at each ef_search given, and an exact
scan gives the true ones; printed as JSON: recall@10 and recall@depth per ef_search, with the
index search's p50/p95 (wall ms, this client).

    python tools/hnsw_recall.py --database-url URL --bank lamina-bench-v2-300000 \
        --queries 60 --ef-search 100 200 400
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import orjson

from lamina.bench.common import percentiles
from lamina.bench.latency import _base_texts
from lamina.embed import default_embedder
from lamina.store.postgres import PostgresStore
from lamina.store.search import SearchFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--bank", required=True)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--ef-search", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--depth", type=int, nargs="+", default=[10, 200])
    args = parser.parse_args()
    _texts, questions = _base_texts()
    picks = random.Random(3)
    asked = [questions[picks.randrange(len(questions))] for _ in range(args.queries)]
    embedder = default_embedder()
    vectors = embedder.embed_documents(asked)
    store = PostgresStore(args.database_url, pool_min=1, pool_max=1)
    with store.pool.connection() as conn:
        row = conn.execute("SELECT id FROM banks WHERE name = %s", (args.bank,)).fetchone()
    if row is None:
        raise SystemExit(f"no bank {args.bank!r}")
    bank_id, dim = int(row[0]), int(vectors.shape[1])
    deepest = max(args.depth)
    exact = [
        [s for s, _ in store.dense_search(args.bank, v, deepest, SearchFilter(), exact=True)]
        for v in vectors
    ]
    out: dict[str, object] = {"bank": args.bank, "queries": len(asked), "runs": []}
    with store.pool.connection() as conn:
        for ef in args.ef_search:
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            for depth in args.depth:
                shares: dict[int, list[float]] = {10: [], depth: []}
                ms: list[float] = []
                for vector, truth in zip(vectors, exact, strict=True):
                    started = time.perf_counter()
                    found = [
                        int(r[0])
                        for r in conn.execute(
                            f"SELECT m.seq FROM memories m WHERE m.bank_id = {bank_id}"
                            f" AND vector_dims(m.embedding) = {dim}"
                            f" ORDER BY m.embedding::vector({dim}) <#> %s::vector({dim})"
                            " LIMIT %s",
                            (np.asarray(vector, dtype=np.float32), depth),
                        )
                    ]
                    ms.append((time.perf_counter() - started) * 1000)
                    for k, got in shares.items():
                        want = set(truth[:k])
                        got.append(len(set(found[:k]) & want) / max(len(want), 1))
                run = {"ef_search": ef, "depth": depth, "search_ms": percentiles(ms)}
                for k, got in shares.items():
                    run[f"recall_at_{k}"] = round(float(np.mean(got)), 3)
                out["runs"].append(run)  # type: ignore[attr-defined]
            conn.execute("RESET hnsw.ef_search")
    store.close()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
