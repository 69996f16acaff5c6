"""Checks that a store's own search answers as the in-process index does, shared by the
SQLite and PostgreSQL search suites: the synthetic bank both fill, and the checks each runs
against its filled store."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from lamina.bank.plan import recall_from_store
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.memories import Memory
from lamina.store.postgres import PostgresStore
from lamina.store.search import SearchFilter
from lamina.store.sqlite import SQLiteStore
from lamina.text.lexical import tokenize

from .oracle import BankIndex, recall_from_index

WORDS = [f"w{n}" for n in range(400)]
START = datetime(2024, 1, 1, tzinfo=UTC)
LATER = START + timedelta(days=700)
"""The reference time of the time questions: every memory is in its past."""


def zipf_text(rng: random.Random) -> str:
    # Common words appear in most memories, rare ones in few: MaxScore has to expand.
    return " ".join(
        WORDS[min(int(rng.paretovariate(0.6)) - 1, 399)] for _ in range(rng.randint(3, 30))
    )


def make_memories(n: int, seed: int = 5, prefix: str = "m") -> list[Memory]:
    """`n` memories of Zipf-distributed words over seven documents, five hours apart, half
    tagged odd, a third windows, every eleventh naming the entity Alpha."""
    embedder = HashEmbedder()
    rng = random.Random(seed)
    texts = [zipf_text(rng) for _ in range(n)]
    vectors = embedder.embed_documents(texts)
    return [
        Memory(
            id=f"{prefix}{i}",
            bank="b",
            document=f"doc{i % 7}",
            kind="turn" if i % 3 else "window",
            text=text,
            record_ids=(f"{prefix}r{i}",),
            occurred_at=START + timedelta(hours=5 * i),
            said_at=START + timedelta(hours=5 * i),
            tags=("odd",) if i % 2 else ("even",),
            entities=("Alpha",) if i % 11 == 0 else (),
            content_hash=str(i),
            embedding=vectors[i],
            embedder=embedder.name,
        )
        for i, text in enumerate(texts)
    ]


RECALL_CASES = pytest.mark.parametrize(
    "options",
    [
        RecallOptions(budget=100_000, limit=20),
        RecallOptions(budget=100_000, limit=20, documents=frozenset({"doc2", "doc5"})),
        RecallOptions(budget=100_000, limit=20, tags=frozenset({"odd"})),
        RecallOptions(budget=100_000, limit=20, kinds=frozenset({"window"})),
        RecallOptions(
            budget=100_000,
            limit=20,
            since=START + timedelta(days=100),
            until=START + timedelta(days=300),
        ),
        RecallOptions(
            budget=100_000, limit=20, exclude={"doc1": None, "doc3": START + timedelta(days=200)}
        ),
        RecallOptions(budget=300, limit=20),
    ],
    ids=["all", "documents", "tags", "kinds", "dates", "exclude", "budget"],
)
"""The filters and budgets recall must honour alike in the database and in the index."""


def _index(store: SQLiteStore | PostgresStore) -> BankIndex:
    index = BankIndex("b")
    index.refresh(store)
    return index


def check_lexical_search_is_exact_bm25(store: SQLiteStore | PostgresStore) -> None:
    """The store's lexical search finds what in-process BM25 ranks first, with its scores."""
    index = _index(store)
    rng = random.Random(9)
    for _ in range(25):
        query = " ".join(rng.choice(WORDS[:40]) for _ in range(rng.randint(1, 6)))
        expected = index.lexical.scores(query)
        order = sorted(np.flatnonzero(expected > 0).tolist(), key=lambda i: (-expected[i], i))
        got = store.lexical_search("b", tokenize(query), 200, SearchFilter())
        by_seq = store.memories_by_seq("b", [s for s, _ in got])
        want = [index.memories[i].id for i in order[:200]]
        assert sorted(by_seq[s].id for s, _ in got) == sorted(want), query
        for seq, score in got:
            slot = index.slot[by_seq[seq].id]
            assert score == pytest.approx(float(expected[slot]), rel=1e-4)


def check_recall_matches_the_index(
    store: SQLiteStore | PostgresStore, options: RecallOptions
) -> None:
    """Recall from the store returns the index's memories, in its order, with its counts."""
    index = _index(store)
    embedder = HashEmbedder()
    rng = random.Random(13)
    for _ in range(10):
        query = " ".join(rng.choice(WORDS[:60]) for _ in range(rng.randint(2, 5)))
        want = recall_from_index(index, query, embedder, options)
        got = recall_from_store(store, "b", query, embedder, options)
        assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], query
        assert got.considered == want.considered
        assert got.tokens == want.tokens


def check_time_and_entity_questions_rank_the_same(store: SQLiteStore | PostgresStore) -> None:
    index = _index(store)
    options = RecallOptions(budget=100_000, limit=15, now=LATER)
    for query, timed in (
        ("what happened in March 2024", True),
        ("w3 w8 last year", True),
        ("w5 in 2025", True),
        ("Alpha w2", False),
    ):
        want = recall_from_index(index, query, HashEmbedder(), options)
        got = recall_from_store(store, "b", query, HashEmbedder(), options)
        assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], query
        assert any("time" in h.channels for h in got.hits) is timed, query


def check_only_the_time_text_drives_the_time_channel(store: SQLiteStore | PostgresStore) -> None:
    """A composed query quotes "last year" from an earlier turn; the prompt itself names no
    time, so no time channel, in the database as in the index. A prompt naming one keeps it."""
    index = _index(store)
    query = "assistant: w3 was restored last year\nuser: w8 w3 w12"
    for time_text, timed in (("w8 w3 w12", False), ("w8 w3 w12 in 2025", True)):
        options = RecallOptions(budget=100_000, limit=15, now=LATER, time_text=time_text)
        want = recall_from_index(index, query, HashEmbedder(), options)
        got = recall_from_store(store, "b", query, HashEmbedder(), options)
        assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], time_text
        assert got.hits and any("time" in h.channels for h in got.hits) is timed
    whole = recall_from_store(store, "b", query, HashEmbedder(), RecallOptions(now=LATER, limit=15))
    assert any("time" in h.channels for h in whole.hits)  # without it the whole query counts


def check_a_channel_weighed_zero_is_left_out(store: SQLiteStore | PostgresStore) -> None:
    """With the dense channel weighed 0, recall answers as a bank without vectors would, in
    the database as in the index: the channel's candidates do not come back through the time
    channel (which scores whatever the others propose), and nothing is embedded."""
    index = _index(store)
    no_dense = {"lexical": 1.0, "time": 1.0, "entities": 1.0}
    options = RecallOptions(budget=100_000, limit=30, now=LATER, channel_weights=no_dense)

    class Unused(HashEmbedder):
        def embed_query(self, text: str) -> np.ndarray:  # type: ignore[type-arg]
            raise AssertionError("the dense channel is weighed 0: nothing should be embedded")

    for query in ("w3 w8 last year", "w5 in 2025", "Alpha w2 w7"):
        plain = recall_from_index(index, query, None, options)
        assert plain.hits, query
        for got in (
            recall_from_index(index, query, Unused(), options),
            recall_from_store(store, "b", query, Unused(), options),
        ):
            assert [h.memory.id for h in got.hits] == [h.memory.id for h in plain.hits], query
            assert not any("dense" in h.channels for h in got.hits)
