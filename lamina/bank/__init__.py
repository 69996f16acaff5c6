"""The memory bank: recall-query composition, retain, recall.

The names below are loaded on first use, so that importing a module of this package (a recall
opens `lamina.bank.bank`) does not also import the transcript readers that composing a recall
query needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .query import QueryOptions, RecallQuery, compose_recall_query

__all__ = ["QueryOptions", "RecallQuery", "compose_recall_query"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import query

        return getattr(query, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
