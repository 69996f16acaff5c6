"""BM25 postings in SQLite: written at retain, packed for common terms, scored with numpy.

Every memory's terms (lamina.text.lexical.tokenize, plus its entities) are rows of
`postings` (bank, term, seq, tf, the memory's length). A query reads the rows of its terms
only; but a common word is held by tens of thousands of memories, and reading that many rows
one by one costs more than the rest of a recall. So a term held by at least PACK_MIN memories
also gets a *pack*: its postings in one row (`posting_packs`, in the codec of
lamina.store.packs, as PostgreSQL's), as of
`upto_seq`. A search reads the pack and the term's few rows after `upto_seq`; postings of a
packed term removed since (a memory forgotten or replaced) are listed in `pack_dead` by a
trigger and subtracted (from the pack; a server also keeps the rows after it, see `_tails`).
Retain keeps packs fresh: after each commit it rebuilds the packs of the terms it wrote whose
tail of newer rows, or of tombstones, has grown past an eighth of the pack (see
`maintain_packs`), so readers never write.

Scores are BM25 with the in-process index's k1, b and idf over the bank's live memories, so
both rank the same.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np
import orjson

from ..text.entities import entity_terms
from ..text.lexical import idf, term_counts
from .packs import PackCache, decode, encode
from .ranking import contributions, summed

__all__ = [
    "PACK_MIN",
    "Packed",
    "Postings",
    "Tail",
    "bm25",
    "drop_packs",
    "maintain_packs",
    "pack_cache",
    "postings_of",
    "read_postings",
    "tail_cache",
    "write_postings",
]

PACK_MIN = 256
"""Terms held by at least this many memories are packed."""
STALE_SHARE = 8
"""A pack is rebuilt once its newer rows plus its tombstones pass 1/STALE_SHARE of it."""
STALE_FLOOR = 128


def postings_of(text: str, entities: Iterable[str]) -> tuple[int, Counter[str]]:
    """A memory's BM25 length and term frequencies (lamina.text.lexical.term_counts), its
    entities among its terms."""
    return term_counts(text, entity_terms(entities))


def write_postings(
    conn: sqlite3.Connection, bank_id: int, seq: int, length: int, terms: Mapping[str, int]
) -> None:
    conn.executemany(
        "INSERT INTO postings (bank_id, term, seq, tf, terms) VALUES (?, ?, ?, ?, ?)",
        [(bank_id, term, seq, tf, length) for term, tf in terms.items()],
    )


@dataclass(frozen=True, slots=True)
class Postings:
    """One term's live postings, in seq order."""

    seqs: npt.NDArray[np.int64]
    tfs: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.seqs)


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


Packed = tuple[int, Postings]
"""A decoded pack and its `upto_seq`, as a PackCache keeps it."""


def pack_cache(max_bytes: int = 256 << 20) -> PackCache[Packed]:
    """A PackCache of decoded SQLite packs (for servers; see SQLiteSearch.keep_in_memory)."""
    return PackCache(max_bytes, lambda packed: 24 * len(packed[1]))


def _decode(count: int, seqs: bytes, tfs: bytes, lengths: bytes) -> Postings:
    found, tf, length = decode(count, seqs, tfs, lengths)
    return Postings(found, tf.astype(np.float64), length.astype(np.float64))


def _read_packs(
    conn: sqlite3.Connection, bank_id: int, listed: str, cache: PackCache[Packed] | None
) -> dict[str, tuple[int, int, Postings]]:
    """(upto_seq, version, postings) of the packs of the listed terms, from `cache` where
    current."""
    if cache is None:
        return {
            str(term): (int(upto), int(version), _decode(count, seqs, tfs, lengths))
            for term, upto, version, count, seqs, tfs, lengths in conn.execute(
                "SELECT term, upto_seq, version, postings, seqs, tfs, lengths FROM posting_packs"
                " WHERE bank_id = ? AND term IN (SELECT value FROM json_each(?))",
                (bank_id, listed),
            )
        }
    versions = {
        str(term): int(version)
        for term, version in conn.execute(
            "SELECT term, version FROM posting_packs WHERE bank_id = ?"
            " AND term IN (SELECT value FROM json_each(?))",
            (bank_id, listed),
        )
    }
    held = cache.held(bank_id, sorted(versions))
    packs = {
        t: (held[t][1][0], v, held[t][1][1])
        for t, v in versions.items()
        if t in held and held[t][0] == v
    }
    missing = sorted(t for t in versions if t not in packs)
    if missing:
        for term, upto, version, count, seqs, tfs, lengths in conn.execute(
            "SELECT term, upto_seq, version, postings, seqs, tfs, lengths FROM posting_packs"
            " WHERE bank_id = ? AND term IN (SELECT value FROM json_each(?))",
            (bank_id, _json(missing)),
        ):
            pack = _decode(count, seqs, tfs, lengths)
            cache.put(bank_id, str(term), int(version), (int(upto), pack))
            packs[str(term)] = (int(upto), int(version), pack)
    return packs


@dataclass(frozen=True, slots=True)
class Tail:
    """A packed term's postings after its pack, as a server keeps them: read at pack
    `version`, up to seq `last`, in a snapshot of the bank's `generation`."""

    version: int
    last: int
    generation: int
    rows: npt.NDArray[np.int64]
    """seq, tf, length per posting, in seq order."""


def tail_cache(max_bytes: int = 64 << 20) -> PackCache[Tail]:
    """A PackCache of tails (for servers; see SQLiteSearch.keep_in_memory)."""
    return PackCache(max_bytes, lambda tail: 24 * len(tail.rows) + 100)


def _read_rows(
    conn: sqlite3.Connection, bank_id: int, after: Sequence[tuple[str, int]]
) -> dict[str, npt.NDArray[np.int64]]:
    """Each term's postings after a seq as (seq, tf, length) rows in seq order; SQLite joins
    each term's into one string that numpy parses, rather than a Python tuple per posting."""
    out: dict[str, npt.NDArray[np.int64]] = {}
    if not after:
        return out
    for term, joined in conn.execute(
        "WITH q(term, after) AS (SELECT json_extract(value, '$[0]'),"
        " json_extract(value, '$[1]') FROM json_each(?)) SELECT q.term, (SELECT"
        " group_concat(p.seq || ',' || p.tf || ',' || p.terms, ',') FROM postings p"
        " WHERE p.bank_id = ? AND p.term = q.term AND p.seq > q.after) FROM q",
        (_json(list(after)), bank_id),
    ):
        if not joined:
            continue
        rows = np.fromstring(joined, dtype=np.int64, sep=",").reshape(-1, 3)
        if len(rows) > 1 and np.any(rows[1:, 0] <= rows[:-1, 0]):
            rows = rows[np.argsort(rows[:, 0], kind="stable")]
        out[str(term)] = rows
    return out


def _tails(
    conn: sqlite3.Connection,
    bank_id: int,
    terms: Sequence[str],
    packs: Mapping[str, tuple[int, int, Postings]],
    dead: Mapping[str, npt.NDArray[np.int64]],
    cache: PackCache[Tail] | None,
    generation: int,
) -> dict[str, npt.NDArray[np.int64]]:
    """Each term's postings after its pack (all of them for a term without one). With
    `cache` (a server's), a packed term's tail read at the same pack version is kept and
    brought up to date: its postings removed since have tombstones in `dead` (every removed
    posting of a packed term gets one, until the pack is built again, which gives it a new
    version), and those added since have higher seqs (seqs are never reused). A tail read in
    a later snapshot than this one (a higher `generation`: another thread's) is not used."""
    if cache is None:
        return _read_rows(conn, bank_id, [(t, packs[t][0] if t in packs else 0) for t in terms])
    held = cache.held(bank_id, [t for t in terms if t in packs])
    kept = {
        t: tail
        for t, (version, tail) in held.items()
        if version == packs[t][1] and tail.version == packs[t][1] and tail.generation <= generation
    }
    since = [(t, kept[t].last if t in kept else packs[t][0] if t in packs else 0) for t in terms]
    read = _read_rows(conn, bank_id, since)
    out: dict[str, npt.NDArray[np.int64]] = {}
    for term in terms:
        rows = read.get(term)
        if term in kept:
            old = kept[term].rows
            if term in dead and len(old):
                old = old[~np.isin(old[:, 0], dead[term])]
            rows = old if rows is None else np.concatenate([old, rows])
        if term in packs:
            last = int(rows[-1, 0]) if rows is not None and len(rows) else packs[term][0]
            if term in kept:
                last = max(last, kept[term].last)
            empty = np.empty((0, 3), dtype=np.int64)
            tail = Tail(packs[term][1], last, generation, rows if rows is not None else empty)
            cache.put(bank_id, term, packs[term][1], tail)
        if rows is not None and len(rows):
            out[term] = rows
    return out


def read_postings(
    conn: sqlite3.Connection,
    bank_id: int,
    terms: Iterable[str],
    cache: PackCache[Packed] | None = None,
    tails: PackCache[Tail] | None = None,
    generation: int = 0,
) -> dict[str, Postings]:
    """The live postings of each of `terms` the bank holds: packs (from `cache` where it
    holds them current), their tombstones taken out, and the rows after them (from `tails`
    where it holds them current; `generation`: the bank's, read in the same transaction); a
    few queries whatever the number of terms. Call inside one read transaction."""
    wanted = sorted(set(terms))
    if not wanted:
        return {}
    listed = _json(wanted)
    packs = _read_packs(conn, bank_id, listed, cache)
    found: dict[str, list[int]] = {}
    if packs:
        for term, seq in conn.execute(
            "SELECT term, seq FROM pack_dead WHERE bank_id = ?"
            " AND term IN (SELECT value FROM json_each(?))",
            (bank_id, _json(sorted(packs))),
        ):
            found.setdefault(str(term), []).append(int(seq))
    dead = {t: np.array(seqs, dtype=np.int64) for t, seqs in found.items()}
    rows = _tails(conn, bank_id, wanted, packs, dead, tails, generation)
    out: dict[str, Postings] = {}
    for term in wanted:
        parts_seq: list[npt.NDArray[np.int64]] = []
        parts_tf: list[npt.NDArray[np.float64]] = []
        parts_len: list[npt.NDArray[np.float64]] = []
        if term in packs:
            pack = packs[term][2]
            s, t, n = pack.seqs, pack.tfs, pack.lengths
            if term in dead:
                keep = ~np.isin(s, dead[term])
                s, t, n = s[keep], t[keep], n[keep]
            parts_seq.append(s)
            parts_tf.append(t)
            parts_len.append(n)
        if term in rows:
            tail = rows[term]
            parts_seq.append(tail[:, 0])
            parts_tf.append(tail[:, 1].astype(np.float64))
            parts_len.append(tail[:, 2].astype(np.float64))
        if len(parts_seq) == 1:  # the pack alone, or rows alone: no copy
            posting = Postings(parts_seq[0], parts_tf[0], parts_len[0])
        elif parts_seq:
            posting = Postings(
                np.concatenate(parts_seq), np.concatenate(parts_tf), np.concatenate(parts_len)
            )
        else:
            continue
        if len(posting):
            out[term] = posting
    return out


def bm25(
    lists: Mapping[str, Postings], query: Sequence[str], live: int, total_terms: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Every memory holding a query term (sorted seqs) and its BM25 score: the in-process
    index's formula, over the bank's `live` memories of `total_terms` length in all."""
    counts = Counter(query)
    used = [t for t in sorted(counts) if t in lists]
    if not used or live <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    avgdl = total_terms / live if total_terms else 1.0
    weights = np.array([counts[t] * idf(live, len(lists[t])) for t in used], dtype=np.float64)
    return summed(
        np.concatenate([lists[t].seqs for t in used]),
        contributions(
            np.concatenate([lists[t].tfs for t in used]),
            np.concatenate([lists[t].lengths for t in used]),
            np.repeat(weights, [len(lists[t]) for t in used]),
            avgdl,
        ),
    )


def maintain_packs(conn: sqlite3.Connection, bank_id: int, terms: Iterable[str]) -> int:
    """Pack, or pack again, those of `terms` that are common and whose pack is missing or
    has grown stale (newer rows plus tombstones over an eighth of it); returns how many.
    Runs in the caller's write transaction."""
    wanted = sorted(set(terms))
    if not wanted:
        return 0
    listed = _json(wanted)
    packs = {
        str(t): (int(upto), int(n))
        for t, upto, n in conn.execute(
            "SELECT term, upto_seq, postings FROM posting_packs WHERE bank_id = ?"
            " AND term IN (SELECT value FROM json_each(?))",
            (bank_id, listed),
        )
    }
    dead = dict(
        conn.execute(
            "SELECT term, count(*) FROM pack_dead WHERE bank_id = ?"
            " AND term IN (SELECT value FROM json_each(?)) GROUP BY term",
            (bank_id, listed),
        ).fetchall()
    )
    after = _json([[t, packs[t][0] if t in packs else 0] for t in wanted])
    tails = dict(
        conn.execute(
            "WITH q(term, upto) AS (SELECT json_extract(value, '$[0]'),"
            " json_extract(value, '$[1]') FROM json_each(?))"
            " SELECT q.term, (SELECT count(*) FROM postings p WHERE p.bank_id = ?"
            " AND p.term = q.term AND p.seq > q.upto) FROM q",
            (after, bank_id),
        ).fetchall()
    )
    rebuilt = 0
    for term in wanted:
        tail = int(tails.get(term, 0))
        if term in packs:
            stale = tail + int(dead.get(term, 0))
            if stale <= max(STALE_FLOOR, packs[term][1] // STALE_SHARE):
                continue
        elif tail < PACK_MIN:
            continue
        pack_term(conn, bank_id, term)
        rebuilt += 1
    return rebuilt


def pack_term(conn: sqlite3.Connection, bank_id: int, term: str) -> None:
    """(Re)build one term's pack from its rows, and clear its tombstones."""
    import secrets  # here: only retain writes packs; a recall need not import it

    rows = np.array(
        conn.execute(
            "SELECT seq, tf, terms FROM postings WHERE bank_id = ? AND term = ? ORDER BY seq",
            (bank_id, term),
        ).fetchall(),
        dtype=np.int64,
    ).reshape(-1, 3)
    conn.execute("DELETE FROM pack_dead WHERE bank_id = ? AND term = ?", (bank_id, term))
    if not len(rows):
        conn.execute("DELETE FROM posting_packs WHERE bank_id = ? AND term = ?", (bank_id, term))
        return
    conn.execute(
        "INSERT OR REPLACE INTO posting_packs (bank_id, term, upto_seq, postings, version, seqs,"
        " tfs, lengths) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            bank_id, term, int(rows[-1, 0]), len(rows), secrets.randbits(62),
            *encode((rows[:, 0], rows[:, 1].astype(np.int32), rows[:, 2].astype(np.int32))),
        ),
    )  # fmt: skip


def drop_packs(conn: sqlite3.Connection, bank_id: int, terms: Iterable[str]) -> None:
    """Forget the packs of `terms`: for postings written at seqs a pack may already cover
    (entities changed in place, memories indexed late), which a pack's tail would miss."""
    listed = _json(sorted(set(terms)))
    for table in ("posting_packs", "pack_dead"):
        conn.execute(
            f"DELETE FROM {table} WHERE bank_id = ? AND term IN (SELECT value FROM json_each(?))",
            (bank_id, listed),
        )


def common_terms(conn: sqlite3.Connection, bank_id: int) -> list[str]:
    """The bank's terms held by at least PACK_MIN memories (for packing a whole bank)."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT term FROM postings WHERE bank_id = ? GROUP BY term HAVING count(*) >= ?",
            (bank_id, PACK_MIN),
        )
    ]
