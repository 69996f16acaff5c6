"""The context compiler: fit a long conversation into a token budget with layered summaries."""

from .compile import Compiler, CompileResult, CoverageError, request_tokens
from .frontier import CompileOptions, OverBudgetError
from .log import ContextLog, enters_log
from .summarise import ExtractiveSummariser, Summariser
from .validate import validate_anthropic

__all__ = [
    "CompileOptions",
    "CompileResult",
    "Compiler",
    "ContextLog",
    "CoverageError",
    "ExtractiveSummariser",
    "OverBudgetError",
    "Summariser",
    "enters_log",
    "request_tokens",
    "validate_anthropic",
]
