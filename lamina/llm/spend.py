"""What summarisers spent on a provider, so a cap can stop the next call before it is sent.

    ledger = InMemorySpendLedger()
    ledger.record("anthropic:claude-haiku-4-5", input_tokens=1200, output_tokens=300, at=now)
    ledger.spent("anthropic:claude-haiku-4-5", since=now - 3600)   # 1500

The protocol is two methods on purpose: a store-backed ledger (shared by every process of a
deployment) only has to keep rows of (summariser, tokens, time) and sum them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["InMemorySpendLedger", "SpendLedger"]


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
