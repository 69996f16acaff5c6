"""The memory bank: recall-query composition now; retain and recall build on it."""

from .query import QueryOptions, RecallQuery, compose_recall_query

__all__ = ["QueryOptions", "RecallQuery", "compose_recall_query"]
