"""`lamina bench term-cache`: a server answering several PostgreSQL banks in turn, with less
memory for common terms' lists than the banks' lists take together.

Each process keeps the lists of common terms it has read (lamina.store.packs.PackCache) in
`lexical_pack_cache_bytes`. Several banks (built from the latency bench's texts, see
lamina.bench.latency.build) are searched in turn, a few dozen LoCoMo questions each turn, by
two stores side by side: one with the cache as shipped (least recently used first, but each
bank keeps a reserve and idle banks give first, see PackCache), the baseline with one
least-recently-used order over every bank. The budget is a
multiple (`--cache-share`) of what one bank's searches read over the run (its lists with room
for all of them), measured in the same run.

Turns alternate between the two stores (the shipped one first on even rounds), so both see the
same load. Reported per store, over the rounds after the first (the first fills the cache):
lexical search p50/p95 (wall ms), CPU per search (this process's thread and the database
server's backend, read from /proc), and the lists read from the database again (MB, the
misses); and the bytes each bank holds at the end. Query vectors are not needed: the banks'
vectors are small random ones (lexical search only).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import click
import numpy as np

from ..bank.bank import MemoryBank
from ..embed.hashed import HashEmbedder
from ..store.packs import PackCache
from ..store.postgres import PostgresStore
from ..store.postgres_postings import Held, held_bytes
from ..store.search import SearchFilter
from ..text.lexical import tokenize
from .common import emit, json_option, percentiles, process_cpu_ms
from .latency import _base_texts, build

__all__ = ["term_cache_bench"]

DIM = 16
"""The banks' vectors: random, small (this bench searches lexically only)."""
DEPTH = 200
"""Lexical search's depth in recall."""


class _Counted(PackCache[Held]):
    """The shipped cache, counting the bytes of lists put into it (read from the database),
    per bank."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, held_bytes)
        self.loaded: dict[int, int] = {}

    def put(self, bank_id: int, term: str, version: int, pack: Held) -> None:
        self.loaded[bank_id] = self.loaded.get(bank_id, 0) + held_bytes(pack)
        super().put(bank_id, term, version, pack)


class _OneOrder(_Counted):
    """The baseline: one least-recently-used order over every bank's packs (no reserves, no
    idle banks first)."""

    def _victim(self, putting: int) -> int:
        banks = [b for b in self._used if b != putting or len(self._banks[b]) > 1]
        return min(banks, key=lambda b: next(iter(self._banks[b].values()))[2])


@dataclass
class _Side:
    """One store searching the banks in turn, and what it measured."""

    name: str
    store: PostgresStore
    cache: _Counted
    backend: int
    ms: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: list[float] = field(default_factory=list)
    loaded_after_first_round: dict[int, int] = field(default_factory=dict)

    def turn(self, bank: str, queries: list[list[str]], timed: bool) -> None:
        for terms in queries:
            server, own = process_cpu_ms(self.backend), time.thread_time()
            started = time.perf_counter()
            self.store.lexical_search(bank, terms, DEPTH, SearchFilter())
            wall = (time.perf_counter() - started) * 1000
            cpu = (time.thread_time() - own) * 1000 + process_cpu_ms(self.backend) - server
            if timed:
                self.ms.setdefault(bank, []).append(wall)
                self.cpu_ms.append(cpu)


def _side(name: str, url: str, cache: _Counted) -> _Side:
    # One connection, so that its backend's CPU time is the server's share of every search.
    store = PostgresStore(url, pool_min=1, pool_max=1)
    store.lexical_pack_cache_bytes = cache.max_bytes
    store.__dict__["_packs"] = cache
    with store.pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return _Side(name, store, cache, int(row[0]) if row else 0)


def _banks(url: str, count: int, memories: int, fresh: bool) -> list[str]:
    """`count` banks of `memories` each (kept between runs), texts as the latency bench's."""
    store = PostgresStore(url)
    names = [f"lamina-bench-cache-{i}-{memories}" for i in range(count)]
    texts: list[str] | None = None
    for i, name in enumerate(names):
        held = store.count_memories(name, SearchFilter()) if store.get_bank(name) else 0
        if held == memories and not fresh:
            continue
        if texts is None:
            texts, _questions = _base_texts()
        store.delete_bank(name)
        store.ensure_bank(name)
        vectors = np.random.default_rng(i).normal(size=(len(texts), DIM)).astype(np.float32)
        build(MemoryBank(store, HashEmbedder(DIM)), name, memories, texts, vectors, seed=7 + i)
    store.close()
    return names


@click.command("term-cache")
@click.option("--database-url", required=True, metavar="URL", help="The PostgreSQL database.")
@click.option(
    "--banks", type=int, default=4, show_default=True, help="Banks built and searched in turn."
)
@click.option(
    "--memories", type=int, default=20_000, show_default=True, help="Memories in each bank."
)
@click.option(
    "--queries", type=int, default=40, show_default=True, help="Lexical searches a bank's turn."
)
@click.option("--rounds", type=int, default=4, show_default=True, help="Turns of every bank.")
@click.option(
    "--cache-share",
    type=float,
    default=1.0,
    show_default=True,
    help="The cache's bytes, as a multiple of what one bank's searches read in the run.",
)
@click.option(
    "--big",
    metavar="BANK",
    default=None,
    help="Also search this existing bank, first in each round, and size the cache by it (a"
    " bank `lamina bench latency` keeps, e.g. lamina-bench-v2-300000).",
)
@click.option("--fresh", is_flag=True, help="Rebuild the banks even if present.")
@json_option
def term_cache_bench(
    database_url: str,
    banks: int,
    memories: int,
    queries: int,
    rounds: int,
    cache_share: float,
    big: str | None,
    fresh: bool,
    as_json: bool,
) -> None:
    """Several PostgreSQL banks searched in turn with a term cache smaller than their lists:
    the shipped cache against one least-recently-used order over every bank.

    Example: lamina bench term-cache --database-url postgresql://localhost/lamina --json"""
    names = ([big] if big else []) + _banks(database_url, banks, memories, fresh)
    _texts, questions = _base_texts()
    picks = random.Random(11)

    def draw() -> list[list[str]]:
        return [tokenize(questions[picks.randrange(len(questions))]) for _ in range(queries)]

    plan = [[draw() for _ in names] for _ in range(rounds)]
    # What one bank's searches over the whole run read, with room for everything.
    sizing = _side("sizing", database_url, _Counted(1 << 40))
    for turns in plan:
        sizing.turn(names[0], turns[0], timed=False)
    one_bank = sizing.cache.bytes
    sizing.store.close()
    budget = max(1, int(one_bank * cache_share))
    sides = [
        _side("shipped", database_url, _Counted(budget)),
        _side("one_lru_order", database_url, _OneOrder(budget)),
    ]
    for number, turns in enumerate(plan):
        if number == 1:
            for side in sides:
                side.loaded_after_first_round = dict(side.cache.loaded)
        for name, asked in zip(names, turns, strict=True):
            for side in sides if number % 2 == 0 else sides[::-1]:
                side.turn(name, asked, timed=number > 0)
    result: dict[str, Any] = {}
    for side in sides:
        with side.store.pool.connection() as conn:
            rows = conn.execute("SELECT name, id FROM banks").fetchall()
        ids = {str(name): int(bank_id) for name, bank_id in rows}
        again = {
            n: side.cache.loaded.get(ids[n], 0) - side.loaded_after_first_round.get(ids[n], 0)
            for n in names
        }
        result[side.name] = {
            "lexical_search_ms": percentiles([ms for n in names for ms in side.ms[n]]),
            "cpu_ms_per_search": {
                "mean": round(statistics.fmean(side.cpu_ms), 2) if side.cpu_ms else 0,
                **percentiles(side.cpu_ms),
            },
            "lists_read_again_mb": round(sum(again.values()) / 1e6, 2),
            "per_bank": {
                n: {
                    "lexical_search_ms": percentiles(side.ms[n]),
                    "lists_read_again_mb": round(again[n] / 1e6, 2),
                    "held_mb": round(side.cache.bank_bytes(ids[n]) / 1e6, 2),
                }
                for n in names
            },
        }
        side.store.close()
    emit(
        {
            "benchmark": "term-cache",
            "banks": names,
            "memories_per_built_bank": memories,
            "queries_per_turn": queries,
            "rounds": rounds,
            "timed": "rounds after the first",
            "one_bank_mb": round(one_bank / 1e6, 2),
            "cache_mb": round(budget / 1e6, 2),
            **result,
        },
        as_json,
    )
