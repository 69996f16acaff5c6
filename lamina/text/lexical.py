"""Lexical search: one tokenisation and one BM25 scoring, computed in process.

Computing BM25 here rather than in the database keeps the ranking identical on every store
(SQLite's FTS5 and PostgreSQL's ts_rank score differently) and is fast: postings are numpy
arrays and a query touches only the postings of its terms.

Tokens: lowercased Unicode words, English stop words dropped, Snowball (Porter 2) stems.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import re
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

__all__ = ["BM25Index", "idf", "term_counts", "tokenize"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don doesn didn isn wasn weren ll ve re d m""".split()  # noqa: SIM905
)


def _english_stemmer() -> Any:
    """snowballstemmer's English stemmer. `import snowballstemmer` loads the stemmers of all
    its 30 languages (several ms of every hook's start); the English one alone is loaded from
    the same package, under a private name, unless PyStemmer is installed (which
    snowballstemmer then uses instead, so the same is used here)."""
    found = importlib.util.find_spec("snowballstemmer")
    folder = found.submodule_search_locations if found is not None else None
    if importlib.util.find_spec("Stemmer") is None and folder:
        name = "lamina._snowball_english"
        try:
            package = sys.modules.get(name)
            if package is None:
                spec = importlib.util.spec_from_loader(name, loader=None, is_package=True)
                assert spec is not None
                package = importlib.util.module_from_spec(spec)
                package.__path__ = list(folder)
                sys.modules[name] = package
            module = importlib.import_module(f"{name}.english_stemmer")
            return module.EnglishStemmer()
        except Exception:  # anything unexpected: the package's own way
            pass
    import snowballstemmer  # type: ignore[import-untyped]

    return snowballstemmer.stemmer("english")


_stemmer = _english_stemmer()


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


LINE_CACHED = 2_000
"""Lines up to this many characters keep what is read from them, in a cache per reader (their
terms here, their entities in lamina.text.entities): a window repeats its units' lines."""


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) < 64]


@lru_cache(maxsize=8_192)
def _line_terms(line: str) -> tuple[str, ...]:
    """One line's terms, remembered: a window repeats the lines of the units it joins."""
    return tuple(_terms(line))


def tokenize(text: str) -> list[str]:
    """The index terms of a text, in order (repeats kept). No word spans a line break, so a
    text's terms are its lines' terms in order."""
    return [
        term
        for line in text.split("\n")
        for term in (_line_terms(line) if len(line) <= LINE_CACHED else _terms(line))
    ]


def term_counts(text: str, extra: Iterable[str] = ()) -> tuple[int, Counter[str]]:
    """A document's BM25 length and term frequencies: the text's terms, plus `extra` terms
    (a memory's entities) that are indexed but leave the length, the text's, as it is. Every
    index (in process, SQLite, PostgreSQL) counts a memory with this."""
    terms = Counter(tokenize(text))
    length = sum(terms.values())
    terms.update(extra)
    return length, terms


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency of a term `df` of `n` documents hold."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


class BM25Index:
    """An append-only BM25 index over documents numbered 0, 1, 2, ... in insertion order."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._docs: dict[str, array[int]] = {}
        self._tfs: dict[str, array[int]] = {}
        self._lengths = array("i")
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, text: str, extra: Iterable[str] = ()) -> int:
        """Index one document; returns its number. `extra` terms (a memory's entities) are
        indexed too but leave the document's length, the length of its text, as it is."""
        length, terms = term_counts(text, extra)
        number = len(self._lengths)
        for term, tf in terms.items():
            docs = self._docs.get(term)
            if docs is None:
                docs = self._docs[term] = array("i")
                self._tfs[term] = array("i")
            docs.append(number)
            self._tfs[term].append(tf)
        self._lengths.append(length)
        self._total_length += length
        return number

    def df(self, term: str) -> int:
        """How many documents hold the term."""
        docs = self._docs.get(term)
        return 0 if docs is None else len(docs)

    def add_many(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.add(text)

    def scores(
        self, query: str | Sequence[str], alive: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float32]:
        """BM25 score of every document for the query (0 where no term matches)."""
        n = len(self._lengths)
        out = np.zeros(n, dtype=np.float32)
        if n == 0:
            return out
        terms = tokenize(query) if isinstance(query, str) else list(query)
        lengths = np.frombuffer(self._lengths, dtype=np.int32).astype(np.float32)
        avgdl = self._total_length / n if self._total_length else 1.0
        norm = self.k1 * (1 - self.b + self.b * lengths / avgdl)
        for term, qtf in Counter(terms).items():
            docs_arr = self._docs.get(term)
            if docs_arr is None:
                continue
            docs = np.frombuffer(docs_arr, dtype=np.int32)
            tfs = np.frombuffer(self._tfs[term], dtype=np.int32).astype(np.float32)
            weight = qtf * idf(n, len(docs))
            out[docs] += weight * tfs * (self.k1 + 1) / (tfs + norm[docs])
        if alive is not None:
            out[~alive[:n]] = 0
        return out
