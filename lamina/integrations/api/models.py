"""The HTTP API's request and response bodies: what /openapi.json publishes as the contract.

Request bodies reject fields they do not know (422 naming the field), so a misspelt option is
an error rather than a silent default. Responses are validated against these models on the
way out, so the published schema and the answers cannot drift apart
(`tests/test_http_contract.py` checks live answers against /openapi.json).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...context.render import RequestFormat

__all__ = [
    "AppendBody",
    "Appended",
    "BankDetail",
    "BankEntry",
    "BankList",
    "CompileAnswer",
    "CompileBody",
    "CompileReport",
    "DocumentEntry",
    "DocumentList",
    "ErrorBody",
    "ErrorDetail",
    "ErrorType",
    "ForgottenDocument",
    "ForgottenMemory",
    "FrontierShape",
    "Health",
    "LevelCount",
    "Listing",
    "LogCompileBody",
    "LogDeleted",
    "LogDetail",
    "LogEntry",
    "LogList",
    "Mark",
    "MarkBody",
    "MarkList",
    "Marked",
    "Operation",
    "OperationStarted",
    "PinBody",
    "PinInfo",
    "Pinned",
    "RecallAnswer",
    "RecallBody",
    "RecallHit",
    "RetainBody",
    "RetainReport",
    "SourceSpan",
    "Unpinned",
]

ErrorType = Literal[
    "invalid_request",
    "unauthorized",
    "not_found",
    "method_not_allowed",
    "conflict",
    "too_large",
    "unsupported_format",
    "misdirected",
    "unreadable_input",
    "over_budget",
    "internal",
    "store_unavailable",
]
"""The stable set of error types (see `lamina.integrations.http.ERROR_TYPES`)."""

MessageFormat = Literal["anthropic", "openai", "claude-code"]
Messages = list[dict[str, Any]]
System = str | list[dict[str, Any]] | None


class Body(BaseModel):
    """A request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Answer(BaseModel):
    """A response body."""

    model_config = ConfigDict(use_attribute_docstrings=True)


# -- errors ------------------------------------------------------------------------------------
class ErrorDetail(Answer):
    type: ErrorType
    """A stable, snake_case code to branch on."""
    message: str
    """One line a person can act on."""


class ErrorBody(Answer):
    """Every error answer: unknown routes, wrong methods and invalid bodies included."""

    error: ErrorDetail


class Health(Answer):
    status: Literal["ok"]
    version: str


# -- banks, documents, memories ----------------------------------------------------------------
class BankEntry(Answer):
    bank: str
    documents: int
    memories: int


# One bank in detail (`GET /v1/banks/{bank}`), also what the inspector's bank cards show. No
# docstring: it would become the published schema's description.
class BankDetail(Answer):
    bank: str
    created_at: datetime | None
    documents: int
    memories: int
    records: int
    embedded: int
    embedders: dict[str, int]
    first_time: datetime | None
    last_time: datetime | None
    last_retain: datetime | None
    last_document: str | None
    logs: int
    bank_bytes: int | None
    database_bytes: int | None
    """The whole database's size on disk (all banks), when the store knows it."""


class Listing(Answer):
    """A page of a list: `limit` items from `offset` on, of `total`."""

    total: int
    """Items in the whole list."""
    limit: int
    offset: int


class BankList(Listing):
    banks: list[BankEntry]
    """The banks this key may use, by name."""


class DocumentEntry(Answer):
    id: str
    """The document's id, as given at retain (it may contain '/')."""
    source: str | None
    """Where it was read from (a file path, or `messages`)."""
    tags: list[str]
    updated_at: datetime


class DocumentList(Listing):
    bank: str
    documents: list[DocumentEntry]


class ForgottenDocument(Answer):
    bank: str
    document: str
    memories_forgotten: int


class ForgottenMemory(Answer):
    bank: str
    memory: str
    forgotten: Literal[True]


class MarkBody(Body):
    state: Literal["wrong", "superseded"]
    """`wrong`: recall leaves the memory out; `superseded`: recall shows `replacement` instead."""
    replacement: str | None = Field(default=None, max_length=500)
    """The id of the memory that supersedes this one (with `superseded` only)."""
    note: str = Field(default="", max_length=2000)
    """Why (kept with the mark, secrets redacted)."""


class Mark(Answer):
    memory: str
    state: str
    replacement: str | None
    note: str
    at: datetime | None


class Marked(Answer):
    bank: str
    mark: Mark


class MarkList(Answer):
    bank: str
    marks: list[Mark]


# -- recall and retain -------------------------------------------------------------------------
class RecallBody(Body):
    query: str = Field(max_length=20_000)
    """What to recall: a question or the latest prompt."""
    budget: int = Field(default=1024, ge=1, le=200_000)
    """Tokens the returned memories may take, together."""
    limit: int = Field(default=50, ge=1, le=1000)
    """At most this many memories."""
    documents: list[str] | None = None
    """Only memories of these documents."""
    tags: list[str] | None = None
    """Only memories of documents carrying one of these tags."""
    agents: list[str] | None = None
    """Only memories of sessions of these agents (claude-code, codex, gemini, copilot)."""
    since: datetime | None = None
    """Only memories from this time on."""
    until: datetime | None = None
    """Only memories up to this time."""
    show_wrong: bool = False
    """Also return the memories marked wrong, after the others, each with its mark."""


class SourceSpan(Answer):
    first_record: str | None
    last_record: str | None
    first_line: int | None
    last_line: int | None
    records: int


class RecallHit(Answer):
    id: str
    text: str
    score: float = Field(ge=0.0, le=1.0)
    """Relevance from 0 to 1, higher is better; never higher than the result's above it."""
    time: datetime | None
    """When it was said."""
    document: str
    kind: str
    source: SourceSpan
    speakers: list[str]
    tokens: int
    shortened: bool
    """Cut to fit the budget."""
    channels: dict[str, dict[str, float]]
    """Per search channel (dense, lexical, time, entity): its rank and raw score."""
    correction: dict[str, Any] | None = None
    """Its mark (`state` wrong, with `show_wrong`), or the ids of the memories it `replaces`."""


class RecallAnswer(Answer):
    bank: str
    query: str
    results: list[RecallHit]
    considered: int
    """How many memories the search looked at."""
    tokens: int
    """Tokens of the returned memories, together."""


class RetainBody(Body):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=False)

    document: str = Field(min_length=1, max_length=500)
    """The document's id in the bank (a session id, a file name; '/' allowed)."""
    messages: Messages | None = None
    """Messages in the Anthropic or OpenAI shape (or Claude Code records). Messages without an
    id get one from their content, so sending the whole conversation again adds only what is
    new."""
    text: str | None = None
    """Or one plain text to remember."""
    format: MessageFormat | None = None
    """The shape of `messages`; detected when absent."""
    tags: list[str] = Field(default_factory=list)
    """Kept with the document; recall can filter on them."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Kept with the document (secrets redacted)."""
    run_async: bool = Field(default=False, alias="async")
    """Answer 202 at once with an operation to poll (`GET /v1/operations/{id}`)."""


class RetainReport(Answer):
    bank: str
    document: str
    status: str
    """`retained`, or `unchanged` when nothing was new."""
    new_records: int
    memories_added: int
    memories_updated: int
    embedded: int
    redactions: int
    facts: int
    fact_errors: list[str]
    warnings: list[str]
    pending_partial_line: bool
    seconds: float


class OperationStarted(Answer):
    operation: str
    """Its id: poll `GET /v1/operations/{id}` (also in the Location header)."""
    status: Literal["running"]


class Operation(Answer):
    id: str
    kind: str
    bank: str
    status: Literal["running", "done", "failed"]
    result: RetainReport | None
    """The retain's report, once done."""
    error: str | None
    """Why it failed."""
    created_at: datetime
    updated_at: datetime


# -- compiling and context logs ----------------------------------------------------------------
class CompileReport(Answer):
    """What the compile showed raw and folded; more fields may be added."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    budget: int
    reserve: int
    tokens: int
    """Tokens of the compiled request."""
    log_messages: int
    log_tokens: int
    summaries_by_level: dict[str, int]
    folds: int
    summaries_written: int
    pins: list[dict[str, Any]]
    warnings: list[str]


class CompileAnswer(Answer):
    request: dict[str, Any]
    """An Anthropic Messages request (or an OpenAI Chat Completions one), ready to send once
    `model` and `max_tokens` are added."""
    report: CompileReport


class CompileBody(Body):
    messages: Messages = Field(min_length=1)
    """The conversation, in the Anthropic or OpenAI shape (or Claude Code records)."""
    system: System = None
    """A system prompt sent apart from `messages` (as Anthropic's `system` field); a system
    message among them does the same."""
    format: MessageFormat | None = None
    """The shape of `messages`; detected when absent."""
    budget: int = Field(default=32_000, ge=1_000, le=2_000_000)
    """Tokens the compiled request may take, the reply's reserve included."""
    reserve: int = Field(default=4_000, ge=0)
    """Tokens kept free for the reply."""
    request_format: RequestFormat = "anthropic"
    """The request to return: an Anthropic Messages or an OpenAI Chat Completions request."""


class AppendBody(Body):
    messages: Messages = Field(min_length=1)
    """Messages in the Anthropic or OpenAI shape (or Claude Code records), as for /v1/compile;
    those the log holds already are skipped."""
    system: System = None
    """A system prompt sent apart from `messages` (as Anthropic's `system` field); a system
    message among them does the same."""
    format: MessageFormat | None = None
    """The shape of `messages`; detected when absent."""


class LogCompileBody(Body):
    budget: int = Field(default=32_000, ge=1_000, le=2_000_000)
    """Tokens the compiled request may take, the reply's reserve included."""
    reserve: int = Field(default=4_000, ge=0)
    """Tokens kept free for the reply."""
    request_format: RequestFormat = "anthropic"
    """The request to return: an Anthropic Messages or an OpenAI Chat Completions request."""
    messages: Messages | None = None
    """Messages to append before compiling (optional)."""
    system: System = None
    """A system prompt sent apart from `messages` (as Anthropic's `system` field); a system
    message among them does the same."""
    format: MessageFormat | None = None
    """The shape of `messages`; detected when absent."""


class PinBody(Body):
    mode: Literal["raw", "exact", "max"]
    """`raw`: never folded; `exact`: always as summaries of `level`; `max`: folded no deeper."""
    level: int = Field(default=0, ge=0, le=64)
    """The summary level for `exact` (at least 1) and `max`; 0 for `raw`."""
    messages: tuple[int, int] | None = None
    """The first and last message held (log positions from 0, both included)."""
    document: str | None = Field(default=None, min_length=1, max_length=4096)
    """Or a document (a file name or path): every message carrying it."""


class LogEntry(Answer):
    id: str
    messages: int
    tokens: int
    summaries: int
    created: datetime
    updated: datetime


class LogList(Listing):
    bank: str
    logs: list[LogEntry]


class LevelCount(Answer):
    count: int
    tokens: int


class FrontierShape(Answer):
    tokens: int | None
    raw_messages: int
    folded_messages: int
    head_messages: int
    tail_from_message: int
    summaries_shown_by_level: dict[str, int]


class PinInfo(Answer):
    name: str
    mode: Literal["raw", "exact", "max"]
    level: int
    messages: tuple[int, int] | None
    """The first and last message held, both included."""
    document: str | None


class LogDetail(LogEntry):
    bank: str
    summaries_by_level: dict[str, LevelCount]
    last_frontier: FrontierShape | None
    """What the last compile showed raw and folded (null before the first)."""
    pins: list[PinInfo]


class Appended(Answer):
    bank: str
    log: str
    received: int
    added: int
    """Of those received, how many were new to the log."""
    messages: int
    """Messages the log holds now."""


class Pinned(Answer):
    bank: str
    log: str
    pinned: str
    pins: list[str]
    """Every pin of the log, described."""


class Unpinned(Answer):
    bank: str
    log: str
    unpinned: str


class LogDeleted(Answer):
    bank: str
    log: str
    deleted: Literal[True]
