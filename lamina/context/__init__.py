"""The context compiler: fit a long conversation into a token budget with layered summaries."""

from .compile import Compiler, CompileResult, CoverageError, request_tokens
from .frontier import CompileOptions, OverBudgetError
from .log import ContextLog, enters_log
from .pins import Pin, PinConflictError
from .render import REQUEST_FORMATS, RequestFormat
from .stored import StoredLog
from .summarise import ExtractiveSummariser, Summariser
from .validate import validate_anthropic, validate_openai

__all__ = [
    "REQUEST_FORMATS",
    "CompileOptions",
    "CompileResult",
    "Compiler",
    "ContextLog",
    "CoverageError",
    "ExtractiveSummariser",
    "OverBudgetError",
    "Pin",
    "PinConflictError",
    "RequestFormat",
    "StoredLog",
    "Summariser",
    "enters_log",
    "request_tokens",
    "validate_anthropic",
    "validate_openai",
]
