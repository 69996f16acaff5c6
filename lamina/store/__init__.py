"""Storage behind one protocol: SQLite embedded by default."""

from .base import MemoryRow, RetainBatch, RetainOutcome, Store
from .sqlite import SQLiteStore

__all__ = ["MemoryRow", "RetainBatch", "RetainOutcome", "SQLiteStore", "Store"]
