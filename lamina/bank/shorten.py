"""Shorten a memory to its best part around a query, within a token budget.

Recall fills its budget in rank order. A relevant memory larger than what is left would
otherwise be skipped; instead it is cut to the stretch that matters: the memory is split into
pieces (its lines, long lines into sentences), each piece scored by the query's terms it holds
(BM25-style stems, rarer-in-the-memory terms worth more), and the best piece grown with its
neighbours while it fits. Cuts are marked `[…]`; a piece is kept with its speaker's label.
The work is proportional to the memory's length, and runs only for memories that do not fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..tokens import count_text
from .lexical import tokenize

Counter = Callable[[str], int]
"""Tokens of a text."""

__all__ = ["shorten"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LABEL = re.compile(r"^([\w .()-]{1,40}): ")
_GAP = "[…]"


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
