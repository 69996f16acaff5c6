"""What summarisers spent on a provider, so a cap can stop the next call before it is sent.

    ledger = InMemorySpendLedger()
    ledger.record("anthropic:claude-haiku-4-5", input_tokens=1200, output_tokens=300, at=now)
    ledger.spent("anthropic:claude-haiku-4-5", since=now - 3600)   # 1500

The protocol is two methods on purpose: a store-backed ledger (shared by every process of a
deployment) only has to keep rows of (summariser, tokens, time) and sum them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from . import LLMResponse

__all__ = ["InMemorySpendLedger", "SpendCaps", "SpendLedger", "over_cap"]


class SpendLedger(Protocol):
    def record(self, summariser: str, input_tokens: int, output_tokens: int, at: float) -> None:
        """One provider call's tokens, at `at` (seconds since the epoch)."""
        ...

    def spent(self, summariser: str, since: float) -> int:
        """Tokens (input and output) `summariser` used from `since` on."""
        ...


@dataclass
class InMemorySpendLedger:
    """The default: this process's calls only, forgotten when it ends."""

    entries: list[tuple[str, int, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, summariser: str, input_tokens: int, output_tokens: int, at: float) -> None:
        with self._lock:
            self.entries.append((summariser, input_tokens + output_tokens, at))

    def spent(self, summariser: str, since: float) -> int:
        with self._lock:
            return sum(t for name, t, at in self.entries if name == summariser and at >= since)


def over_cap(
    ledger: SpendLedger,
    name: str,
    cost: int,
    now: float,
    tokens_per_hour: int | None,
    tokens_per_day: int | None,
) -> str | None:
    """Why a call to the model `name` that may take `cost` tokens would pass a cap (None: it
    would not). The caps count every call the ledger recorded for that model: summaries, facts
    and query expansions alike."""
    for cap, span, label in ((tokens_per_hour, 3_600, "hour"), (tokens_per_day, 86_400, "day")):
        if cap is None:
            continue
        spent = ledger.spent(name, now - span)
        if spent + cost > cap:
            return (
                f"spend cap: {spent} tokens in the last {label} and this call may take "
                f"{cost}, over the {cap} a {label} allowed for {name}"
            )
    return None


@dataclass
class SpendCaps:
    """What calls to a model may spend (tokens in and out, per hour and per day; None: no cap)
    and the ledger that keeps what they spent. Fact extraction and query expansion each hold
    one; a `StoreSpendLedger` shares the spending, and so the caps, with every process of the
    database."""

    ledger: SpendLedger = field(default_factory=InMemorySpendLedger)
    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None
    clock: Callable[[], float] = time.time

    def refusal(self, name: str, cost: int) -> str | None:
        """Why a call to `name` that may take `cost` tokens is not to be sent (None: send it)."""
        return over_cap(
            self.ledger, name, cost, self.clock(), self.tokens_per_hour, self.tokens_per_day
        )

    def record(self, name: str, response: LLMResponse, sent: int) -> None:
        """One answered call: the provider's token counts, else `sent` and the answer's."""
        from ..tokens import count_text

        self.ledger.record(
            name,
            response.input_tokens or sent,
            response.output_tokens or count_text(response.text),
            self.clock(),
        )
