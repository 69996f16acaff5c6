"""Optional fact extraction: a model reads each new turn and states the facts worth keeping.

Facts become memories of kind `fact` beside the turn they came from (same source span), with the
date the fact is about when the model gives one. Extraction never blocks retention: a failed or
unusable answer is counted in the retain report and the turn is stored anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import orjson

from ..llm import LLM, NORMAL_STOPS, LLMError, LLMRequest
from ..llm.spend import SpendCaps
from ..text.when import read_day
from ..tokens import count_text

__all__ = ["MAX_FACTS", "Fact", "FactExtractor"]

MAX_FACTS = 12
"""Facts kept per turn."""

SYSTEM = """You maintain the long-term memory of an assistant. From one exchange of a \
conversation, write down the facts worth remembering weeks later: decisions and their reasons, \
preferences, plans, names, numbers, events with their dates, problems and how they were solved. \
Each fact is one self-contained sentence that names who or what it is about (no "he", "it", \
"this"). Leave out greetings, small talk and anything only true for the moment. Answer with JSON \
only: {"facts": [{"fact": "...", "date": "YYYY-MM-DD or null"}]}, where date is the day the fact \
is about when the exchange says or implies it. If there is nothing worth keeping, answer \
{"facts": []}."""

_JSON = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Fact:
    text: str
    occurred_at: datetime | None


class FactExtractor:
    """Asks `llm` for the facts of each turn, spending under `caps` (shared with the model's
    summaries and query expansions when the ledger is): a turn whose call would pass a cap is
    stored without facts, its error in the retain report."""

    def __init__(self, llm: LLM, *, max_tokens: int = 800, caps: SpendCaps | None = None) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.caps = caps if caps is not None else SpendCaps()

    def extract(self, text: str, said_at: datetime | None) -> list[Fact]:
        """The facts of one turn. Raises LLMError when the model fails or answers nonsense,
        or when the call would pass a spend cap (then it is not sent)."""
        when = f"The exchange happened on {said_at:%Y-%m-%d}.\n\n" if said_at else ""
        content = f"{when}<exchange>\n{text}\n</exchange>"
        request = LLMRequest(
            system=SYSTEM,
            messages=[{"role": "user", "content": content}],
            max_tokens=self.max_tokens,
        )
        sent = count_text(SYSTEM) + count_text(content) + 8
        reason = self.caps.refusal(self.llm.name, sent + self.max_tokens)
        if reason is not None:
            raise LLMError(reason)
        response = self.llm.complete(request)
        self.caps.record(self.llm.name, response, sent)
        if response.stop_reason not in NORMAL_STOPS and response.stop_reason != "":
            raise LLMError(f"{self.llm.name}: stopped with {response.stop_reason!r}")
        return parse_facts(response.text)


def parse_facts(answer: str) -> list[Fact]:
    match = _JSON.search(answer)
    if match is None:
        raise LLMError("the fact answer holds no JSON object")
    try:
        data = orjson.loads(match.group(0))
    except orjson.JSONDecodeError as exc:
        raise LLMError(f"the fact answer is not valid JSON ({exc})") from None
    items = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise LLMError("the fact answer has no 'facts' list")
    facts: list[Fact] = []
    for item in items[:MAX_FACTS]:
        if not isinstance(item, dict) or not isinstance(item.get("fact"), str):
            continue
        text = " ".join(item["fact"].split())
        if not text:
            continue
        facts.append(Fact(text, _date(item.get("date"))))
    return facts


def _date(value: object) -> datetime | None:
    """The day a fact's `date` names: asked as YYYY-MM-DD, read as recall reads dates (a model
    that answers "22.01.2024" or "January 22, 2024" still dates its fact); None when it names
    no single day."""
    return read_day(value) if isinstance(value, str) else None
