"""The summariser the settings name: the offline extractive one, or a model behind the
refusal ladder. Kept apart from both, so that neither the forest (which only calls a
`Summariser`) nor the ladder depends on the other through it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .summarise import ExtractiveSummariser, Summariser

if TYPE_CHECKING:
    from ..config import SummariserSettings
    from ..llm import LLM
    from ..llm.spend import SpendLedger
    from ..store.base import Store

__all__ = ["log_summariser", "summariser_from_config"]


def summariser_from_config(
    settings: SummariserSettings,
    *,
    env: Mapping[str, str] | None = None,
    get_llm: Callable[[str, Mapping[str, str] | None], LLM] | None = None,
    ledger: SpendLedger | None = None,
) -> Summariser:
    """The summariser the settings name: the offline `ExtractiveSummariser` when none is
    configured (nothing downloaded, no network), else a `ModelSummariser` over that provider
    with the settings' window and spend caps, counted in `ledger` (default: this process's
    calls only). `get_llm` builds the provider (tests pass a fake)."""
    if not settings.summariser:
        return ExtractiveSummariser()
    from ..llm import get_llm as default_get_llm
    from .ladder import ModelOptions, ModelSummariser

    llm = (get_llm or default_get_llm)(settings.summariser, env)
    options = ModelOptions(
        window=settings.compression_context_budget,
        tokens_per_hour=settings.tokens_per_hour,
        tokens_per_day=settings.tokens_per_day,
    )
    return ModelSummariser(llm, options, ledger=ledger)


def log_summariser(
    store: Store | None = None, settings: SummariserSettings | None = None
) -> Summariser:
    """The summariser stored logs are compiled with over HTTP, MCP and the CLI: the one the
    entry point's settings name (`summariser` in the config file or `LAMINA_SUMMARISER`; see
    lamina.config), else the offline `ExtractiveSummariser`. Its spending is counted in
    `store`, so the caps hold across every process using the database. A log's summaries
    record which summariser wrote them, so switching never rewrites old ones."""
    if settings is None:
        from ..config import SummariserSettings

        settings = SummariserSettings()
    if not settings.summariser:
        return ExtractiveSummariser()  # nothing is spent: no ledger to keep
    from ..store.ledger import StoreSpendLedger

    ledger = StoreSpendLedger(store) if store is not None else None
    return summariser_from_config(settings, ledger=ledger)
