"""Searching inside SQLite gives what the in-process index gives, filters included, and the
bank's vector file follows every change to the database."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.plan import recall_from_store
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.memories import Cursor, Memory
from lamina.store.base import RetainBatch
from lamina.store.search import SearchFilter, SearchStore
from lamina.store.sqlite import SQLiteStore
from lamina.store.vectors import VectorFile, vector_dir
from lamina.text.lexical import tokenize

from .oracle import BankIndex, recall_from_index
from .parity import (
    RECALL_CASES,
    check_a_channel_weighed_zero_is_left_out,
    check_lexical_search_is_exact_bm25,
    check_only_the_time_text_drives_the_time_channel,
    check_recall_matches_the_index,
    check_time_and_entity_questions_rank_the_same,
    make_memories,
)


def retain(store: SQLiteStore, memories: list[Memory]) -> None:
    for doc in sorted({m.document for m in memories}):
        group = [m for m in memories if m.document == doc]
        version = store.get_cursor("b", doc).version
        store.apply_retain(
            RetainBatch("b", doc, version, Cursor(), [m.record_ids[0] for m in group], group)
        )


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SQLiteStore, list[Memory]]]:
    store = SQLiteStore(tmp_path_factory.mktemp("search") / "lamina.db")
    memories = make_memories(3000)
    retain(store, memories)
    yield store, memories
    store.close()


def ids_of(store: SQLiteStore, found: list[tuple[int, float]]) -> list[str]:
    by_seq = store.memories_by_seq("b", [s for s, _ in found])
    return [by_seq[s].id for s, _ in found]


def test_sqlite_is_a_search_store_and_its_banks_are_searchable(
    filled: tuple[SQLiteStore, list[Memory]],
) -> None:
    store, _ = filled
    assert isinstance(store, SearchStore)
    assert store.searchable("b") and store.searchable("not-yet-created")


def test_lexical_search_is_exact_bm25(filled: tuple[SQLiteStore, list[Memory]]) -> None:
    check_lexical_search_is_exact_bm25(filled[0])


def test_dense_search_is_exact(filled: tuple[SQLiteStore, list[Memory]]) -> None:
    store, memories = filled
    matrix = np.stack([m.embedding for m in memories if m.embedding is not None])
    rng = np.random.default_rng(2)
    for _ in range(10):
        query = matrix[int(rng.integers(len(matrix)))] + rng.normal(0, 0.05, matrix.shape[1])
        query = (query / np.linalg.norm(query)).astype(np.float32)
        products = matrix @ query
        best = np.sort(products)[::-1][:20]
        got = store.dense_search("b", query, 20, SearchFilter(), HashEmbedder().name)
        assert [score for _, score in got] == pytest.approx(best.tolist(), abs=1e-5)
        for memory_id, (_seq, score) in zip(ids_of(store, got), got, strict=True):
            assert score == pytest.approx(float(products[int(memory_id[1:])]), abs=1e-5)
        seqs = [seq for seq, _ in got]
        ties = [a < b for (a, x), (b, y) in itertools.pairwise(got) if x == y]
        assert all(ties) and len(set(seqs)) == len(seqs)  # ties go to the lower seq
        assert store.dense_search("b", query, 20, SearchFilter(), "another-model@1") == []


def test_equal_vectors_tie_and_the_earlier_memory_wins_wherever_they_are_scored(
    tmp_path: Path,
) -> None:
    # The same text retained twice has the same vector: its memories must score the same to
    # the bit in the scan of the file, in the scoring of a recall's other candidates and
    # from the database, so that the earlier one always ranks first.
    store = SQLiteStore(tmp_path / "lamina.db")
    rng = np.random.default_rng(4)
    shared = rng.normal(size=(5, 384)).astype(np.float32)
    memories = [
        Memory(**{**_fields(m), "embedding": shared[i % 5]})
        for i, m in enumerate(make_memories(1023))
    ]
    retain(store, memories)
    name = HashEmbedder().name
    query = rng.normal(size=384).astype(np.float32)
    by_seq = {int(seq): mid for seq, mid in store.conn.execute("SELECT seq, id FROM memories")}
    found = store.dense_search("b", query, 1023, SearchFilter(), name)
    scores = dict(found)
    assert len(set(scores.values())) == 5
    for (seq, score), (later, later_score) in itertools.pairwise(found):
        assert score > later_score or (score == later_score and seq < later)
    assert store.dense_scores("b", query, sorted(by_seq), name) == scores
    store.close()


@RECALL_CASES
def test_recall_in_the_database_matches_the_index(
    filled: tuple[SQLiteStore, list[Memory]], options: RecallOptions
) -> None:
    check_recall_matches_the_index(filled[0], options)


def test_time_and_entity_questions_rank_the_same(
    filled: tuple[SQLiteStore, list[Memory]],
) -> None:
    check_time_and_entity_questions_rank_the_same(filled[0])


def test_only_the_time_text_drives_the_time_channel_in_both_paths(
    filled: tuple[SQLiteStore, list[Memory]],
) -> None:
    check_only_the_time_text_drives_the_time_channel(filled[0])


def test_a_channel_weighed_zero_is_left_out_in_both_paths(
    filled: tuple[SQLiteStore, list[Memory]],
) -> None:
    check_a_channel_weighed_zero_is_left_out(filled[0])


def test_recall_reads_token_counts_kept_at_retain(
    filled: tuple[SQLiteStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = filled
    import lamina.bank.assemble as recall_module

    def no_counting(text: str) -> int:
        raise AssertionError("recall counted tokens instead of reading them")

    import lamina.tokens

    monkeypatch.setattr(recall_module, "count_text", no_counting)
    monkeypatch.setattr(lamina.tokens, "count_text", no_counting)
    result = recall_from_store(store, "b", "w1 w2", HashEmbedder(), RecallOptions(budget=500))
    assert result.hits and all(h.tokens == h.memory.tokens for h in result.hits)


def _same_as_index(store: SQLiteStore, query: str, where: SearchFilter | None = None) -> None:
    options = RecallOptions(budget=100_000, limit=30, exclude=(where or SearchFilter()).exclude)
    index = BankIndex("b")
    index.refresh(store)
    want = recall_from_index(index, query, HashEmbedder(), options)
    got = recall_from_store(store, "b", query, HashEmbedder(), options)
    assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], query


def test_the_vector_file_follows_every_change(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(600)
    retain(store, memories[:300])
    bank_id = int(store.conn.execute("SELECT id FROM banks WHERE name = 'b'").fetchone()[0])
    vectors = VectorFile(vector_dir(store.path), bank_id, HashEmbedder().name)
    header = vectors.header()
    assert header is not None and header.count == 300  # written by retain itself
    _same_as_index(store, "w1 w4 w9")

    # Appended: a retain adds rows.
    retain(store, memories[300:])
    header = vectors.header()
    assert header is not None and header.count == 600
    _same_as_index(store, "w2 w3")

    # Replaced memories (same id, new text and vector) and deleted ones never come back.
    changed = [
        Memory(**{**_fields(m), "text": "w399 w398 replaced", "content_hash": "new"})
        for m in memories[:50]
    ]
    changed = [
        Memory(**{**_fields(m), "embedding": HashEmbedder().embed_documents([m.text])[0]})
        for m in changed
    ]
    retain(store, changed)
    store.delete_document("b", "doc4")
    _same_as_index(store, "w399 replaced")
    _same_as_index(store, "w1 w4 w9")
    found = store.dense_search("b", changed[0].embedding, 600, SearchFilter(), HashEmbedder().name)  # type: ignore[arg-type]
    live = {int(r[0]) for r in store.conn.execute("SELECT seq FROM memories")}
    assert {seq for seq, _ in found} <= live and len(found) == len(live)

    # Vectors changed in place (reindex): the file is rebuilt, not trusted.
    flipped = {m.id: -np.asarray(m.embedding) for m in memories[60:90]}
    store.set_embeddings("b", flipped, HashEmbedder().name)
    _same_as_index(store, "w2 w7")

    # A damaged file is rebuilt; a deleted bank takes its files along.
    vectors.path.write_bytes(b"not a vector file")
    _same_as_index(store, "w5 w6")
    assert store.delete_bank("b")
    assert not list(vector_dir(store.path).glob(f"{bank_id}-*.vec"))
    store.close()


def test_a_vector_file_others_may_write_or_cut_short_is_made_again_not_read(
    tmp_path: Path,
) -> None:
    # Searches map the vector file and trust what it says: one that another local user may
    # have written (here with every vector turned around) is rebuilt from the database, and
    # so is one shorter than its header says.
    store = SQLiteStore(tmp_path / "lamina.db")
    retain(store, make_memories(400))
    bank_id = int(store.conn.execute("SELECT id FROM banks WHERE name = 'b'").fetchone()[0])
    vectors = VectorFile(vector_dir(store.path), bank_id, HashEmbedder().name)
    _same_as_index(store, "w1 w4 w9")
    header = vectors.header()
    assert header is not None
    data = bytearray(vectors.path.read_bytes())
    start, end = header.vectors_at, header.vectors_at + 4 * header.dim * header.count
    data[start:end] = (-np.frombuffer(bytes(data[start:end]), dtype=np.float32)).tobytes()
    hostile = vectors.path.with_name("hostile")
    hostile.write_bytes(bytes(data))
    hostile.chmod(0o666)
    hostile.replace(vectors.path)
    _same_as_index(store, "w2 w3 w8")
    assert vectors.path.stat().st_mode & 0o777 == 0o600

    short = vectors.path.with_name("short")
    short.write_bytes(vectors.path.read_bytes()[: header.vectors_at + 4 * header.dim])
    short.chmod(0o600)
    short.replace(vectors.path)
    _same_as_index(store, "w5 w6")
    assert vectors.path.stat().st_size == header.size
    store.close()


def test_dense_scores_are_the_stored_vectors_products_before_and_after_the_file_grows(
    tmp_path: Path,
) -> None:
    # A recall scores its other channels' candidates from the vector file the dense search
    # mapped; memories stored after that mapping, and memories without a vector, are still
    # scored from (or absent in) the database.
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(500)
    bare = [Memory(**{**_fields(m), "embedding": None, "embedder": None}) for m in memories[:20]]
    retain(store, bare + memories[20:300])
    name = HashEmbedder().name
    query = np.asarray(memories[33].embedding, dtype=np.float32)
    assert store.dense_search("b", query, 5, SearchFilter(), name)  # maps the file
    retain(store, memories[300:])  # appended after the mapping

    by_seq = {int(seq): mid for seq, mid in store.conn.execute("SELECT seq, id FROM memories")}
    vectors = {m.id: m.embedding for m in memories[20:]}
    got = store.dense_scores("b", query, sorted(by_seq), name)
    assert sorted(got) == sorted(s for s, mid in by_seq.items() if mid in vectors)
    for seq, score in got.items():
        assert score == pytest.approx(float(np.dot(vectors[by_seq[seq]], query)), abs=1e-6)
    store.close()


def test_vectors_filled_after_their_text_reach_a_reader_that_searched_between(
    tmp_path: Path,
) -> None:
    """Retain commits text first and vectors after; a search between the two (the prompt
    hook while a retain embeds) must not make the reader miss the vectors that come later,
    also when two retains fill theirs in the other order."""
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(600)
    retain(store, memories[:200])
    bare = [Memory(**{**_fields(m), "embedding": None, "embedder": None}) for m in memories[200:]]
    retain(store, bare)
    _same_as_index(store, "w1 w4 w9")  # the file is read while 400 memories await vectors
    name = HashEmbedder().name
    first, second = memories[200:400], memories[400:]
    # The later retain fills first: the reader extends its file past the earlier ones...
    hashes = {m.id: m.content_hash for m in memories}
    later = {m.id: m.embedding for m in second}
    assert store.set_embeddings("b", later, name, hashes=hashes) == 200
    _same_as_index(store, "w2 w3")
    earlier = {m.id: m.embedding for m in first}
    assert store.set_embeddings("b", earlier, name, hashes=hashes) == 200
    # ...and still finds these, which came after it had passed them.
    _same_as_index(store, "w2 w3")
    _same_as_index(store, "w5 w6 w7")
    assert store.bank_stats("b").embedded == 600
    store.close()


def _fields(memory: Memory) -> dict[str, object]:
    return {name: getattr(memory, name) for name in Memory.__dataclass_fields__}


def test_counts_are_kept_through_every_write(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(200)
    retain(store, memories)
    retain(store, memories[:10])  # stored again: replaced, not added
    store.delete_memory("b", "m11")
    store.delete_document("b", "doc3")
    store.set_embeddings("b", {"m12": np.ones(HashEmbedder().dim, dtype=np.float32)}, "other@1")
    stats = store.bank_stats("b")
    conn = store.conn
    assert stats.memories == conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    assert stats.records == conn.execute("SELECT count(*) FROM records").fetchone()[0]
    assert stats.embedded == stats.memories
    assert stats.embedders == {HashEmbedder().name: stats.memories - 1, "other@1": 1}
    terms = conn.execute("SELECT sum(terms) FROM memories").fetchone()[0]
    assert conn.execute("SELECT total_terms FROM banks").fetchone()[0] == terms
    assert stats.first_time == min(m.time for m in memories if m.document != "doc3")  # type: ignore[type-var]
    store.close()


def test_a_bank_retained_before_search_in_the_database_is_indexed_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(400)
    retain(store, memories)
    bank = MemoryBank(store, HashEmbedder())
    want = bank.recall("w1 w3 w8", "b", RecallOptions(limit=10))

    def unindex() -> None:  # what a bank retained by an earlier version looks like
        with store._write() as conn:
            conn.execute("DELETE FROM postings")
            conn.execute("UPDATE memories SET terms = NULL, tokens = NULL")
            conn.execute("UPDATE banks SET search_ready = 0")
        assert not store.searchable("b")

    unindex()
    seen: list[tuple[int, int]] = []
    assert store.prepare_search("b", progress=lambda d, t: seen.append((d, t))) == 400
    assert store.searchable("b") and seen[-1] == (400, 400)
    assert store.prepare_search("b") == 0  # nothing left to do
    after = bank.recall("w1 w3 w8", "b", RecallOptions(limit=10))
    assert [h.memory.id for h in after.hits] == [h.memory.id for h in want.hits]
    assert all(h.memory.tokens for h in after.hits)
    unindex()  # a recall that comes before any retain indexes the bank itself
    first = bank.recall("w1 w3 w8", "b", RecallOptions(limit=10))
    assert store.searchable("b")
    assert [h.memory.id for h in first.hits] == [h.memory.id for h in want.hits]
    store.close()


def test_a_server_sees_postings_removed_after_a_pack(tmp_path: Path) -> None:
    """A server keeps the postings after a pack; memories forgotten or replaced there must
    drop out of its searches though the pack itself did not change."""
    path = tmp_path / "lamina.db"
    writer = SQLiteStore(path)
    retain(writer, make_memories(1200, seed=6))
    server = SQLiteStore(path)
    server.keep_in_memory = True
    queries = ["w0 w1 w2", "w3 w4", "w5 w6 w7"]

    def exact() -> None:
        index = BankIndex("b")
        index.refresh(writer)
        for query in queries:
            expected = index.lexical.scores(query)
            order = sorted(np.flatnonzero(expected > 0).tolist(), key=lambda i: (-expected[i], i))
            got = server.lexical_search("b", tokenize(query), 300, SearchFilter())
            assert ids_of(writer, got) == [index.memories[i].id for i in order[:300]], query
            _size, df = server.term_counts("b", tokenize(query))
            assert df == {t: index.lexical.df(t) for t in tokenize(query) if index.lexical.df(t)}

    exact()
    versions = writer.conn.execute("SELECT term, version FROM posting_packs").fetchall()
    later = make_memories(60, seed=7, prefix="n")  # after the packs, too few to repack
    retain(writer, [replace(m, document="later") for m in later])
    exact()
    assert writer.conn.execute("SELECT term, version FROM posting_packs").fetchall() == versions
    writer.delete_memory("b", "n3")
    writer.delete_memory("b", "n17")
    exact()
    writer.delete_document("b", "later")
    exact()
    writer.close()
    server.close()


def test_a_bank_of_the_previous_schema_searches_the_same_after_migrating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0007 moves the posting packs into a table of another layout; nothing of
    them, nor of any ranking, changes."""
    from lamina.store import sqlite, sqlite_migrations

    path = tmp_path / "lamina.db"
    old = [m for m in sqlite_migrations.MIGRATIONS if m[0] < "0007"]
    monkeypatch.setattr(sqlite, "MIGRATIONS", old)
    store = SQLiteStore(path)
    memories = make_memories(1500, seed=4)
    retain(store, memories)
    store.delete_document("b", "doc3")  # tombstones in the packs' ranges
    packs = store.conn.execute("SELECT * FROM posting_packs ORDER BY term").fetchall()
    assert packs and "WITHOUT ROWID" in str(store.schema())
    queries = ["w0 w1 w5", "w2 w9 Alpha", "w3 w300"]
    before = {q: store.lexical_search("b", tokenize(q), 100, SearchFilter()) for q in queries}
    store.close()
    # Up to the migration that changes the packs' codec (see the test after this one).
    upto = [m for m in sqlite_migrations.MIGRATIONS if m[0] < "0010"]
    monkeypatch.setattr(sqlite, "MIGRATIONS", upto)
    store = SQLiteStore(path)
    assert store.migrate()[0] == "0007_posting_packs_by_rowid"  # and any later ones
    assert store.conn.execute("SELECT * FROM posting_packs ORDER BY term").fetchall() == packs
    for query in queries:
        assert store.lexical_search("b", tokenize(query), 100, SearchFilter()) == before[query]
    # The tombstone trigger still works on the new table.
    store.delete_document("b", "doc4")
    index = BankIndex("b")
    index.refresh(store)
    for query in queries:
        expected = index.lexical.scores(query)
        order = sorted(np.flatnonzero(expected > 0).tolist(), key=lambda i: (-expected[i], i))
        got = store.lexical_search("b", tokenize(query), 100, SearchFilter())
        assert ids_of(store, got) == [index.memories[i].id for i in order[:100]], query
    store.close()


def test_a_bank_packed_by_the_earlier_layout_ranks_the_same_and_is_packed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0010 moves SQLite's posting packs to the codec PostgreSQL's use: the packs an
    earlier version wrote (three plain arrays) are dropped, searches read rows meanwhile, and
    the bank's first recall packs it again; no ranking changes on the way."""
    from lamina.store import packs, sqlite, sqlite_migrations

    path = tmp_path / "lamina.db"
    old = [m for m in sqlite_migrations.MIGRATIONS if m[0] < "0010"]
    monkeypatch.setattr(sqlite, "MIGRATIONS", old)
    store = SQLiteStore(path)
    retain(store, make_memories(1500, seed=4))
    store.delete_document("b", "doc3")  # tombstones in the packs' ranges
    queries = ["w0 w1 w5", "w2 w9 Alpha", "w3 w300"]
    before = {q: store.lexical_search("b", tokenize(q), 100, SearchFilter()) for q in queries}
    recalled = MemoryBank(store, HashEmbedder()).recall("w0 w1 w5", "b", RecallOptions(limit=10))
    with store._write() as conn:  # the packs as the earlier version wrote them
        for term, count, seqs, tfs, lengths in conn.execute(
            "SELECT term, postings, seqs, tfs, lengths FROM posting_packs"
        ).fetchall():
            found, tf, length = packs.decode(count, seqs, tfs, lengths)
            conn.execute(
                "UPDATE posting_packs SET seqs = ?, tfs = ?, lengths = ? WHERE term = ?",
                (found.tobytes(), tf.tobytes(), length.tobytes(), term),
            )
    assert store.conn.execute("SELECT count(*) FROM posting_packs").fetchone()[0] > 0
    store.close()
    monkeypatch.setattr(sqlite, "MIGRATIONS", sqlite_migrations.MIGRATIONS)
    store = SQLiteStore(path)
    assert store.migrate() == ["0010_one_pack_codec"]
    assert store.conn.execute("SELECT count(*) FROM posting_packs").fetchone()[0] == 0
    assert not store.searchable("b")
    for query in queries:  # from the rows
        assert store.lexical_search("b", tokenize(query), 100, SearchFilter()) == before[query]
    again = MemoryBank(store, HashEmbedder()).recall("w0 w1 w5", "b", RecallOptions(limit=10))
    assert [h.memory.id for h in again.hits] == [h.memory.id for h in recalled.hits]
    assert store.searchable("b")
    rows = store.conn.execute("SELECT postings, length(seqs) FROM posting_packs").fetchall()
    assert rows and all(size < 8 * count for count, size in rows)  # the compact codec
    for query in queries:  # from the new packs
        assert store.lexical_search("b", tokenize(query), 100, SearchFilter()) == before[query]
    store.close()


def test_an_in_memory_database_recalls_as_a_file_does(tmp_path: Path) -> None:
    """`:memory:` runs the same searches as a file (on the calling thread: its one connection
    is that thread's), the dense channel scoring the database's vectors."""
    memories = make_memories(900, seed=8)
    queries = ["w1 w3 w8 Alpha", "w2 w40", "w0 w7 w120"]
    cases = (RecallOptions(limit=10), RecallOptions(limit=10, tags=frozenset({"odd"})))
    got: list[list[list[tuple[str, tuple[str, ...]]]]] = []
    for target in (":memory:", str(tmp_path / "lamina.db")):
        store = SQLiteStore(target)
        retain(store, memories)
        bank = MemoryBank(store, HashEmbedder())
        got.append(
            [
                [(h.memory.id, tuple(h.channels)) for h in bank.recall(q, "b", options).hits]
                for q in queries
                for options in cases
            ]
        )
        store.close()
    assert got[0] == got[1]
    assert any("dense" in channels for hits in got[0] for _id, channels in hits)


def test_retaining_into_an_unprepared_bank_prepares_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    bank = MemoryBank(store, HashEmbedder())
    retain(store, make_memories(50))
    with store._write() as conn:
        conn.execute("UPDATE banks SET search_ready = 0")
    bank.retain_messages([], "b", "empty-document")
    assert store.searchable("b")
    store.close()


def test_dense_search_works_where_no_vector_file_can_be_written(
    filled: tuple[SQLiteStore, list[Memory]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, memories = filled
    query = memories[7].embedding
    assert query is not None
    want = store.dense_search("b", query, 30, SearchFilter(), HashEmbedder().name)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(VectorFile, "mapped", refuse)
    got = store.dense_search("b", query, 30, SearchFilter(), HashEmbedder().name)
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [x for _, x in got] == pytest.approx([x for _, x in want], abs=1e-6)


def test_packed_postings_follow_every_change(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    memories = make_memories(2000, seed=8)
    retain(store, memories)
    packs = store.conn.execute("SELECT count(*) FROM posting_packs").fetchone()[0]
    assert packs > 0  # the common words are packed
    queries = ["w0 w1 w2", "w3 w17 w40", "w1", "Alpha w5"]

    def exact() -> None:
        index = BankIndex("b")
        index.refresh(store)
        for query in queries:
            expected = index.lexical.scores(query)
            order = sorted(np.flatnonzero(expected > 0).tolist(), key=lambda i: (-expected[i], i))
            got = store.lexical_search("b", tokenize(query), 100, SearchFilter())
            assert ids_of(store, got) == [index.memories[i].id for i in order[:100]], query
            size, df = store.term_counts("b", tokenize(query))
            assert size == len(index.ids)  # a fresh index holds live memories only
            assert df == {t: index.lexical.df(t) for t in tokenize(query) if index.lexical.df(t)}

    exact()
    # Forgetting and replacing leave tombstones in the packs' ranges; searches subtract them.
    store.delete_document("b", "doc2")
    retain(store, [Memory(**{**_fields(m), "text": "w1 w2 again"}) for m in memories[:40]])
    assert store.conn.execute("SELECT count(*) FROM pack_dead").fetchone()[0] > 0
    exact()
    # Later retains repack the stale terms they touch and clear their tombstones.
    retain(store, make_memories(600, seed=9, prefix="n"))
    exact()
    store.close()


def test_entities_changed_inside_a_pack_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina.store import sqlite_postings
    from lamina.text.entities import entity_terms

    monkeypatch.setattr(sqlite_postings, "PACK_MIN", 10)  # "Alpha" (55 memories) is packed
    store = SQLiteStore(tmp_path / "lamina.db")
    retain(store, make_memories(600))
    alpha = entity_terms(["Alpha"])
    assert store.conn.execute(
        "SELECT count(*) FROM posting_packs WHERE term = ?", (alpha[0],)
    ).fetchone()[0]
    # m1 (an early seq, inside the pack's range) now names Alpha: its new posting must count.
    assert store.set_entities("b", {"m1": ["Alpha"]}) == 1
    found = ids_of(store, store.lexical_search("b", alpha, 1000, SearchFilter()))
    assert "m1" in found and len(found) == 56
    store.close()


def test_a_server_keeps_what_it_read_and_still_sees_every_change(tmp_path: Path) -> None:
    # A long-lived process (keep_in_memory) holds packs and vectors between recalls; a
    # second process writing meanwhile must still be seen at once.
    path = tmp_path / "lamina.db"
    writer = SQLiteStore(path)
    memories = make_memories(1500, seed=3)
    retain(writer, memories[:1000])
    server = SQLiteStore(path)
    server.keep_in_memory = True
    queries = ["w0 w1 w5", "w2 w9 Alpha", "w3"]

    def same() -> None:
        index = BankIndex("b")
        index.refresh(writer)
        for query in queries:
            options = RecallOptions(budget=100_000, limit=30)
            want = recall_from_index(index, query, HashEmbedder(), options)
            got = recall_from_store(server, "b", query, HashEmbedder(), options)
            assert [h.memory.id for h in got.hits] == [h.memory.id for h in want.hits], query

    same()
    assert server.__dict__["_packs"].bytes > 0 and server.__dict__["_mapped"]
    assert server.__dict__["_tails"].bytes > 0  # the postings after the packs, too
    retain(writer, memories[1000:])  # appended: vectors and packs grow
    same()
    # Postings changed in place after the packs (entities of memories already there).
    late = [m.id for m in memories[1400:1500:7]]
    assert writer.set_entities("b", {i: ["Alpha"] for i in late}) == len(late)
    same()
    assert writer.set_entities("b", {i: [] for i in late[:3]}) == 3
    same()
    writer.delete_document("b", "doc1")  # tombstones
    retain(writer, [Memory(**{**_fields(m), "text": "w0 w1 new"}) for m in memories[:30]])
    same()
    writer.set_embeddings(  # vectors changed in place: the file is rebuilt
        "b", {m.id: -np.asarray(m.embedding) for m in memories[200:260]}, HashEmbedder().name
    )
    same()
    writer.close()
    server.close()


@pytest.mark.skipif(
    not (Path(__file__).parent.parent.parent / "shared" / "data" / "claude-code").is_dir(),
    reason="../shared/data/claude-code absent",
)
def test_shortened_memories_never_hold_more_tokens_than_reported(tmp_path: Path) -> None:
    # Recall estimates a shortened memory's tokens from the memory's own count; on real
    # sessions and many budgets the estimate must not fall below the real count.
    from lamina.tokens import count_text

    data = Path(__file__).parent.parent.parent / "shared" / "data" / "claude-code"
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), HashEmbedder())
    for path in sorted(data.glob("*.jsonl")):
        if ".subagent-" not in path.name:
            bank.retain_file(path, "proj")
    seen = 0
    for query in ("why did the test fail", "which file holds the config", "what was decided"):
        for budget in (60, 150, 300, 700):
            result = bank.recall(query, "proj", RecallOptions(budget=budget))
            assert result.tokens <= budget
            for hit in result.hits:
                if hit.shortened:
                    seen += 1
                    assert count_text(hit.text) <= hit.tokens, (query, budget)
    assert seen
    bank.close()


def test_bm25_sums_the_same_whether_seqs_are_dense_or_sparse() -> None:
    from lamina.store.sqlite_postings import Postings, bm25

    rng = np.random.default_rng(4)

    def lists(spread: int) -> dict[str, Postings]:
        out = {}
        for term in ("a", "b", "c"):
            seqs = np.unique(rng.integers(0, 5000, 1500)) * spread
            out[term] = Postings(
                seqs.astype(np.int64),
                rng.integers(1, 4, len(seqs)).astype(np.float64),
                rng.integers(5, 60, len(seqs)).astype(np.float64),
            )
        return out

    dense = lists(1)
    sparse = {t: Postings(p.seqs * 100_000, p.tfs, p.lengths) for t, p in dense.items()}
    seqs_d, scores_d = bm25(dense, ["a", "b", "b", "c"], 6000, 180_000)
    seqs_s, scores_s = bm25(sparse, ["a", "b", "b", "c"], 6000, 180_000)
    assert np.array_equal(seqs_d * 100_000, seqs_s)
    assert scores_d == pytest.approx(scores_s, rel=1e-12)
