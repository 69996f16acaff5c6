"""PostgreSQL keeps postings in per-term blocks: a bank written with a row per posting (the
layout before migration 0011) moves into blocks losing and doubling nothing, recalls as
before, and keeps working; a migration that fails changes nothing; a memory whose terms
cannot be counted again as they were written still leaves no posting behind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.readers.locomo import read_locomo_samples
from lamina.store import open_store, postgres_blocks, postgres_migrations
from lamina.store import postgres as postgres_module
from lamina.store.packs import Raw, decode_blocks
from lamina.store.postgres import PostgresStore

from .conftest import LOCOMO, needs_shared

pytestmark = needs_shared

_Posting = tuple[str, str, int, int, int]
"""(bank, term, seq, tf, memory length)."""


def _old_add(conn: psycopg.Connection[Any], bank_id: int, lists: Mapping[str, Raw]) -> None:
    """How a retain wrote postings before 0011: a row each in `postings`."""
    with (
        conn.cursor() as cur,
        cur.copy("COPY postings (bank_id, term, seq, tf, terms) FROM STDIN") as copy,
    ):
        for term, (seqs, tfs, lengths) in lists.items():
            for seq, tf, length in zip(seqs.tolist(), tfs.tolist(), lengths.tolist(), strict=True):
                copy.write_row((bank_id, term, seq, tf, length))


def _old_count(
    conn: psycopg.Connection[Any], bank_id: int, counts: Counter[str], sign: int
) -> None:
    """... and counted document frequencies (term_counts had no version)."""
    terms = list(counts)
    conn.execute(
        "INSERT INTO term_counts (bank_id, term, df) SELECT %s, t, n"
        " FROM unnest(%s::text[], %s::bigint[]) AS u(t, n)"
        " ON CONFLICT (bank_id, term) DO UPDATE SET df = term_counts.df + excluded.df",
        (bank_id, terms, [sign * counts[t] for t in terms]),
    )


@pytest.fixture
def old_bank(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[_Posting], list[str]]]:
    """A database at migration 0010 holding two LoCoMo conversations in two banks, retained
    the way Lamina did before posting blocks (with a cached pack beside the rows, as searches
    left them); its postings; and the first conversation's questions."""
    samples = read_locomo_samples(str(LOCOMO))[:2]
    with monkeypatch.context() as old:
        before = [m for m in postgres_migrations.MIGRATIONS if m[0] < "0011"]
        old.setattr(postgres_module, "MIGRATIONS", before)
        old.setattr(postgres_blocks, "add", _old_add)
        old.setattr(postgres_module, "_count_terms", _old_count)
        bank = MemoryBank(PostgresStore(pg_url), HashEmbedder())
        for i, sample in enumerate(samples):
            bank.retain_messages(sample.messages, f"locomo{i}", sample.sample_id)
        bank.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert "0011_posting_blocks" not in {
            r[0] for r in conn.execute("SELECT name FROM schema_migrations")
        }
        conn.execute(
            "INSERT INTO posting_packs (bank_id, term, upto_seq, df, seqs, tfs, lengths)"
            " SELECT bank_id, term, max(seq), count(*), '', '', '' FROM postings"
            " GROUP BY bank_id, term HAVING count(*) > 20"
        )
        postings = _rows(conn, "SELECT b.name, p.term, p.seq, p.tf, p.terms FROM postings p"
                         " JOIN banks b ON b.id = p.bank_id")  # fmt: skip
    assert len({p[0] for p in postings}) == 2 and len(postings) > 10_000
    yield pg_url, postings, [q.question for q in samples[0].questions][:60]


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[_Posting]:
    return sorted((str(b), str(t), int(s), int(f), int(n)) for b, t, s, f, n in conn.execute(sql))


def _blocks(url: str) -> list[_Posting]:
    """Every posting the blocks hold, decoded."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT b.name, k.term, k.n, k.seqs, k.tfs, k.lengths FROM posting_blocks k"
            " JOIN banks b ON b.id = k.bank_id ORDER BY b.name, k.term, k.first_seq"
        ).fetchall()
    out: list[_Posting] = []
    for bank, term, n, seqs, tfs, lengths in rows:
        decoded = decode_blocks([(int(n), bytes(seqs), bytes(tfs), bytes(lengths))])
        out += [
            (str(bank), str(term), s, f, w)
            for s, f, w in zip(*(a.tolist() for a in decoded), strict=True)
        ]
    return sorted(out)


def _expected(url: str) -> list[_Posting]:
    """The postings the banks' memories should have, counted from their texts."""
    from lamina.text.entities import entity_terms
    from lamina.text.lexical import term_counts

    with psycopg.connect(url, autocommit=True) as conn:
        memories = conn.execute(
            "SELECT b.name, m.seq, m.text, m.entities FROM memories m"
            " JOIN banks b ON b.id = m.bank_id"
        ).fetchall()
    out: list[_Posting] = []
    for bank, seq, text, entities in memories:
        length, counts = term_counts(text, entity_terms(entities))
        out += [(str(bank), term, int(seq), tf, length) for term, tf in counts.items()]
    return sorted(out)


_SINCE_BLOCKS = [name for name, _ in postgres_migrations.MIGRATIONS if name >= "0011"]
"""What a database written row by row applies: 0011 and the migrations after it."""


def _recalled(bank: MemoryBank, name: str, questions: Sequence[str]) -> list[list[str]]:
    return [[h.memory.id for h in bank.recall(q, name).hits[:10]] for q in questions]


def test_a_bank_written_row_by_row_moves_into_blocks_and_recalls_as_before(
    old_bank: tuple[str, list[_Posting], list[str]], tmp_path: Path
) -> None:
    url, postings, questions = old_bank
    store = PostgresStore(url)
    assert store.migrate() == _SINCE_BLOCKS
    assert store.migrate() == []
    # Every posting moved once: none lost, none doubled, the old tables gone.
    assert _blocks(url) == postings
    with psycopg.connect(url, autocommit=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables")}
    assert {"postings", "posting_packs"}.isdisjoint(tables)
    # It recalls what the same conversation retained into SQLite recalls (the stores rank
    # alike), and keeps doing so as it grows and shrinks.
    bank = MemoryBank(store, HashEmbedder())
    reference = MemoryBank(open_store(str(tmp_path / "lamina.db")), HashEmbedder())
    samples = read_locomo_samples(str(LOCOMO))[:3]
    reference.retain_messages(samples[0].messages, "locomo0", samples[0].sample_id)
    assert _recalled(bank, "locomo0", questions) == _recalled(reference, "locomo0", questions)
    for target in (bank, reference):
        target.retain_messages(samples[2].messages, "locomo0", samples[2].sample_id)
        target.store.delete_document("locomo0", samples[0].sample_id)
    assert _recalled(bank, "locomo0", questions) == _recalled(reference, "locomo0", questions)
    assert _blocks(url) == _expected(url)
    bank.close()
    reference.close()


def test_a_migration_that_fails_leaves_the_rows_as_they_were(
    old_bank: tuple[str, list[_Posting], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move is one transaction: stopped half way (here the second bank's blocks fail to
    write), the database keeps its rows and its schema, and the next run moves everything."""
    url, postings, _ = old_bank
    real = postgres_blocks._store
    written: list[int] = []

    def failing(conn: Any, bank_id: int, dropped: Any, new: Any) -> None:
        written.append(bank_id)
        if len(set(written)) > 1:
            raise psycopg.errors.DiskFull("no space left on device")
        real(conn, bank_id, dropped, new)

    monkeypatch.setattr(postgres_blocks, "_store", failing)
    with pytest.raises(Exception, match="0011_posting_blocks failed"):
        PostgresStore(url).migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        kept = _rows(conn, "SELECT b.name, p.term, p.seq, p.tf, p.terms FROM postings p"
                     " JOIN banks b ON b.id = p.bank_id")  # fmt: skip
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables")}
    assert kept == postings and "posting_blocks" not in tables
    monkeypatch.setattr(postgres_blocks, "_store", real)
    assert PostgresStore(url).migrate() == _SINCE_BLOCKS
    assert _blocks(url) == postings


def test_forgetting_leaves_no_posting_even_when_terms_are_counted_differently(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting finds a memory's postings through its terms; if they are counted otherwise
    than when written (another tokenizer version), the blocks are searched for its seqs."""
    sample = read_locomo_samples(str(LOCOMO))[0]
    store = PostgresStore(pg_url)
    bank = MemoryBank(store, HashEmbedder())
    bank.retain_messages(sample.messages, "locomo", sample.sample_id)
    before = _blocks(pg_url)
    real = postgres_module.term_counts

    def other(text: str, extra: Any = ()) -> tuple[int, Counter[str]]:
        length, counts = real(text, extra)
        counts.pop(next(iter(counts)), None)  # one term fewer than written
        return length, counts

    monkeypatch.setattr(postgres_module, "term_counts", other)
    store.delete_document("locomo", sample.sample_id)
    assert before and _blocks(pg_url) == []
    _bank_id, df = store.term_counts("locomo", sorted({p[1] for p in before}))
    assert df == {}
    assert store.lexical_search("locomo", ["caroline"], 10, _no_filter()) == []
    bank.close()


def _no_filter() -> Any:
    from lamina.store.search import SearchFilter

    return SearchFilter()


def test_blocks_stay_small_where_retains_append(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retains a turn or two at a time append to each term's open block; no block outgrows
    BLOCK_MAX, a list ends in fewer than RUN blocks smaller than that, and the blocks hold
    exactly the postings of the memories (small blocks here, so that a conversation fills
    many)."""
    monkeypatch.setattr(postgres_blocks, "BLOCK_OPEN", 8)
    monkeypatch.setattr(postgres_blocks, "BLOCK_MAX", 32)
    monkeypatch.setattr(postgres_blocks, "RUN", 4)
    sample = read_locomo_samples(str(LOCOMO))[0]
    bank = MemoryBank(PostgresStore(pg_url), HashEmbedder())
    messages = list(sample.messages)
    for end in range(2, len(messages) + 1, 3):
        bank.retain_messages(messages[:end], "locomo", sample.sample_id)
    assert _blocks(pg_url) == _expected(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        sizes: dict[str, list[int]] = {}
        for term, n in conn.execute("SELECT term, n FROM posting_blocks ORDER BY term, first_seq"):
            sizes.setdefault(str(term), []).append(int(n))
    assert max(max(s) for s in sizes.values()) == 32
    assert max(len(s) for s in sizes.values()) > 4 * 4  # lists of many blocks
    for listed in sizes.values():
        trailing = 0
        for n in reversed(listed):
            if n >= 32:
                break
            trailing += 1
        assert trailing < 4, listed
    bank.close()
