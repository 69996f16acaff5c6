"""A summariser spending ledger kept in the store, so a cap holds across every process that
uses the same database (hooks, servers, CLI runs), not just one.

    ledger = StoreSpendLedger(store)
    summariser = ModelSummariser(llm, ledger=ledger, tokens_per_hour=200_000)

It implements `lamina.llm.spend.SpendLedger`: one row per provider call, summed over a window;
rows older than two days are dropped as new ones come (caps look back a day at most).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .base import Store

__all__ = ["StoreSpendLedger"]


class StoreSpendLedger:
    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, summariser: str, input_tokens: int, output_tokens: int, at: float) -> None:
        when = datetime.fromtimestamp(at, UTC)
        self.store.record_spend(summariser, when, input_tokens, output_tokens)

    def spent(self, summariser: str, since: float) -> int:
        return self.store.spent_since(summariser, datetime.fromtimestamp(since, UTC))
