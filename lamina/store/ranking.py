"""BM25 and top-k over posting arrays, the same for every store.

A store reads the postings of a query's terms (seqs ascending, term frequencies, memory
lengths) its own way; scoring them, summing each memory's terms and picking the best `k` is
done here, in numpy, with the in-process index's k1, b, idf and order of operations
(lamina.text.lexical), so every store ranks the same, to the last bit of a score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

__all__ = [
    "BM25_B",
    "BM25_K1",
    "align",
    "best",
    "contributions",
    "members",
    "positions",
    "summed",
]

BM25_K1 = 1.2
BM25_B = 0.75


def contributions(
    tfs: npt.NDArray[np.integer] | npt.NDArray[np.floating],
    lengths: npt.NDArray[np.integer] | npt.NDArray[np.floating],
    weights: float | npt.NDArray[np.float64],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """Each posting's BM25 contribution: weight * tf * (k1 + 1) / (tf + norm), norm being
    k1 * (1 - b + b * length / avgdl); `weights` is the term's (query count x idf), or one
    per posting. In place on fresh arrays (these lists can be long), in the in-process
    index's order of operations, so that the scores are the same to the bit."""
    k1, b = BM25_K1, BM25_B
    norm = lengths.astype(np.float64)
    norm *= b
    norm /= avgdl
    norm += 1 - b
    norm *= k1
    norm += tfs
    score = tfs.astype(np.float64)
    score *= weights
    score *= k1 + 1
    score /= norm
    return score


def summed(
    seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Each memory's scores added up (a memory holding several terms appears once a term):
    the memories in seq order and their sums, each sum added in the order of `seqs`."""
    if not len(seqs):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    low, high = int(seqs.min()), int(seqs.max())
    if high - low < 4 * len(seqs) + 1_000_000:
        # Summed straight into a table over the seq range: no sort (seqs are dense enough).
        at = seqs - low
        total = np.bincount(at, weights=scores, minlength=high - low + 1)
        held = np.zeros(high - low + 1, dtype=bool)
        held[at] = True
        at = np.flatnonzero(held)
        return at.astype(np.int64) + low, total[at].astype(np.float64, copy=False)
    # Not np.unique: its first call imports numpy.ma, 7 ms that a cold hook would pay.
    order = np.argsort(seqs, kind="stable")
    ordered = seqs[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(starts) - 1
    total = np.bincount(group, weights=scores[order])
    return ordered[starts].astype(np.int64), total.astype(np.float64, copy=False)


def best(
    seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], count: int
) -> npt.NDArray[np.intp]:
    """Positions of the `count` best by score (ties: lower seq first), best first; `seqs`
    must be ascending. Selects before sorting: the arrays can hold a million entries."""
    if count <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.intp)
    chosen = np.arange(len(scores))
    if len(scores) > count:
        cut = float(np.partition(scores, len(scores) - count)[len(scores) - count])
        above = np.flatnonzero(scores > cut)
        ties = np.flatnonzero(scores == cut)[: count - len(above)]
        chosen = np.concatenate([above, ties])
    return chosen[np.lexsort((seqs[chosen], -scores[chosen]))]


def positions(seqs: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """Where the members of `wanted` (ascending) are in `seqs` (ascending). Searches the
    shorter in the longer: `seqs` can be a common term's million entries, `wanted` the few
    hundred memories of one session."""
    if len(seqs) == 0 or len(wanted) == 0:
        return np.zeros(0, dtype=np.intp)
    at = np.searchsorted(seqs, wanted)
    inside = at < len(seqs)
    at, wanted = at[inside], wanted[inside]
    found: npt.NDArray[np.intp] = at[seqs[at] == wanted]
    return found


def members(values: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of `values` are in `wanted` (sorted, as filters give them): `np.isin`, by binary
    search when `values` is sorted too (seqs of a vector file or of postings), which saves
    sorting both at every search."""
    if not len(values) or not len(wanted) or np.any(values[1:] < values[:-1]):
        return np.isin(values, wanted)
    out = np.zeros(len(values), dtype=bool)
    out[positions(values, wanted)] = True
    return out


def align(
    postings: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]],
    seqs: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """A term's (seq, score) arrays (seq ascending) laid over `seqs` (sorted): 0 where it
    does not occur. Searches the longer of the two: a common term's list can hold a million
    entries, the candidates a few hundred."""
    have, score = postings
    out = np.zeros(len(seqs))
    if len(have) == 0 or len(seqs) == 0:
        return out
    if len(have) > len(seqs):
        where = np.minimum(np.searchsorted(have, seqs), len(have) - 1)
        hit = have[where] == seqs
        out[hit] = score[where[hit]]
        return out
    at = np.searchsorted(seqs, have)
    inside = at < len(seqs)
    inside[inside] = seqs[at[inside]] == have[inside]
    out[at[inside]] = score[inside]
    return out
