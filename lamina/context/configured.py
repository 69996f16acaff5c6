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

__all__ = ["summariser_from_config"]


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
