"""`lamina mcp`: the memory bank as an MCP server, built on the official `mcp` SDK, over stdio
or streamable HTTP.

Tools: `recall`, `retain_text`, `retain_transcript`, `list_banks`, `list_documents`,
`forget_document`, `compile_transcript`, and for context logs kept in a bank (as the HTTP API's
`/v1/banks/{bank}/logs`): `append_to_log`, `compile_log`, `list_logs`, `delete_log`, `pin_log`,
`unpin_log`. A tool that fails for a reason the caller can fix (no such bank or log, a file
that is not a transcript) answers with an MCP tool error carrying Lamina's one-line message;
the server never crashes on bad input. Without a `bank` argument, tools use the server's
default bank (`--bank`, `LAMINA_BANK`, or the project bank of `CLAUDE_PROJECT_DIR` when Claude Code
started it, else of the directory it was started in).
Over HTTP the API keys of `lamina keys` apply as they do for `lamina serve` (`lamina.access.Gate`):
once a key exists, every call needs `Authorization: Bearer <key>` and sees only the key's banks
(others are reported as absent), and a tool that takes a file path refuses paths outside the
directories an operator allowed (`--allow-dir`; none by default), without saying whether the
path exists. Over stdio the caller is the local user: every bank, any path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .. import __version__
from ..access import Gate
from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions
from ..config import default_bank
from ..context import CompileOptions
from ..context.pins import Pin
from ..context.render import RequestFormat
from ..errors import InputError, LaminaError, NotFoundError
from ..messages import Kind, Message, Role, TextBlock
from ..readers import read_transcript
from ..turns import classify
from .logs import (
    OpenLogs,
    check_budget,
    find_log,
    log_summariser,
    log_summary,
    read_message_list,
    with_system,
)
from .mcp_stdio import INSTRUCTIONS

__all__ = ["build_server"]

P = ParamSpec("P")
R = TypeVar("R")


def _tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Lamina's errors become MCP tool errors with their one-line message."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except LaminaError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def build_server(
    home: str | Path | None = None,
    bank: str | None = None,
    *,
    database_url: str | None = None,
    host: str = "127.0.0.1",
    allow_dirs: Sequence[str | Path] = (),
) -> MCPServer:
    memory = MemoryBank.open(home, database_url=database_url, serving=True)
    gate = Gate.at_start(memory.store, host, allow_dirs)
    # Claude Code names the project it started the server for; it stays put, unlike cwd.
    fallback = bank or default_bank(os.environ.get("CLAUDE_PROJECT_DIR") or None)
    summariser = log_summariser(memory.store)
    open_logs = OpenLogs(memory.store, summariser)
    server = MCPServer(name="lamina", instructions=INSTRUCTIONS, version=__version__)

    def allowed(ctx: Context | None) -> list[str] | None:
        """The banks this caller may use (None: all). HTTP callers show an API key once any
        exists; stdio callers are the local user."""
        headers = ctx.headers if ctx is not None else None
        if headers is None:
            return None
        return gate.access(headers.get("authorization")).banks

    def local_path(path: str, ctx: Context | None) -> str:
        """A path the caller named: as given over stdio; over HTTP only inside the allowed
        directories (the key is checked first)."""
        if ctx is None or ctx.headers is None:
            return path
        allowed(ctx)
        return gate.server_path(path)

    def pick(name: str | None, ctx: Context | None = None, *, must_exist: bool = False) -> str:
        chosen = name or fallback
        banks = allowed(ctx)
        visible = banks is None or "*" in banks or chosen in banks
        if not visible or (must_exist and memory.store.get_bank(chosen) is None):
            raise NotFoundError(f"no bank named {chosen!r}")
        return chosen

    @server.tool(
        description=(
            "Recall the memories that best answer a question, within a token budget. Returns "
            "each memory's text, date, source document and a score per search channel."
        )
    )
    @_tool_errors
    def recall(
        query: str,
        bank: str | None = None,
        budget: int = 1024,
        documents: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        if budget < 1:
            raise InputError("budget must be at least 1 token")
        options = RecallOptions(
            budget=budget, documents=frozenset(documents) if documents else None
        )
        result = memory.recall(query, name, options)
        return {"bank": name, **result.as_dict(), "block": result.block()}

    @server.tool(
        description=(
            "Remember a piece of text (a note, a decision, a user's preference). The same text "
            "retained twice into the same document is stored once."
        )
    )
    @_tool_errors
    def retain_text(
        text: str,
        bank: str | None = None,
        document: str = "notes",
        speaker: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        if not text.strip():
            raise InputError("text is empty")
        digest = hashlib.sha1(f"{document}\x00{text}".encode()).hexdigest()[:20]
        message = Message(
            id=f"note:{digest}",
            role=Role.USER,
            blocks=(TextBlock(text),),
            kind=Kind.PROMPT,
            timestamp=datetime.now(UTC),
            speaker=speaker,
        )
        message = replace(message, kind=classify(message))
        report = memory.retain_messages([message], pick(bank, ctx), document)
        return report.as_dict()

    @server.tool(
        description=(
            "Remember a transcript file (Claude Code JSONL, Anthropic or OpenAI message lists, "
            "LoCoMo). Only what is new since the last retain of that file is read."
        )
    )
    @_tool_errors
    def retain_transcript(
        path: str,
        bank: str | None = None,
        document_id: str | None = None,
        format: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = pick(bank, ctx)
        report = memory.retain_file(
            local_path(path, ctx), name, document=document_id, format=format
        )
        return report.as_dict()

    @server.tool(description="List the memory banks with their sizes.")
    @_tool_errors
    def list_banks(ctx: Context | None = None) -> dict[str, Any]:
        scope = allowed(ctx)
        banks = []
        for item in memory.banks():
            if scope is not None and "*" not in scope and item.name not in scope:
                continue
            stats = memory.stats(item.name)
            banks.append(
                {"bank": item.name, "documents": stats.documents, "memories": stats.memories}
            )
        return {"default": fallback, "banks": banks}

    @server.tool(description="List the documents (retained sources) of a bank.")
    @_tool_errors
    def list_documents(bank: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        return {
            "bank": name,
            "documents": [
                {"id": d.id, "source": d.source, "updated_at": d.updated_at.isoformat()}
                for d in memory.documents(name)
            ],
        }

    @server.tool(description="Forget a document: its memories and records are deleted.")
    @_tool_errors
    def forget_document(
        document: str, bank: str | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        return {"bank": name, "document": document,
                "memories_forgotten": memory.forget_document(name, document)}  # fmt: skip

    @server.tool(
        description=(
            "Compile a transcript file into a request that fits a token budget (an Anthropic "
            "Messages request, or with request_format 'openai' an OpenAI Chat Completions one): "
            "old stretches folded into summaries shown as recall pairs, every provider rule "
            "respected. Returns the request and a report of what was folded."
        )
    )
    @_tool_errors
    def compile_transcript(
        path: str,
        budget: int = 32_000,
        reserve: int = 4_000,
        request_format: RequestFormat = "anthropic",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        from ..context import CompileOptions, Compiler, ContextLog
        from ..readers import read_transcript

        path = local_path(path, ctx)
        if reserve < 0 or budget - reserve < 500:
            raise InputError("budget minus reserve must leave at least 500 tokens")
        log = ContextLog.from_messages(read_transcript(path).messages)
        options = CompileOptions(budget=budget, reserve=reserve)
        result = Compiler(summariser).compile(log, options, request_format)
        return {"request": result.request, "report": result.report}

    def log_messages(
        log: str,
        messages: list[Any] | None,
        path: str | None,
        format: str | None,
        ctx: Context | None,
    ) -> list[Message]:
        if messages is not None and path is not None:
            raise InputError("give 'messages' or 'path', not both")
        if path is not None:
            return read_transcript(local_path(path, ctx), format=format).messages
        return read_message_list(messages or [], format, ids_from=log)

    @server.tool(
        description=(
            "Append messages to a context log kept in a bank (created on first use): "
            "`messages` in the Anthropic or OpenAI shape (or Claude Code records), or `path`, a "
            "transcript file. Messages the log holds already are skipped, so sending the whole "
            "conversation again adds only what is new. `system`: a system prompt sent apart "
            "(a system message among `messages` does the same). Returns how many were added."
        )
    )
    @_tool_errors
    def append_to_log(
        log: str,
        messages: list[Any] | None = None,
        path: str | None = None,
        format: str | None = None,
        bank: str | None = None,
        system: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = pick(bank, ctx)
        new = log_messages(log, messages, path, format, ctx)
        if not new:
            raise InputError("give 'messages' (a non-empty list) or 'path'")
        new = with_system(new, system, log)
        with open_logs.use(name, log) as stored:
            added = stored.append(new)
            held = len(stored.log)
        return {"bank": name, "log": log, "received": len(new), "added": added,
                "messages": held}  # fmt: skip

    @server.tool(
        description=(
            "Compile a context log kept in a bank into a request that fits a token budget (an "
            "Anthropic Messages request, or with request_format 'openai' an OpenAI Chat "
            "Completions one), optionally appending `messages` or a transcript `path` first. "
            "Summaries and the chosen layout are kept, so the next compile summarises only "
            "what is new and keeps the request's prefix. `system`: a system prompt sent "
            "apart, kept with the log. Returns the request and a report."
        )
    )
    @_tool_errors
    def compile_log(
        log: str,
        budget: int = 32_000,
        reserve: int = 4_000,
        request_format: RequestFormat = "anthropic",
        messages: list[Any] | None = None,
        path: str | None = None,
        format: str | None = None,
        bank: str | None = None,
        system: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        if budget < 1_000:
            raise InputError(f"budget: must be at least 1000 tokens (got {budget})")
        problem = check_budget(budget, reserve)
        if problem is not None:
            raise InputError(f"reserve: {problem}")
        allowed(ctx)
        new = log_messages(log, messages, path, format, ctx)
        name = pick(bank, ctx, must_exist=not new)
        if not new:
            find_log(memory.store, name, log)
        options = CompileOptions(budget=budget, reserve=reserve)
        new = with_system(new, system, log)
        with open_logs.use(name, log) as stored:
            stored.append(new)
            if not len(stored.log):
                raise InputError(f"log {log!r} of bank {name!r} holds no messages to compile")
            result = stored.compile(options, request_format, ahead=True)
        return {"request": result.request, "report": result.report}

    @server.tool(
        description="List the context logs of a bank: messages, tokens, summaries, last update."
    )
    @_tool_errors
    def list_logs(bank: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        store = memory.store
        return {"bank": name, "logs": [log_summary(store, i) for i in store.list_logs(name)]}

    @server.tool(
        description=(
            "Pin part of a context log so every compile shows it a given way: mode 'raw' "
            "(never folded), 'exact' with a level (always as summaries of that level) or 'max' "
            "with a level (folded no deeper). Give the first and last message (log positions "
            "from 0) or a document (a file name or path: every message carrying it). A pin of "
            "the same name is replaced; one that conflicts with another pin is refused."
        )
    )
    @_tool_errors
    def pin_log(
        log: str,
        pin: str,
        mode: Literal["raw", "exact", "max"],
        level: int = 0,
        first: int | None = None,
        last: int | None = None,
        document: str | None = None,
        bank: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        find_log(memory.store, name, log)
        if (first is None or last is None) == (document is None):
            raise InputError("give 'first' and 'last' (message positions) or 'document'")
        try:
            held = Pin.given(pin, mode, level, first, last, document)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        with open_logs.use(name, log) as stored:
            stored.pin(held)
            pins = [p.describe() for p in stored.pins()]
        return {"bank": name, "log": log, "pinned": held.describe(), "pins": pins}

    @server.tool(description="Remove a pin from a context log, by name.")
    @_tool_errors
    def unpin_log(
        log: str, pin: str, bank: str | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        if not memory.store.delete_pin(name, log, pin):
            raise NotFoundError(f"no pin {pin!r} on log {log!r} in bank {name!r}")
        return {"bank": name, "log": log, "unpinned": pin}

    @server.tool(description="Delete a context log with its summaries and last frontier.")
    @_tool_errors
    def delete_log(log: str, bank: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
        name = pick(bank, ctx, must_exist=True)
        open_logs.forget(name, log)
        if not memory.store.delete_log(name, log):
            raise NotFoundError(f"no log {log!r} in bank {name!r}")
        return {"bank": name, "log": log, "deleted": True}

    return server
