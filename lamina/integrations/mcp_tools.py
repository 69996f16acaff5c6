"""The MCP server's tools: what each does, its typed and described parameters, its annotations
(read-only, destructive, idempotent), and answers written for the model that reads them.

`Tools` holds what every tool needs (the memory bank, the gate of API keys, the default bank,
the open context logs); `register` puts its methods on an `MCPServer`. Results are compact JSON
(no indentation: every byte is a token of the caller's context); `recall` returns the memories
with their time and document, and their scores, source spans and a ready prompt block only with
`detail`. Errors are one line a model can act on: no CLI flags, no server-side temp paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from functools import wraps
from typing import Annotated, Any, Literal, ParamSpec

import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from ..access import Access, Gate
from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions, RecallResult
from ..context import CompileOptions
from ..context.logs import ContextLogs, check_budget, read_message_list, with_system
from ..context.pins import Pin
from ..context.render import RequestFormat
from ..errors import InputError, LaminaError
from ..messages import Message
from ..readers import read_transcript
from ..store.lookup import missing_bank

__all__ = ["MessageItem", "Tools", "compact_recall", "for_model", "register"]

P = ParamSpec("P")

# -- parameter types ---------------------------------------------------------------------------
Bank = Annotated[
    str | None,
    Field(description="The memory bank; when absent, the server's default bank (list_banks "
          "names it)."),
]  # fmt: skip
Log = Annotated[
    str, Field(description="The context log's id in the bank (created by append_to_log).")
]
Limit = Annotated[
    int, Field(ge=1, le=1000, description="At most this many entries (a page); see `total`.")
]
Offset = Annotated[int, Field(ge=0, description="Entries to skip, for the next page.")]
MessageFormat = Annotated[
    Literal["anthropic", "openai", "claude-code"] | None,
    Field(description="The shape of `messages`; detected when absent."),
]
FileFormat = Annotated[
    Literal["claude-code", "anthropic", "openai", "locomo"] | None,
    Field(description="The format of the file at `path`; detected when absent."),
]
ServerPath = Annotated[
    str | None,
    Field(description="A transcript file on the server's machine (over HTTP only inside the "
          "directories the server allows); or send `messages`."),
]  # fmt: skip
Budget = Annotated[
    int,
    Field(ge=1_000, le=2_000_000,
          description="Tokens the compiled request may take, the reply's reserve included."),
]  # fmt: skip
Reserve = Annotated[int, Field(ge=0, description="Tokens of the budget kept free for the reply.")]
Format = Annotated[
    RequestFormat,
    Field(description="The request to return: 'anthropic' (Messages API) or 'openai' (Chat "
          "Completions)."),
]  # fmt: skip
System = Annotated[
    str | None,
    Field(description="A system prompt sent apart from the messages (a system message among "
          "them does the same); kept with the log."),
]  # fmt: skip


class MessageItem(BaseModel):
    """One message in the Anthropic or OpenAI shape (`role`, `content`, and for OpenAI tool
    calls `tool_calls` / `tool_call_id`); a Claude Code transcript record (`type`, `message`,
    `uuid`) passes as well. An `id` makes a message unique; without one it is identified by its
    content."""

    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant", "system", "tool", "developer"] | None = Field(
        default=None, description="Who said it."
    )
    content: str | list[dict[str, Any]] | None = Field(
        default=None,
        description="The text, or content blocks ({'type': 'text', 'text': ...}, tool_use, "
        "tool_result, ...).",
    )
    id: str | None = Field(default=None, description="A stable id, if the message has one.")


Messages = Annotated[
    list[MessageItem] | None,
    Field(description="Messages in the Anthropic or OpenAI shape (or Claude Code records), "
          "oldest first; or give `path`."),
]  # fmt: skip

# -- annotations -------------------------------------------------------------------------------
READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# -- answers -----------------------------------------------------------------------------------
_FOR_MODEL = [
    (re.compile(r"pass --format|pass format="), "give `format`"),
    (re.compile(r"--budget"), "`budget`"),
]


def for_model(message: str) -> str:
    """An error message as a model calling a tool should read it: parameters named as the tool
    names them, no command-line flags (message lists are read in memory, so no error names a
    temporary file)."""
    for pattern, said in _FOR_MODEL:
        message = pattern.sub(said, message)
    return message


def answer(data: dict[str, Any]) -> CallToolResult:
    """A tool's result: compact JSON for the model, the same data as structured content."""
    text = orjson.dumps(data).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _tool_errors(fn: Callable[P, dict[str, Any]]) -> Callable[P, CallToolResult]:
    """Lamina's errors become MCP tool errors with their one-line message; results `answer`."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return answer(fn(*args, **kwargs))
        except LaminaError as exc:
            raise ToolError(for_model(str(exc))) from None

    return wrapper


def compact_recall(bank: str, result: RecallResult, detail: bool) -> dict[str, Any]:
    """`recall`'s answer: the memories with their time and document, best first; with `detail`
    also scores per channel, source spans, what the search considered and the prompt block."""
    if detail:
        return {"bank": bank, **result.as_dict(), "block": result.block()}
    memories = []
    for hit in result.hits:
        m = hit.memory
        entry: dict[str, Any] = {
            "id": m.id, "time": None, "document": m.document, "text": hit.text
        }  # fmt: skip
        if m.time is not None:
            entry["time"] = m.time.astimezone(UTC).isoformat(timespec="minutes")
        memories.append(entry)
    return {"bank": bank, "memories": memories, "tokens": result.tokens}


@dataclass
class Tools:
    """What the tools share, and the tools themselves (registered by `register`)."""

    memory: MemoryBank
    gate: Gate
    fallback: str
    """The bank used when a call names none."""
    logs: ContextLogs

    # -- who is asking -------------------------------------------------------------------------
    def allowed(self, ctx: Context | None) -> list[str] | None:
        """The banks this caller may use (None: all). HTTP callers show an API key once any
        exists; stdio callers are the local user."""
        headers = ctx.headers if ctx is not None else None
        if headers is None:
            return None
        return self.gate.access(headers.get("authorization")).banks

    def local_path(self, path: str, ctx: Context | None) -> str:
        """A path the caller named: as given over stdio; over HTTP only inside the allowed
        directories (the key is checked first)."""
        if ctx is None or ctx.headers is None:
            return path
        self.allowed(ctx)
        return self.gate.server_path(path)

    def pick(self, name: str | None, ctx: Context | None, *, must_exist: bool = False) -> str:
        chosen = name or self.fallback
        if not Access(self.allowed(ctx)).allows(chosen):
            raise missing_bank(chosen)
        return self.memory.require_bank(chosen) if must_exist else chosen

    def log_messages(
        self,
        log: str,
        messages: list[MessageItem] | None,
        path: str | None,
        format: str | None,
        ctx: Context | None,
    ) -> list[Message]:
        if messages is not None and path is not None:
            raise InputError("give 'messages' or 'path', not both")
        if path is not None:
            return read_transcript(self.local_path(path, ctx), format=format).messages
        values = [m.model_dump(exclude_unset=True) for m in messages or []]
        return read_message_list(values, format, ids_from=log)

    # -- memory --------------------------------------------------------------------------------
    @_tool_errors
    def recall(
        self,
        query: Annotated[
            str, Field(min_length=1, max_length=20_000,
                       description="What to recall: a question, or what the user just said.")
        ],
        bank: Bank = None,
        budget: Annotated[
            int, Field(ge=1, le=200_000,
                       description="Tokens the returned memories may take, together.")
        ] = 1024,
        documents: Annotated[
            list[str] | None, Field(description="Only memories of these documents (ids as "
                                    "list_documents gives them).")
        ] = None,
        agents: Annotated[
            list[str] | None, Field(description="Only memories of sessions of these agents: "
                                    "claude-code, codex, gemini, copilot.")
        ] = None,
        detail: Annotated[
            bool, Field(description="Also return each memory's score per search channel, "
                        "source span and speakers, and a ready <lamina_memories> prompt block.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx, must_exist=True)
        scope = frozenset(documents) if documents else None
        if agents:
            scope = self.memory.agent_documents(name, agents, documents)
        options = RecallOptions(budget=budget, documents=scope)
        return compact_recall(name, self.memory.recall(query, name, options), detail)

    @_tool_errors
    def retain_text(
        self,
        text: Annotated[str, Field(min_length=1, description="What to remember, in a few "
                                   "sentences that stand on their own.")],
        bank: Bank = None,
        document: Annotated[str, Field(min_length=1, description="The document to keep it in "
                                       "(notes by default).")] = "notes",
        speaker: Annotated[str | None, Field(description="Who said or decided it.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx)
        return self.memory.retain_text(text, name, document, speaker=speaker).as_dict()

    @_tool_errors
    def retain_transcript(
        self,
        path: Annotated[str, Field(description="The transcript file, on the server's machine "
                                   "(over HTTP only inside the directories the server allows).")],
        bank: Bank = None,
        document_id: Annotated[str | None, Field(description="The document's id; by default "
                                                 "the session's id or the file's name.")] = None,
        format: FileFormat = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx)
        report = self.memory.retain_file(
            self.local_path(path, ctx), name, document=document_id, format=format
        )
        return report.as_dict()

    @_tool_errors
    def list_banks(self, ctx: Context | None = None) -> dict[str, Any]:
        scope = self.allowed(ctx)
        banks = []
        for item in self.memory.banks():
            if scope is not None and "*" not in scope and item.name not in scope:
                continue
            stats = self.memory.stats(item.name)
            banks.append(
                {"bank": item.name, "documents": stats.documents, "memories": stats.memories}
            )
        return {"default": self.fallback, "banks": banks}

    @_tool_errors
    def list_documents(
        self, bank: Bank = None, limit: Limit = 100, offset: Offset = 0,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx, must_exist=True)
        documents = self.memory.documents(name)
        return {
            "bank": name,
            "documents": [
                {"id": d.id, "source": d.source, "updated_at": d.updated_at.isoformat()}
                for d in documents[offset : offset + limit]
            ],
            "total": len(documents),
            "limit": limit,
            "offset": offset,
        }

    @_tool_errors
    def forget_document(
        self,
        document: Annotated[str, Field(description="The document's id (as list_documents "
                                       "gives it).")],
        bank: Bank = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx, must_exist=True)
        forgotten = self.memory.forget_document(name, self.memory.require_document(name, document))
        return {"bank": name, "document": document, "memories_forgotten": forgotten}

    @_tool_errors
    def correct_memory(
        self,
        memory: Annotated[str, Field(min_length=1, max_length=500,
                                     description="The memory's id (as recall gives it).")],
        mark: Annotated[
            Literal["wrong", "superseded", "unmark"],
            Field(description="'wrong': never recalled again; 'superseded': `replacement` is "
                  "recalled in its place; 'unmark': undo either."),
        ],
        replacement: Annotated[
            str | None, Field(max_length=500, description="With 'superseded': the id of the "
                              "newer memory that replaces it.")
        ] = None,
        note: Annotated[str, Field(max_length=2000, description="Why (kept with the mark).")] = "",
        bank: Bank = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx, must_exist=True)
        if mark == "unmark":
            return {"bank": name, "unmarked": self.memory.unmark(name, memory).as_dict()}
        if mark == "wrong":
            found = self.memory.mark_wrong(name, memory, note)
        else:
            found = self.memory.supersede(name, memory, replacement or "", note)
        return {"bank": name, "mark": found.as_dict()}

    # -- compiling and context logs ------------------------------------------------------------
    @_tool_errors
    def compile_transcript(
        self,
        path: Annotated[str, Field(description="The transcript file to compile, on the "
                                   "server's machine.")],
        budget: Budget = 32_000,
        reserve: Reserve = 4_000,
        request_format: Format = "anthropic",
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        messages = read_transcript(self.local_path(path, ctx)).messages
        options = CompileOptions(budget=budget, reserve=reserve)
        result = self.logs.compile_once(messages, options, request_format)
        return {"request": result.request, "report": result.report}

    @_tool_errors
    def append_to_log(
        self,
        log: Log,
        messages: Messages = None,
        path: ServerPath = None,
        format: MessageFormat = None,
        bank: Bank = None,
        system: System = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = self.pick(bank, ctx)
        new = self.log_messages(log, messages, path, format, ctx)
        if not new:
            raise InputError("give 'messages' (a non-empty list) or 'path'")
        return self.logs.append(name, log, with_system(new, system, log))

    @_tool_errors
    def compile_log(
        self,
        log: Log,
        budget: Annotated[
            int, Field(description="Tokens the compiled request may take, the reply's reserve "
                       "included (at least 1000).")
        ] = 32_000,
        reserve: Reserve = 4_000,
        request_format: Format = "anthropic",
        messages: Messages = None,
        path: ServerPath = None,
        format: MessageFormat = None,
        bank: Bank = None,
        system: System = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        if budget < 1_000:
            raise InputError(f"budget: must be at least 1000 tokens (got {budget})")
        problem = check_budget(budget, reserve)
        if problem is not None:
            raise InputError(f"reserve: {problem}")
        self.allowed(ctx)
        new = self.log_messages(log, messages, path, format, ctx)
        name = self.pick(bank, ctx)
        options = CompileOptions(budget=budget, reserve=reserve)
        result = self.logs.compile(name, log, with_system(new, system, log), options,
                                   request_format)  # fmt: skip
        return {"request": result.request, "report": result.report}

    @_tool_errors
    def list_logs(
        self, bank: Bank = None, limit: Limit = 100, offset: Offset = 0,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx)
        logs, total = self.logs.listing(name, offset, limit)
        return {"bank": name, "logs": logs, "total": total, "limit": limit, "offset": offset}

    @_tool_errors
    def pin_log(
        self,
        log: Log,
        pin: Annotated[str, Field(min_length=1, description="The pin's name (a pin of the "
                                  "same name is replaced).")],
        mode: Annotated[
            Literal["raw", "exact", "max"],
            Field(description="'raw': never folded; 'exact': always as summaries of `level`; "
                  "'max': folded no deeper than `level`."),
        ],
        level: Annotated[int, Field(ge=0, le=64, description="The summary level for 'exact' "
                                    "(at least 1) and 'max'; 0 for 'raw'.")] = 0,
        first: Annotated[int | None, Field(ge=0, description="The first message held (log "
                                           "position from 0); with `last`.")] = None,
        last: Annotated[int | None, Field(ge=0, description="The last message held (included)."
                                          )] = None,
        document: Annotated[str | None, Field(description="Or a document (a file name or "
                                              "path): every message carrying it.")] = None,
        bank: Bank = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        name = self.pick(bank, ctx)
        if (first is None or last is None) == (document is None):
            raise InputError("give 'first' and 'last' (message positions) or 'document'")
        try:
            held = Pin.given(pin, mode, level, first, last, document)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        pins = [p.describe() for p in self.logs.pin(name, log, held)]
        return {"bank": name, "log": log, "pinned": held.describe(), "pins": pins}

    @_tool_errors
    def unpin_log(
        self,
        log: Log,
        pin: Annotated[str, Field(description="The pin's name.")],
        bank: Bank = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        name = self.pick(bank, ctx)
        self.logs.unpin(name, log, pin)
        return {"bank": name, "log": log, "unpinned": pin}

    @_tool_errors
    def delete_log(self, log: Log, bank: Bank = None, ctx: Context | None = None) -> dict[str, Any]:
        name = self.pick(bank, ctx)
        self.logs.delete(name, log)
        return {"bank": name, "log": log, "deleted": True}


TOOLS: dict[str, tuple[ToolAnnotations, str]] = {
    "recall": (READS, "Recall the memories that best answer a question, within a token "
               "budget, best first: each memory's text, when it was said and its document. "
               "Call it before answering something earlier sessions may have settled."),
    "retain_text": (ADDS, "Remember a note, a decision or a user's preference. The same text "
                    "retained twice into the same document is stored once."),
    "retain_transcript": (ADDS, "Remember a transcript file (Claude Code JSONL, Anthropic or "
                          "OpenAI message lists, LoCoMo). Only what is new since the last "
                          "retain of that file is read."),
    "list_banks": (READS, "List the memory banks this caller may use, with their sizes, and "
                   "the default bank."),
    "list_documents": (READS, "List the documents (retained sources) of a bank."),
    "forget_document": (DELETES, "Forget a document: its memories and records are deleted "
                        "for good."),
    "correct_memory": (WRITES, "Correct a memory that turned out wrong: mark it 'wrong' (never "
                       "recalled again) or 'superseded' by a newer memory (recalled in its "
                       "place); 'unmark' undoes it. Memory ids come from recall."),
    "compile_transcript": (READS, "Compile a transcript file into a request that fits a token "
                           "budget: old stretches folded into summaries, every provider rule "
                           "respected. Returns the request and a report of what was folded."),
    "append_to_log": (ADDS, "Append messages (or a transcript file) to a context log kept in a "
                      "bank, created on first use. Messages the log holds already are "
                      "skipped, so sending the whole conversation again adds only what is "
                      "new. Returns how many were added."),
    "compile_log": (WRITES, "Compile a context log kept in a bank into a request that fits a "
                    "token budget, optionally appending messages first. Summaries and the "
                    "layout are kept, so the next compile summarises only what is new and "
                    "keeps the request's prefix. Returns the request and a report."),
    "list_logs": (READS, "List the context logs of a bank: messages, tokens, summaries, last "
                  "update."),
    "pin_log": (ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                idempotent_hint=True, open_world_hint=False),
                "Pin part of a context log so every compile shows it a given way: raw, as "
                "summaries of an exact level, or folded no deeper than a level. A pin of the "
                "same name is replaced; one that conflicts with another pin is refused."),
    "unpin_log": (DELETES, "Remove a pin from a context log, by name."),
    "delete_log": (DELETES, "Delete a context log with its summaries, layout and pins."),
}  # fmt: skip
"""Each tool's annotations and description, in the order `tools/list` gives them."""


def register(server: MCPServer, tools: Tools) -> None:
    """Put every tool of `tools` on `server`."""
    for name, (hints, description) in TOOLS.items():
        server.add_tool(getattr(tools, name), name=name, description=description, annotations=hints)
