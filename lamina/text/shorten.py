"""Shorten a memory to its best part around a query, within a token budget.

Recall fills its budget in rank order. A relevant memory larger than what is left would
otherwise be skipped; instead it is cut to the stretch that matters: the memory is split into
pieces (its lines, long lines into sentences), each piece scored by the query's terms it holds
(BM25-style stems, rarer-in-the-memory terms worth more), and the best piece grown with its
neighbours while it fits. Cuts are marked `[…]`; a piece is kept with its speaker's label.
The work is proportional to the memory's length, and runs only for memories that do not fit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from ..tokens import count_text
from .lexical import tokenize

Counter = Callable[[str], int]
"""Tokens of a text."""

__all__ = ["piece_estimator", "shorten"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LABEL = re.compile(r"^([\w .()-]{1,40}): ")
_GAP = "[…]"

_SHAPE = re.compile(r"[^\W\d_]+|\d{1,3}|\S")
"""Runs of letters, groups of up to three digits (as o200k splits numbers) and single other
characters: the pieces a BPE tokenizer cannot merge across."""
_LETTERS_PER_TOKEN = 6
"""Letters one token covers at most, in this estimate: a common word is one token, a hash or
an identifier several."""
SCALE_FLOOR = 0.9
"""The least tokens per shape unit an estimate assumes, whatever the memory's own ratio."""
ESTIMATE_MARGIN = 1.2
"""Margin on an estimated count. Measured over every run of 2, 5 and 12 lines of the memories
of the shared Claude Code sessions (13,617 runs): 0.4% are counted low (the worst, a line
holding a web token, by 31%) and the estimates sum to 1.36x the exact counts; tokens per
character alone (a memory's count over its length, plus 15%) counted 5.4% low, on lines of
hashes and of aligned tool output, at 1.17x."""


def _shape(text: str) -> int:
    """Tokens of `text` as its shape suggests (see _SHAPE): a cheap stand-in for a tokenizer
    whose errors are mostly in one direction within one memory."""
    units = text.count("\n")
    for run in _SHAPE.findall(text):
        units += 1 + (len(run) - 1) // _LETTERS_PER_TOKEN if run[0].isalpha() else 1
    return units


def piece_estimator(text: str, tokens: int) -> Counter:
    """Estimated tokens of pieces of `text`, a memory of `tokens` tokens: its shape scaled by
    the memory's own tokens per shape unit (at least SCALE_FLOOR), plus ESTIMATE_MARGIN,
    rounded up. Never below the exact count in nearly every case (see ESTIMATE_MARGIN), so a
    shortened memory does not overrun the budget it was shortened to."""
    scale = ESTIMATE_MARGIN * max(tokens / max(1, _shape(text)), SCALE_FLOOR)
    return lambda piece: math.ceil(_shape(piece) * scale) + 1


def _pieces(text: str) -> list[tuple[str, str]]:
    """(label, piece) in order: each line, long lines cut into sentences."""
    out: list[tuple[str, str]] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        match = _LABEL.match(line)
        label = match.group(1) if match else ""
        body = line[match.end() :] if match else line
        sentences = _SENTENCE.split(body) if len(body) > 200 else [body]
        out.extend((label, s) for s in sentences if s.strip())
    return out


def _render(pieces: list[tuple[str, str]], chosen: list[int]) -> str:
    lines: list[str] = []
    previous = -2
    label_of_line = ""
    for i in chosen:
        label, piece = pieces[i]
        if i != previous + 1:
            if lines or i > 0:
                lines.append(_GAP)
            lines.append(f"{label}: {piece}" if label else piece)
        elif label != label_of_line or not lines:
            lines.append(f"{label}: {piece}" if label else piece)
        else:
            lines[-1] += " " + piece
        label_of_line = label
        previous = i
    if chosen and chosen[-1] < len(pieces) - 1:
        lines.append(_GAP)
    return "\n".join(lines)


def _cut_words(piece: str, terms: set[str], limit: int, count: Counter) -> str:
    """A piece too long on its own: its words around the first query term, within `limit`."""
    words = piece.split(" ")
    hit = next((i for i, w in enumerate(words) if set(tokenize(w)) & terms), 0)
    start = max(0, hit - 8)
    end = start + 1
    while end < len(words) and count(" ".join(words[start : end + 1])) <= limit:
        end += 1
    return " ".join(words[start:end])


def shorten(text: str, query: str, limit: int, count: Counter = count_text) -> str | None:
    """`text` cut to at most `limit` tokens (as `count` counts them) around what `query` asks
    (None when nothing of it fits or the query shares no term with it)."""
    if limit <= len(_GAP):
        return None
    terms = set(tokenize(query))
    pieces = _pieces(text)
    if not pieces or not terms:
        return None
    found = [set(tokenize(p)) & terms for _label, p in pieces]
    frequency = {t: sum(t in f for f in found) for t in terms}
    # Summed in one order: a set's order changes from process to process (string hashing),
    # and float sums in another order can differ in the last bit, turning ties around.
    scores = [sum(1.0 / frequency[t] for t in sorted(f)) for f in found]
    best = max(range(len(pieces)), key=lambda i: (scores[i], -i))
    if scores[best] <= 0:
        return None
    room = limit - 2 * count(_GAP) - 2
    costs = [count(f"{label}: {p}") + 1 for label, p in pieces]
    if costs[best] > room:
        label, piece = pieces[best]
        cut = _cut_words(piece, terms, room - count(f"{label}: ") - 1, count)
        text_out = _render([(label, cut)], [0])
        return f"{_GAP}\n{text_out}\n{_GAP}" if count(text_out) < limit else None
    chosen = [best]
    used = costs[best]
    low, high = best - 1, best + 1
    while low >= 0 or high < len(pieces):
        # Grow towards the neighbour that holds more of the query (the next one on a tie);
        # a side whose next piece does not fit is closed.
        take_high = high < len(pieces) and (low < 0 or scores[high] >= scores[low])
        i = high if take_high else low
        if used + costs[i] <= room:
            used += costs[i]
            chosen.append(i)
        elif take_high:
            high = len(pieces)
            continue
        else:
            low = -1
            continue
        if take_high:
            high += 1
        else:
            low -= 1
    chosen.sort()
    out = _render(pieces, chosen)
    while count(out) > limit and len(chosen) > 1:
        chosen.remove(max(chosen, key=lambda i: abs(i - best)))
        out = _render(pieces, chosen)
    return out if count(out) <= limit else None
