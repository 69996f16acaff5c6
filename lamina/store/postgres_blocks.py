"""PostgreSQL's BM25 postings, stored as per-term blocks: written, changed and migrated here.

`posting_blocks` holds each term's postings (seqs ascending, term frequencies, the memories'
lengths) in blocks of at most BLOCK_MAX, each in the pack codec of lamina.store.packs (about
5 bytes a posting), keyed by (bank_id, term, first_seq): no row and no index entry per
posting. Reading a term's list is one range of the key (lamina.store.postgres_postings).

- A retain appends each term's new postings to its last block while that block holds fewer
  than BLOCK_OPEN (rewriting it in place, see `_store`), and starts a new block otherwise;
  once RUN blocks smaller than BLOCK_MAX
  trail a list they are merged into full ones. So a retain rewrites at most one small block
  per term it touches, and a list of df postings takes about df / BLOCK_MAX rows, plus at
  most RUN.
- Postings for memories inside a list (entities given to older memories) rewrite the
  blocks from the first one they fall in.
- Removing postings rewrites only the blocks holding them (`remove`, found through their
  terms; `remove_everywhere` reads every block of a seq range, for when the terms are not
  known for sure).
- Every block written gets a new `version`; the writer then gives each term it changed a
  newer one in `term_counts.version` (lamina.store.postgres), so a reader holding a list
  sees from the term's version alone that it is current, and otherwise is sent only the
  blocks written since.

Every function here runs inside the writer's transaction, which holds the bank's row FOR
UPDATE: writes to one bank's blocks never interleave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from ..errors import StoreError
from .packs import Raw, concatenated, decode, encode
from .ranking import positions

__all__ = [
    "BLOCK_MAX",
    "BLOCK_OPEN",
    "RUN",
    "add",
    "migrate_to_blocks",
    "remove",
    "remove_everywhere",
]

BLOCK_OPEN = 128
"""A term's last block takes appends while it holds fewer postings than this (rewriting it
costs at most about 640 bytes)."""
BLOCK_MAX = 4_096
"""The most postings in one block."""
RUN = 16
"""This many blocks smaller than BLOCK_MAX at the end of a list are merged into full ones."""

_COLUMNS = "bank_id, term, first_seq, last_seq, n, seqs, tfs, lengths"
_TYPES = ["int8", "text", "int8", "int8", "int4", "bytea", "bytea", "bytea"]

_Block = tuple[str, int, Raw]
"""(term, first_seq, postings) of a block read."""


def _chunks(raw: Raw) -> list[Raw]:
    """The postings cut into blocks of at most BLOCK_MAX."""
    count, size = len(raw[0]), BLOCK_MAX
    return [
        (raw[0][i : i + size], raw[1][i : i + size], raw[2][i : i + size])
        for i in range(0, count, size)
    ]


def _sorted(raw: Raw) -> Raw:
    seqs, tfs, lengths = raw
    if len(seqs) > 1 and bool(np.any(np.diff(seqs) <= 0)):
        order = np.argsort(seqs, kind="stable")
        seqs, tfs, lengths = seqs[order], tfs[order], lengths[order]
    return seqs.astype(np.int64), tfs.astype(np.int32), lengths.astype(np.int32)


def _store(
    conn: psycopg.Connection[Any],
    bank_id: int,
    dropped: Sequence[tuple[str, int]],
    written: Sequence[tuple[str, Raw]],
    rewritten: Sequence[tuple[str, Raw]] = (),
) -> None:
    """Delete the blocks (term, first_seq), write the new ones and rewrite the blocks that
    keep their first seq in place (each a new version). A block rewritten in place changes
    no indexed column, so PostgreSQL updates it on its page (a HOT update: no new index
    entry, the old version pruned without waiting for VACUUM): the open blocks that every
    retain rewrites do not bloat the table."""
    if rewritten:
        encoded = [encode(raw) for _, raw in rewritten]
        conn.execute(
            "UPDATE posting_blocks b SET last_seq = u.last, n = u.n, seqs = u.seqs,"
            " tfs = u.tfs, lengths = u.lengths, version = nextval('posting_block_versions')"
            # The byte strings sent binary (%b): as text they would be escaped byte by byte.
            " FROM unnest(%s::text[], %s::int8[], %s::int8[], %s::int4[], %b::bytea[],"
            " %b::bytea[], %b::bytea[]) AS u(term, first, last, n, seqs, tfs, lengths)"
            " WHERE b.bank_id = %s AND b.term = u.term AND b.first_seq = u.first",
            (
                [t for t, _ in rewritten],
                [int(raw[0][0]) for _, raw in rewritten],
                [int(raw[0][-1]) for _, raw in rewritten],
                [len(raw[0]) for _, raw in rewritten],
                [e[0] for e in encoded],
                [e[1] for e in encoded],
                [e[2] for e in encoded],
                bank_id,
            ),
        )
    if dropped:
        conn.execute(
            "DELETE FROM posting_blocks b USING unnest(%s::text[], %s::int8[]) AS d(term, first)"
            " WHERE b.bank_id = %s AND b.term = d.term AND b.first_seq = d.first",
            ([t for t, _ in dropped], [f for _, f in dropped], bank_id),
        )
    if not written:
        return
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY posting_blocks ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(_TYPES)
        for term, raw in written:
            seqs, tfs, lengths = encode(raw)
            count = len(raw[0])
            copy.write_row(
                (bank_id, term, int(raw[0][0]), int(raw[0][-1]), count, seqs, tfs, lengths)
            )


def _blocks(rows: Any) -> list[_Block]:
    """Blocks read as (term, first_seq, n, seqs, tfs, lengths) rows."""
    return [
        (str(term), int(first), decode(int(n), bytes(s), bytes(t), bytes(w)))
        for term, first, n, s, t, w in rows
    ]


def _blocks_by_term(
    conn: psycopg.Connection[Any], source: str, per_term: Mapping[str, int], bank_id: int
) -> dict[str, list[_Block]]:
    """Each term's blocks as `source` picks them (a FROM clause over `unnest(terms, values) AS
    t(term, ...)` of `per_term` and the bank's id), in ascending first_seq."""
    rows = conn.execute(
        "SELECT b.term, b.first_seq, b.n, b.seqs, b.tfs, b.lengths" + source,
        (list(per_term), list(per_term.values()), bank_id),
        binary=True,
    )
    held: dict[str, list[_Block]] = {}
    for block in _blocks(rows):
        held.setdefault(block[0], []).append(block)
    for blocks in held.values():
        blocks.sort(key=lambda b: b[1])
    return held


def add(conn: psycopg.Connection[Any], bank_id: int, lists: Mapping[str, Raw]) -> None:
    """Write new postings (term: seqs, tfs, lengths), into each term's blocks. A seq a term
    holds already is given the new tf and length."""
    terms = sorted(t for t, raw in lists.items() if len(raw[0]))
    if not terms:
        return
    new = {t: _sorted(lists[t]) for t in terms}
    # Each term's last block, and the sizes of its last RUN blocks (newest first).
    tails = {
        str(r[0]): r[1:]
        for r in conn.execute(
            # The last block's postings only when it is open (a full one stays unread).
            "SELECT t.term, b.first_seq, b.last_seq, b.n, CASE WHEN b.n < %s THEN b.seqs END,"
            " CASE WHEN b.n < %s THEN b.tfs END, CASE WHEN b.n < %s THEN b.lengths END,"
            " (SELECT array_agg(r.n ORDER BY r.first_seq DESC) FROM (SELECT k.n, k.first_seq"
            "  FROM posting_blocks k WHERE k.bank_id = %s AND k.term = t.term"
            "  ORDER BY k.first_seq DESC LIMIT %s) r)"
            " FROM unnest(%s::text[]) AS t(term) CROSS JOIN LATERAL (SELECT * FROM"
            " posting_blocks b WHERE b.bank_id = %s AND b.term = t.term"
            " ORDER BY b.first_seq DESC LIMIT 1) b",
            (BLOCK_OPEN, BLOCK_OPEN, BLOCK_OPEN, bank_id, RUN, terms, bank_id),
            binary=True,
        )
    }
    dropped: list[tuple[str, int]] = []
    written: list[tuple[str, Raw]] = []
    rewritten: list[tuple[str, Raw]] = []
    inside: dict[str, int] = {}
    merging: dict[str, int] = {}
    for term in terms:
        raw = new[term]
        tail = tails.get(term)
        if tail is None:
            written += [(term, chunk) for chunk in _chunks(raw)]
            continue
        _first, last, count, seqs, tfs, lengths, sizes = tail
        if int(raw[0][0]) <= int(last):
            inside[term] = int(raw[0][0])  # among older postings: rewritten below
            continue
        trailing = [int(n) for n in sizes]
        chunks = _chunks(raw)
        if int(count) < BLOCK_OPEN:  # the open block takes them, rewritten where it lies
            old = decode(int(count), bytes(seqs), bytes(tfs), bytes(lengths))
            chunks = _chunks(concatenated([old, raw]))
            rewritten.append((term, chunks[0]))
            written += [(term, chunk) for chunk in chunks[1:]]
            trailing = trailing[1:]
        else:
            written += [(term, chunk) for chunk in chunks]
        run = 0
        for n in [len(c[0]) for c in reversed(chunks)] + trailing:
            if n >= BLOCK_MAX:
                break
            run += 1
        if run >= RUN:
            merging[term] = run
    if inside:
        held = _blocks_by_term(
            conn,
            " FROM unnest(%s::text[], %s::int8[]) AS t(term, low)"
            " JOIN posting_blocks b ON b.bank_id = %s AND b.term = t.term AND b.last_seq >= t.low",
            inside,
            bank_id,
        )
        for term in inside:
            blocks = held.get(term, [])
            dropped += [(term, first) for _, first, _ in blocks]
            written += [(term, c) for c in _chunks(_merged([b[2] for b in blocks], new[term]))]
    _store(conn, bank_id, dropped, written, rewritten)
    if merging:
        _merge(conn, bank_id, merging)


def _merged(old: Sequence[Raw], new: Raw) -> Raw:
    """`old` lists (ascending, disjoint) with `new` postings, the new ones winning a seq both
    hold."""
    before = concatenated(list(old)) if old else new
    if not old:
        return new
    keep = np.ones(len(before[0]), dtype=bool)
    keep[positions(before[0], new[0])] = False
    seqs = np.concatenate([before[0][keep], new[0]])
    order = np.argsort(seqs, kind="stable")
    return (
        seqs[order],
        np.concatenate([before[1][keep], new[1]])[order],
        np.concatenate([before[2][keep], new[2]])[order],
    )


def _merge(conn: psycopg.Connection[Any], bank_id: int, runs: Mapping[str, int]) -> None:
    """Merge the last `runs[term]` blocks of each term into full ones."""
    held = _blocks_by_term(
        conn,
        " FROM unnest(%s::text[], %s::int4[]) AS t(term, k) CROSS JOIN LATERAL (SELECT * FROM"
        " posting_blocks b WHERE b.bank_id = %s AND b.term = t.term"
        " ORDER BY b.first_seq DESC LIMIT t.k) b",
        runs,
        bank_id,
    )
    dropped: list[tuple[str, int]] = []
    written: list[tuple[str, Raw]] = []
    for term, blocks in held.items():
        dropped += [(term, first) for _, first, _ in blocks]
        written += [(term, c) for c in _chunks(concatenated([b[2] for b in blocks]))]
    _store(conn, bank_id, dropped, written)


def _taken_out(
    blocks: Sequence[_Block], gone: Mapping[str, npt.NDArray[np.int64]] | npt.NDArray[np.int64]
) -> tuple[list[tuple[str, int]], list[tuple[str, Raw]], dict[str, Raw]]:
    """The blocks without the seqs `gone` (per term, or the same for every term): blocks to
    drop, blocks to write instead, and the postings taken out per term."""
    dropped: list[tuple[str, int]] = []
    written: list[tuple[str, Raw]] = []
    out: dict[str, list[Raw]] = {}
    for term, first, raw in blocks:
        seqs = gone if isinstance(gone, np.ndarray) else gone.get(term)
        if seqs is None:
            continue
        at = positions(raw[0], seqs)
        if not len(at):
            continue
        keep = np.ones(len(raw[0]), dtype=bool)
        keep[at] = False
        out.setdefault(term, []).append((raw[0][at], raw[1][at], raw[2][at]))
        dropped.append((term, first))
        if keep.any():
            written.append((term, (raw[0][keep], raw[1][keep], raw[2][keep])))
    return dropped, written, {t: concatenated(parts) for t, parts in out.items()}


def remove(
    conn: psycopg.Connection[Any], bank_id: int, gone: Mapping[str, npt.NDArray[np.int64]]
) -> dict[str, Raw]:
    """Take the postings of `gone` (term: sorted seqs) out of the blocks holding them; what
    was taken out, per term (a pair not found is simply not in it)."""
    terms = [t for t, seqs in gone.items() if len(seqs)]
    if not terms:
        return {}
    pairs = [(t, int(s)) for t in terms for s in gone[t]]
    rows = conn.execute(
        "SELECT b.term, b.first_seq, b.n, b.seqs, b.tfs, b.lengths FROM posting_blocks b"
        " JOIN (SELECT DISTINCT t.term, k.first_seq FROM unnest(%s::text[], %s::int8[])"
        "  AS t(term, seq) CROSS JOIN LATERAL (SELECT k.first_seq, k.last_seq"
        "  FROM posting_blocks k WHERE k.bank_id = %s AND k.term = t.term"
        "  AND k.first_seq <= t.seq ORDER BY k.first_seq DESC LIMIT 1) k"
        "  WHERE k.last_seq >= t.seq) w ON b.term = w.term AND b.first_seq = w.first_seq"
        " WHERE b.bank_id = %s",
        ([p[0] for p in pairs], [p[1] for p in pairs], bank_id, bank_id),
        binary=True,
    )
    dropped, written, out = _taken_out(_blocks(rows), gone)
    _store(conn, bank_id, dropped, written)
    return out


def remove_everywhere(
    conn: psycopg.Connection[Any], bank_id: int, seqs: npt.NDArray[np.int64]
) -> dict[str, Raw]:
    """Take every posting of `seqs` (sorted) out of the bank's blocks, whatever its term:
    reads every block whose range meets theirs (slow on a big bank; for when the terms a
    memory was written with are not known for sure)."""
    if not len(seqs):
        return {}
    rows = conn.execute(
        "SELECT term, first_seq, n, seqs, tfs, lengths FROM posting_blocks"
        " WHERE bank_id = %s AND first_seq <= %s AND last_seq >= %s",
        (bank_id, int(seqs[-1]), int(seqs[0])),
        binary=True,
    )
    dropped, written, out = _taken_out(_blocks(rows), seqs)
    _store(conn, bank_id, dropped, written)
    return out


# -- the migration from a row per posting ------------------------------------------------------
_BLOCKS_DDL = """
-- A term's postings in blocks of at most lamina.store.postgres_blocks.BLOCK_MAX, in the pack
-- codec of lamina.store.packs: no row and no index entry per posting. `version` is new with
-- every block written; term_counts.version is newer than every block of its term. Room is
-- left on each page (fillfactor) so that rewriting an open block in place stays on its page.
CREATE SEQUENCE posting_block_versions;
CREATE TABLE posting_blocks (
    bank_id bigint NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
    term text COLLATE "C" NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    n integer NOT NULL,
    version bigint NOT NULL DEFAULT nextval('posting_block_versions'),
    seqs bytea NOT NULL,
    tfs bytea NOT NULL,
    lengths bytea NOT NULL,
    PRIMARY KEY (bank_id, term, first_seq)
) WITH (fillfactor = 85);
-- Uncompressed: decompressing on every read would cost more than the bytes saved.
ALTER TABLE posting_blocks ALTER seqs SET STORAGE EXTERNAL,
    ALTER tfs SET STORAGE EXTERNAL, ALTER lengths SET STORAGE EXTERNAL;
ALTER TABLE term_counts ADD COLUMN version bigint NOT NULL DEFAULT 0;
"""

_MIGRATION_BATCH = 4_000
"""Blocks written per COPY while migrating."""


def _unpack(count: int, seqs: bytes, tfs: bytes, lengths: bytes) -> Raw:
    """Postings aggregated big-endian (int8send, int4send)."""
    return (
        np.frombuffer(seqs, dtype=">i8", count=count).astype(np.int64),
        np.frombuffer(tfs, dtype=">i4", count=count).astype(np.int32),
        np.frombuffer(lengths, dtype=">i4", count=count).astype(np.int32),
    )


def migrate_to_blocks(conn: psycopg.Connection[Any]) -> None:
    """Move every bank's postings from a row each (`postings`, with the packs cached beside
    them in `posting_packs`) into blocks, then drop the old tables. Runs in the migration's
    transaction: all of it or none. Writers of an older version wait for it (their tables are
    locked against writes first) and fail cleanly after, the tables they write gone; a bank
    whose blocks do not hold exactly its rows stops the migration."""
    conn.execute("LOCK TABLE memories, postings IN SHARE MODE")
    conn.execute(_BLOCKS_DDL.encode())
    banks = [int(r[0]) for r in conn.execute("SELECT id FROM banks ORDER BY id")]
    for bank_id in banks:
        batch: list[tuple[str, Raw]] = []
        rows = 0
        with conn.cursor(name="lamina_migrate_postings", binary=True) as cur:
            cur.itersize = 256
            cur.execute(
                "SELECT term, count(*), string_agg(int8send(seq), '' ORDER BY seq),"
                " string_agg(int4send(tf), '' ORDER BY seq),"
                " string_agg(int4send(terms), '' ORDER BY seq)"
                " FROM postings WHERE bank_id = %s GROUP BY term",
                (bank_id,),
            )
            for term, count, seqs, tfs, lengths in cur:
                rows += int(count)
                raw = _unpack(int(count), bytes(seqs), bytes(tfs), bytes(lengths))
                batch += [(str(term), chunk) for chunk in _chunks(raw)]
                if len(batch) >= _MIGRATION_BATCH:
                    _store(conn, bank_id, [], batch)
                    batch = []
        _store(conn, bank_id, [], batch)
        row = conn.execute(
            "SELECT (SELECT count(*) FROM postings WHERE bank_id = %s),"
            " (SELECT coalesce(sum(n), 0) FROM posting_blocks WHERE bank_id = %s)",
            (bank_id, bank_id),
        ).fetchone()
        if row is None or not int(row[0]) == int(row[1]) == rows:
            raise StoreError(f"moving bank {bank_id}'s postings into blocks lost some ({row})")
    # Every term's version newer than its blocks' (lamina.store.postgres_postings).
    conn.execute("UPDATE term_counts SET version = nextval('posting_block_versions')")
    for drop in ("TABLE postings", "TABLE posting_packs", "SEQUENCE posting_pack_versions"):
        conn.execute(f"DROP {drop}")
