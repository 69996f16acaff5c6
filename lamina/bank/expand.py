"""Optional query expansion: a model rewrites a question in the words its answer was likely said in.

About a quarter of the questions recall misses share no content word with the turn that answers
them ("recurring frustration" against "lost my keys again, a weekly ritual"). With an expander,
`MemoryBank.recall` first asks a model for up to three short search queries in the words such a
turn would use, then recalls with the question and those queries together: every channel sees
them (the lexical ones match the new words, the dense one embeds the whole), except the time
channel, which keeps to the question's own time words (a "last year" the model wrote is not the
question's time frame).

    caps = SpendCaps(StoreSpendLedger(store), tokens_per_hour=200_000)
    expander = QueryExpander(get_llm("anthropic:claude-haiku-4-5"), caps=caps)
    result = bank.recall("what is Sam's recurring frustration?", "chat", expander=expander)
    result.expansion.queries        # ("lost keys again", "forgetting things every week", ...)

It is off by default and never needed: recall stands on its own offline. A call that would pass
a spend cap is not sent; a model that fails, refuses or answers nothing usable costs the recall
nothing but the wait: it goes on with the question alone, and `expansion.skipped` says why. The
answers are kept per question for the process, so asking again costs no second call.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..llm import LLM, NORMAL_STOPS, LLMError, LLMRequest
from ..llm.spend import SpendCaps
from ..tokens import count_text

__all__ = ["MAX_QUERIES", "Expansion", "QueryExpander", "parse_queries"]

MAX_QUERIES = 3
"""Search queries kept from an answer."""
MAX_QUERY_CHARS = 200
"""A longer line is cut here (a model that writes an essay does not flood the query)."""

SYSTEM = """You help search the memory of past conversations. Rewrite the user's question as \
up to three short search queries, one per line, in the words the conversation turns that answer \
it would likely use: concrete words for abstract ones, synonyms, related terms and activities. \
Keep the names the question uses. Do not answer the question, do not explain, no numbering."""

_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)]|\(\d+\)|query\s*\d*\s*:)\s*", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Expansion:
    """What a model added to a question: its search queries, or why there are none."""

    queries: tuple[str, ...] = ()
    skipped: str | None = None
    """Why no query was added (a spend cap, the model's error or refusal, an empty answer)."""
    cached: bool = False
    """Answered from this process's earlier call for the same question."""

    @property
    def text(self) -> str:
        """The queries, one per line ("" when none)."""
        return "\n".join(self.queries)

    def as_dict(self) -> dict[str, object]:
        return {"queries": list(self.queries), "skipped": self.skipped, "cached": self.cached}


def parse_queries(answer: str, question: str) -> tuple[str, ...]:
    """The search queries of a model's answer: one per line, bullets and numbering removed,
    control characters dropped, each cut to MAX_QUERY_CHARS, repeats and the question itself
    left out, at most MAX_QUERIES."""
    seen = {" ".join(question.lower().split())}
    queries: list[str] = []
    for line in answer.splitlines():
        text = " ".join(_CONTROL.sub(" ", _BULLET.sub("", line)).split()).strip("\"'`")
        text = text[:MAX_QUERY_CHARS].strip()
        key = text.lower()
        if not text or key in seen:
            continue
        seen.add(key)
        queries.append(text)
        if len(queries) == MAX_QUERIES:
            break
    return tuple(queries)


class QueryExpander:
    """Asks `llm` for search queries in the words a question's answer was likely said in (see
    the module doc), spending under `caps` (shared with the model's summaries and facts when
    the ledger is). Thread-safe."""

    def __init__(
        self,
        llm: LLM,
        *,
        caps: SpendCaps | None = None,
        max_tokens: int = 120,
        cache_size: int = 256,
    ) -> None:
        self.llm = llm
        self.caps = caps if caps is not None else SpendCaps()
        self.max_tokens = max_tokens
        self._cache: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.llm.name

    def expand(self, question: str) -> Expansion:
        """Search queries for `question`; none (with the reason) when the model may not be
        asked or gave nothing usable. Never raises for the model's failures."""
        key = " ".join(question.split())
        if not key:
            return Expansion(skipped="empty question")
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return Expansion(found, cached=True)
        request = LLMRequest(
            system=SYSTEM,
            messages=[{"role": "user", "content": key}],
            max_tokens=self.max_tokens,
        )
        sent = count_text(SYSTEM) + count_text(key) + 8
        reason = self.caps.refusal(self.name, sent + self.max_tokens)
        if reason is not None:
            return Expansion(skipped=reason)
        try:
            response = self.llm.complete(request)
        except LLMError as exc:
            return Expansion(skipped=f"{self.name}: {exc}")
        self.caps.record(self.name, response, sent)
        text = response.text
        if response.stop_reason == "max_tokens":
            text = text.rpartition("\n")[0]  # the last line was cut off
        elif response.stop_reason not in NORMAL_STOPS and response.stop_reason != "":
            return Expansion(skipped=f"{self.name}: stopped with {response.stop_reason!r}")
        queries = parse_queries(text, key)
        if not queries:
            return Expansion(skipped=f"{self.name}: no search query in the answer")
        with self._lock:
            self._cache[key] = queries
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return Expansion(queries)
