"""Searching inside PostgreSQL gives what the in-process index gives, filters included."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest

from lamina.bank.recall import RecallOptions
from lamina.errors import StoreError
from lamina.memories import Cursor, Memory
from lamina.store import packs, postgres_blocks, postgres_search
from lamina.store.base import RetainBatch
from lamina.store.postgres import PostgresStore
from lamina.store.search import SearchFilter
from lamina.text.lexical import BM25Index, tokenize

from .oracle import BankIndex
from .parity import (
    RECALL_CASES,
    START,
    WORDS,
    check_a_channel_weighed_zero_is_left_out,
    check_lexical_search_is_exact_bm25,
    check_only_the_time_text_drives_the_time_channel,
    check_recall_matches_the_index,
    check_time_and_entity_questions_rank_the_same,
    make_memories,
    zipf_text,
)


@pytest.fixture(scope="module")
def filled(pg_server: str) -> Iterator[tuple[PostgresStore, list[Memory]]]:
    import psycopg

    name = "lamina_search_test"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    store = PostgresStore(pg_server.rsplit("/", 1)[0] + "/" + name)
    memories = make_memories(3000)
    for doc in range(7):
        group = [m for m in memories if m.document == f"doc{doc}"]
        store.apply_retain(
            RetainBatch("b", f"doc{doc}", 0, Cursor(), [m.record_ids[0] for m in group], group)
        )
    yield store, memories
    store.close()


def test_lexical_search_is_exact_bm25(filled: tuple[PostgresStore, list[Memory]]) -> None:
    check_lexical_search_is_exact_bm25(filled[0])


def _assert_exact(
    store: PostgresStore, bank: str, queries: list[list[str]], where: SearchFilter | None = None
) -> None:
    """Lexical search in the database ranks as the in-process index does."""
    index = BankIndex(bank)
    index.refresh(store)
    where = where or SearchFilter()
    keep = index.mask(exclude=where.exclude)
    assert store.count_memories(bank, where) == int(keep.sum())
    for terms in queries:
        expected = index.lexical.scores(terms)
        expected[~keep] = 0
        order = sorted(np.flatnonzero(expected > 0).tolist(), key=lambda i: (-expected[i], i))
        got = store.lexical_search(bank, terms, 50, where)
        by_seq = store.memories_by_seq(bank, [s for s, _ in got])
        want = [index.memories[i].id for i in order[:50]]
        assert sorted(by_seq[s].id for s, _ in got) == sorted(want), terms
        for seq, score in got:
            slot = index.slot[by_seq[seq].id]
            assert score == pytest.approx(float(expected[slot]), rel=1e-4)


def _queries(seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [
        tokenize(" ".join(rng.choice(WORDS[:40]) for _ in range(rng.randint(1, 6))))
        for _ in range(15)
    ]


@pytest.mark.parametrize(
    ("path", "readers"),
    [("in-memory", 1), ("proving", 1), ("in-memory", 2), ("proving", 2)],
    ids=["in-memory", "proving", "in-memory-other-store", "proving-other-store"],
)
def test_packed_postings_follow_every_change(
    filled: tuple[PostgresStore, list[Memory]],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    readers: int,
) -> None:
    """Postings live in per-term blocks (small ones here, so that lists span many, appends
    fill open blocks and start new ones, and trailing blocks merge), and common terms'
    lists are held in memory between searches; deleting, replacing and adding memories, and
    changing entities, never leave a search reading an out-of-date list: neither the
    search that scores every memory holding a query term from lists held in memory nor
    the one that proves which cannot matter, and neither when the same store wrote nor when
    another one (another process or host, its lists held in its own memory) did."""
    writer, _ = filled
    reader = writer if readers == 1 else PostgresStore(writer.url)
    bank = f"packs-{path}-{readers}"
    for store in {writer, reader}:
        monkeypatch.setattr(store, "lexical_pack_min", 20)
    monkeypatch.setattr(postgres_blocks, "BLOCK_OPEN", 4)
    monkeypatch.setattr(postgres_blocks, "BLOCK_MAX", 16)
    monkeypatch.setattr(postgres_blocks, "RUN", 3)
    if path == "proving":
        monkeypatch.setattr(postgres_search, "IN_MEMORY_COST", 0)
    rng = random.Random(21)

    def batch(doc: str, first: int, count: int) -> None:
        group = [
            Memory(
                id=f"p{i}",
                bank=bank,
                document=doc,
                kind="turn",
                text=zipf_text(rng),
                record_ids=(f"r{i}",),
                content_hash=f"{i}-{rng.random()}",
            )
            for i in range(first, first + count)
        ]
        version = writer.get_cursor(bank, doc).version
        records = [m.record_ids[0] for m in group]
        writer.apply_retain(RetainBatch(bank, doc, version, Cursor(), records, group))

    for doc in range(4):
        batch(f"d{doc}", doc * 100, 100)
    for first in range(400, 420, 2):  # small retains: appended to the terms' last blocks
        batch("d6", first, 2)
    _assert_exact(reader, bank, _queries(1))
    # No block holds more than BLOCK_MAX, and at most RUN smaller ones end a list.
    largest, trailing = _block_shapes(writer, bank)
    assert largest == 16 and trailing < 3
    cache = reader._pack_cache()
    assert cache is not None and cache.bytes > 0  # held for the next search
    _assert_exact(reader, bank, _queries(1))
    batch("d4", 420, 3)  # a few newer postings: the held lists' newest blocks sent
    _assert_exact(reader, bank, _queries(2))
    writer.delete_document(bank, "d1")
    _assert_exact(reader, bank, _queries(3))
    writer.delete_memory(bank, "p5")
    batch("d0", 10, 20)  # memories replaced: new seqs, old postings gone
    _assert_exact(reader, bank, _queries(4))
    batch("d5", 500, 60)  # many newer postings: blocks merged
    _assert_exact(reader, bank, _queries(5))
    _assert_exact(writer, bank, _queries(5))
    _assert_exact(reader, bank, _queries(5))
    # Entity postings are added to old memories: the blocks they fall in are rewritten.
    named = {f"p{i}": ["Kestrel"] if i % 3 else ["Osprey"] for i in range(200, 260)}
    writer.set_entities(bank, named)
    entity_queries = [["\x01Kestrel"], ["\x01Osprey", "w1"], ["\x01Kestrel", "\x01Osprey"]]
    _assert_exact(reader, bank, entity_queries)
    writer.set_entities(bank, {f"p{i}": ["Osprey"] for i in range(200, 230)})
    _assert_exact(reader, bank, entity_queries)
    _assert_exact(writer, bank, entity_queries)
    # The same counts and the same newest posting as the lists held: only the version tells.
    writer.set_entities(bank, {"p230": ["Osprey"], "p231": ["Kestrel"]})
    _assert_exact(writer, bank, entity_queries)
    _assert_exact(reader, bank, entity_queries)
    assert _block_shapes(writer, bank)[0] <= 16
    if reader is not writer:
        reader.close()


def _block_shapes(store: PostgresStore, bank: str) -> tuple[int, int]:
    """The most postings in one block of the bank, and the longest run of blocks smaller
    than the largest that ends a term's list."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT k.term, k.n FROM posting_blocks k JOIN banks b ON b.id = k.bank_id"
            " WHERE b.name = %s ORDER BY k.term, k.first_seq",
            (bank,),
        ).fetchall()
    largest = max(int(n) for _, n in rows)
    lists: dict[str, list[int]] = {}
    for term, n in rows:
        lists.setdefault(str(term), []).append(int(n))
    trailing = 0
    for sizes in lists.values():
        run = 0
        for n in reversed(sizes):
            if n >= largest:
                break
            run += 1
        trailing = max(trailing, run)
    return largest, trailing


def test_a_read_only_database_searches_exactly_with_or_without_packs(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store on a database it may not write to (a hot standby, a read-only role) opens
    without migrating, searches exactly and holds the common terms' lists it read: reading
    never writes."""
    writer, _ = filled
    readonly = PostgresStore(writer.url + "?options=-c%20default_transaction_read_only%3Don")
    for store in (writer, readonly):
        monkeypatch.setattr(store, "lexical_pack_min", 20)
    rng = random.Random(31)
    group = [
        Memory(
            id=f"s{i}",
            bank="standby",
            document="d",
            kind="turn",
            text=zipf_text(rng),
            record_ids=(f"r{i}",),
            content_hash=str(i),
        )
        for i in range(300)
    ]
    writer.apply_retain(
        RetainBatch("standby", "d", 0, Cursor(), [f"r{i}" for i in range(300)], group)
    )
    with pytest.raises(StoreError, match=r"refuses this write .*read-only transaction"):
        readonly.delete_document("standby", "d")
    _assert_exact(readonly, "standby", _queries(41))
    cache = readonly._pack_cache()
    assert cache is not None and cache.bytes > 0
    _assert_exact(readonly, "standby", _queries(42))
    readonly.close()


def test_packs_held_in_memory_stay_within_their_bytes(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store keeps at most `lexical_pack_cache_bytes` of packs, the least recently used
    going first, and searches stay exact whatever it holds; 0 keeps none."""
    writer, _ = filled
    store = PostgresStore(writer.url)
    monkeypatch.setattr(store, "lexical_pack_min", 20)
    monkeypatch.setattr(store, "lexical_pack_cache_bytes", 40_000)
    _assert_exact(store, "b", _queries(11))
    cache = store._pack_cache()
    assert cache is not None and 0 < cache.bytes <= 40_000
    monkeypatch.setattr(store, "lexical_pack_cache_bytes", 0)
    assert store._pack_cache() is None
    _assert_exact(store, "b", _queries(12))
    store.close()


def _fill(store: PostgresStore, bank: str, count: int, seed: int) -> None:
    rng = random.Random(seed)
    group = [
        Memory(
            id=f"{bank}-{i}",
            bank=bank,
            document="d",
            kind="turn",
            text=zipf_text(rng),
            record_ids=(f"r{i}",),
            content_hash=str(i),
        )
        for i in range(count)
    ]
    records = [m.record_ids[0] for m in group]
    store.apply_retain(RetainBatch(bank, "d", 0, Cursor(), records, group))


def test_a_big_bank_does_not_push_the_other_banks_lists_out(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server answering several banks in turn, with less memory for lists than the big
    bank's alone: searching the big bank does not push the small banks' lists out (each
    keeps its reserve); every bank's answers stay exact throughout, and the lists held
    never pass their bytes."""
    writer, _ = filled
    small = ["turn-a", "turn-b", "turn-c"]
    for seed, bank in enumerate(small):
        _fill(writer, bank, 400, 50 + seed)
    store = PostgresStore(writer.url)
    monkeypatch.setattr(store, "lexical_pack_min", 20)
    # What the big bank's lists take when nothing is pushed out.
    _assert_exact(store, "b", _queries(61))
    cache = store._pack_cache()
    assert cache is not None
    alone = cache.bytes
    monkeypatch.setattr(store, "lexical_pack_cache_bytes", alone // 2)
    for _round in range(2):
        for bank in small:
            _assert_exact(store, bank, _queries(62))
        _assert_exact(store, "b", _queries(61))  # more than the room left
        cache = store._pack_cache()
        assert cache is not None and 0 < cache.bytes <= alone // 2
        with store.pool.connection() as conn:
            ids = dict(conn.execute("SELECT name, id FROM banks").fetchall())
        for bank in small:
            assert cache.bank_bytes(ids[bank]) > 0, bank
        assert cache.bank_bytes(ids["b"]) > 0
    store.close()


def test_the_pack_cache_keeps_each_banks_reserve_and_drains_idle_banks_first() -> None:
    """Past its bytes, a PackCache drops the least recently used pack of the banks holding
    more than their reserve (RESERVED of the bytes, shared equally), so a bank searched
    without pause cannot push another's last lists out; a bank idle for IDLE_SECONDS gives
    first, reserve or not; the pack just put never goes, nor one larger than the budget in."""
    now = [0.0]
    cache: packs.PackCache[int] = packs.PackCache(100, lambda size: size, clock=lambda: now[0])
    assert 100 * packs.RESERVED / 2 == 12.5  # each bank's reserve while two hold packs
    cache.put(1, "a", 1, 10)
    for i in range(10):  # a busy bank reads list after list
        cache.put(2, f"t{i}", 1, 15)
        assert cache.bytes <= 100
    assert cache.holds(1, "a")  # within its reserve: kept, least recently used or not
    assert [cache.holds(2, f"t{i}") for i in range(10)] == [False] * 4 + [True] * 6
    cache.put(1, "b", 1, 20)  # bank 1 past its reserve: the oldest packs go
    assert [cache.holds(*k) for k in ((1, "a"), (1, "b"), (2, "t4"), (2, "t5"))] == [
        False, True, False, True
    ]  # fmt: skip
    now[0] = packs.IDLE_SECONDS + 1
    cache.held(2, ["t9"])
    cache.put(2, "u", 1, 15)  # bank 1 idle: its pack goes first, reserve or not
    assert cache.bank_bytes(1) == 0 and cache.holds(2, "u") and cache.bytes <= 100
    cache.put(3, "huge", 1, 100)  # as much as the whole budget: everything else goes
    assert (cache.bytes, cache.bank_bytes(2), cache.holds(3, "huge")) == (100, 0, True)
    cache.put(3, "more", 1, 101)  # more than the budget: not kept
    assert not cache.holds(3, "more") and cache.holds(3, "huge")


@pytest.mark.parametrize("path", ["in-memory", "proving"])
def test_a_filter_that_only_excludes_still_reads_the_packs(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The exclude-this-session filter takes the session's memories out of what is read
    (packs included) and ranks exactly as the index does; so does the SQL filter it falls
    back to when the excluded documents hold too many memories."""
    store, _ = filled
    monkeypatch.setattr(store, "lexical_pack_min", 20)
    if path == "proving":
        monkeypatch.setattr(postgres_search, "IN_MEMORY_COST", 0)
    filters = [
        SearchFilter(exclude={"doc1": None}),
        SearchFilter(exclude={"doc1": None, "doc3": START + timedelta(days=200)}),
        SearchFilter(exclude={"doc4": START + timedelta(days=10_000), "nowhere": None}),
    ]
    for where in filters:
        _assert_exact(store, "b", _queries(7), where)
    cache = store._pack_cache()
    assert cache is not None and cache.bytes > 0
    monkeypatch.setattr(postgres_search, "EXCLUDED_MAX", 10)
    for where in filters:
        _assert_exact(store, "b", _queries(8), where)


def test_scoring_after_a_search_gives_what_a_fresh_scoring_gives(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """lexical_scores right after a lexical search reuses what the search read; the scores
    are the ones a scoring of its own gives, for memories the search's filter left out too,
    and never another query's or another bank's."""
    store, _ = filled
    monkeypatch.setattr(store, "lexical_pack_min", 20)
    other = PostgresStore(store.url)
    seqs = sorted(store.memories_by_seq("b", list(range(1, 4000)), with_embeddings=False))
    sample = random.Random(4).sample(seqs, 300)
    for where in (SearchFilter(), SearchFilter(exclude={"doc2": None})):
        for query in (["w1", "w3", "w9"], ["w2"], ["w1", "w1", "w40"]):
            store.lexical_search("b", query, 50, where)
            got = store.lexical_scores("b", query, sample)
            assert got == other.lexical_scores("b", query, sample), (query, where)
            assert got  # the bank holds these words
            assert store.lexical_scores("b", ["w5"], sample) == other.lexical_scores(
                "b", ["w5"], sample
            )
            assert store.lexical_scores("nowhere", query, sample) == {}
    other.close()


def test_term_counts(filled: tuple[PostgresStore, list[Memory]]) -> None:
    store, memories = filled
    index = BankIndex("b")
    index.refresh(store)
    size, df = store.term_counts("b", ["w1", "w7", "nowhere", "w1"])
    assert size == len(memories)
    assert df == {"w1": index.lexical.df("w1"), "w7": index.lexical.df("w7")}
    assert store.term_counts("no-such-bank", ["w1"]) == (0, {})


def test_a_term_no_memory_holds_leaves_no_row(pg_url: str) -> None:
    """Deleting the last memories that hold a term removes its document-frequency row
    (deletes, replacements and entity changes alike), a later memory holding it counts it
    again from 1, and a database whose deletes left rows at 0 loses them on migrating."""
    store = PostgresStore(pg_url)

    def counted() -> dict[str, int]:
        with store.pool.connection() as conn:
            rows = conn.execute("SELECT term, df FROM term_counts").fetchall()
        return {str(term): int(df) for term, df in rows}

    def memory(i: int, text: str, document: str, entities: tuple[str, ...] = ()) -> Memory:
        return Memory(
            id=f"z{i}", bank="z", document=document, kind="turn", text=text,
            record_ids=(f"r{i}",), content_hash=text, entities=entities,
        )  # fmt: skip

    def retain(document: str, group: list[Memory]) -> None:
        version = store.get_cursor("z", document).version
        records = [m.record_ids[0] for m in group]
        store.apply_retain(RetainBatch("z", document, version, Cursor(), records, group))

    retain("a", [memory(0, "kestrel common", "a"), memory(1, "osprey common", "a")])
    retain("b", [memory(2, "common heron", "b", ("Egret",))])
    assert {"kestrel", "osprey", "heron", "\x01Egret"} <= counted().keys()
    store.delete_memory("z", "z0")
    assert "kestrel" not in counted() and counted()["common"] == 2
    retain("a", [memory(1, "common plover", "a")])  # replaced: osprey goes, plover comes
    assert "osprey" not in counted() and counted()["plover"] == 1
    store.set_entities("z", {"z2": ["Ibis"]})
    assert "\x01Egret" not in counted() and counted()["\x01Ibis"] == 1
    store.delete_document("z", "b")
    assert counted() == {"common": 1, "plover": 1}
    retain("c", [memory(3, "kestrel again", "c")])
    assert counted()["kestrel"] == 1
    assert [s for s, _ in store.lexical_search("z", ["kestrel"], 5, SearchFilter())] == [
        s for s, m in store.memories_by_seq("z", list(range(1, 100))).items() if m.id == "z3"
    ]
    # Rows left at 0 by an earlier version go when the migration runs.
    with store.pool.connection() as conn:
        conn.execute(
            "INSERT INTO term_counts (bank_id, term, df, version)"
            " SELECT id, 'stale', 0, 1 FROM banks WHERE name = 'z'"
        )
        conn.execute("DELETE FROM schema_migrations WHERE name = '0012_term_counts_without_zeros'")
    assert store.migrate() == ["0012_term_counts_without_zeros"]
    assert "stale" not in counted() and counted()["kestrel"] == 1
    store.close()


def test_bm25_statistics_follow_deletions(filled: tuple[PostgresStore, list[Memory]]) -> None:
    store, memories = filled
    plain = BM25Index()
    plain.add_many(m.text for m in memories)
    # The store counts live memories only; before any deletion it matches a plain index.
    query = tokenize("w1 w7 w33")
    got = dict(store.lexical_search("b", query, 5, SearchFilter()))
    by_seq = store.memories_by_seq("b", list(got))
    expected = plain.scores(query)
    for seq, score in got.items():
        assert score == pytest.approx(float(expected[int(by_seq[seq].id[1:])]), rel=1e-4)


@RECALL_CASES
def test_recall_in_the_database_matches_the_index(
    filled: tuple[PostgresStore, list[Memory]], options: RecallOptions
) -> None:
    check_recall_matches_the_index(filled[0], options)


def test_time_and_entity_questions_rank_the_same(
    filled: tuple[PostgresStore, list[Memory]],
) -> None:
    check_time_and_entity_questions_rank_the_same(filled[0])


def test_only_the_time_text_drives_the_time_channel_in_both_paths(
    filled: tuple[PostgresStore, list[Memory]],
) -> None:
    check_only_the_time_text_drives_the_time_channel(filled[0])


def test_a_channel_weighed_zero_is_left_out_in_both_paths(
    filled: tuple[PostgresStore, list[Memory]],
) -> None:
    check_a_channel_weighed_zero_is_left_out(filled[0])


def test_hnsw_finds_nearly_what_exact_search_finds(
    filled: tuple[PostgresStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, memories = filled
    matrix = np.stack([m.embedding for m in memories if m.embedding is not None])
    rng = np.random.default_rng(2)
    overlap = []
    monkeypatch.setattr(postgres_search, "EXACT_LIMIT", 100)  # a "big" bank: HNSW
    assert store.ensure_vector_index("b", matrix.shape[1])
    for _ in range(20):
        query = matrix[int(rng.integers(len(matrix)))] + rng.normal(0, 0.05, matrix.shape[1])
        query = (query / np.linalg.norm(query)).astype(np.float32)
        exact = {f"m{i}" for i in np.argsort(-(matrix @ query))[:10]}
        got = store.dense_search("b", query, 10, SearchFilter())
        ids = {m.id for m in store.memories_by_seq("b", [s for s, _ in got]).values()}
        overlap.append(len(ids & exact) / 10)
        scores = [score for _, score in got]
        assert scores == sorted(scores, reverse=True)
    assert float(np.mean(overlap)) >= 0.9


def test_the_url_sizes_the_pool_and_the_pack_memory() -> None:
    store = PostgresStore(
        "postgresql://lamina@db/lamina?pool_max=3&pack_cache_mb=64&sslmode=require"
    )
    assert (store.pool_max, store.lexical_pack_cache_bytes) == (3, 64 << 20)
    assert store.url == "postgresql://lamina@db/lamina?sslmode=require"  # passed on as is
    spaced = PostgresStore("postgresql://db/x?pool_max=2&options=-c%20work_mem%3D8MB")
    assert spaced.url == "postgresql://db/x?options=-c%20work_mem%3D8MB"  # not "+" for " "
    assert PostgresStore("postgresql://db/x").lexical_pack_cache_bytes == 256 << 20
    with pytest.raises(StoreError, match=r"pack_cache_mb='lots' in the URL is not a number"):
        PostgresStore("postgresql://lamina:secret@db/x?pack_cache_mb=lots")
    with pytest.raises(StoreError, match="pool_max='0'") as failed:
        PostgresStore("postgresql://lamina:secret@db/x?pool_max=0")
    assert "secret" not in str(failed.value)


@pytest.mark.parametrize(
    ("count", "gap", "tf", "length"),
    [(1, 1, 1, 1), (2, 65_535, 255, 65_535), (3, 65_536, 256, 65_536), (500, 2**33, 2**17, 9)],
)
def test_packs_are_written_narrow_and_read_back_whole(
    count: int, gap: int, tf: int, length: int
) -> None:
    """A pack takes the fewest bytes that hold its numbers, and reads back exactly, at
    every width's edge."""
    rng = np.random.default_rng(count)
    seqs = 10**9 + np.cumsum(rng.integers(1, gap, count, endpoint=True)).astype(np.int64)
    seqs[-1] = seqs[-2] + gap if count > 1 else seqs[-1]
    tfs = rng.integers(1, tf, count, endpoint=True).astype(np.int32)
    lengths = rng.integers(1, length, count, endpoint=True).astype(np.int32)
    tfs[-1], lengths[-1] = tf, length
    packed = packs.encode((seqs, tfs, lengths))
    assert len(packed[1]) == count * {1: 1, 255: 1, 256: 2, 2**17: 4}[tf]
    assert len(packed[2]) == count * {1: 2, 65_535: 2, 65_536: 4, 9: 2}[length]
    if count > 1:
        assert len(packed[0]) == 8 + (count - 1) * {1: 2, 65_535: 2, 65_536: 4, 2**33: 8}[gap]
    for got, want in zip(packs.decode(count, *packed), (seqs, tfs, lengths), strict=True):
        assert np.array_equal(got, want)
