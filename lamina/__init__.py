"""Lamina: memory for LLM agents.

    import lamina

    with lamina.open() as store:                     # the data directory's SQLite database
        bank = store.bank("notes")
        bank.retain_text("We chose SQLite for the embedded default.", document="decisions")
        for hit in bank.recall("which database?", budget=500):
            print(hit.score, hit.text)                 # relevance 0..1, best first

The full API, for everything else:

    bank = lamina.MemoryBank.open()                    # the data directory's SQLite database
    transcript = lamina.read_message_list(messages)    # an OpenAI or Anthropic message list
    bank.retain_messages(transcript.messages, "my-project", "session-1")
    result = bank.recall("which database did we pick?", "my-project")
    print(result.block())                              # a <lamina_memories> block for a prompt

    log = lamina.ContextLog.from_messages(transcript.messages)
    compiled = lamina.Compiler(lamina.ExtractiveSummariser()).compile(
        log, lamina.CompileOptions(budget=32_000)
    )
    compiled.request                                   # fits the budget, old turns folded

What is here, by stage:

- reading: `read_transcript` (a file), `read_message_list` (a list in memory), `read_messages`,
  `detect_format`, `register_reader`, `Reader`, `Transcript`, and the message model (`Message`,
  `Role`, `Kind`, the blocks);
- turns and recall queries: `iter_turns`, `last_turns`, `conversational_text`,
  `compose_recall_query`; memory blocks: `format_memory_block`, `strip_tagged_blocks`;
- the short API: `open` gives a `MemoryStore`, whose `bank(name)` is a `BankHandle`;
- memory banks: `MemoryBank` with `RetainOptions`/`RetainReport`, `RecallOptions`/`RecallResult`/
  `RecallHit`, and the records it returns (`Bank`, `BankStats`, `Document`, `Memory`);
- the context compiler: `Compiler`, `CompileOptions`, `CompileResult`, `ContextLog`, `StoredLog`,
  `Pin`, `Summariser` (a protocol) and the offline `ExtractiveSummariser`; `Embedder` (a protocol);
- errors: `LaminaError` is the root of all of them (see `lamina.errors` for the tree).

The names are imported on first use (PEP 562), so that `import lamina` -- which every `lamina`
command and hook pays for -- costs next to nothing until one of them is asked for.
"""

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs every hook ~5 ms
if TYPE_CHECKING:
    from .bank.bank import MemoryBank
    from .bank.query import (
        QueryOptions,
        RecallQuery,
        compose_recall_query,
        recall_query_for_file,
    )
    from .bank.recall import (
        RecallHit,
        RecallOptions,
        RecallResult,
    )
    from .bank.retain import RetainOptions, RetainReport
    from .context.compile import Compiler, CompileResult
    from .context.frontier import CompileOptions, OverBudgetError
    from .context.log import ContextLog
    from .context.pins import Pin
    from .context.stored import StoredLog
    from .context.summarise import ExtractiveSummariser, Summariser
    from .embed import Embedder
    from .errors import (
        AccessError,
        ConfigError,
        InputError,
        LaminaError,
        NotFoundError,
        ReadError,
        ReadWarning,
        StoreError,
        UnknownFormatError,
    )
    from .memories import (
        Bank,
        BankStats,
        Document,
        Memory,
    )
    from .messages import (
        Block,
        ImageBlock,
        Kind,
        Message,
        Role,
        Source,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
        UnknownBlock,
    )
    from .readers import (
        Reader,
        Transcript,
        detect_format,
        read_message_list,
        read_messages,
        read_transcript,
        register_reader,
    )
    from .simple import BankHandle, MemoryStore, open
    from .tags import (
        format_memory_block,
        inject_memory_block,
        strip_tagged_blocks,
    )
    from .tokens import count_message, count_text
    from .turns import (
        ChannelTool,
        Turn,
        TurnRules,
        conversational_text,
        is_turn_start,
        iter_turns,
        last_turns,
    )

del TYPE_CHECKING

_MODULES: dict[str, str] = {
    ".bank.bank": "MemoryBank",
    ".memories": "Bank BankStats Document Memory",
    ".bank.query": "QueryOptions RecallQuery compose_recall_query recall_query_for_file",
    ".bank.recall": "RecallHit RecallOptions RecallResult",
    ".bank.retain": "RetainOptions RetainReport",
    ".context.compile": "CompileResult Compiler",
    ".context.frontier": "CompileOptions OverBudgetError",
    ".context.log": "ContextLog",
    ".context.pins": "Pin",
    ".context.stored": "StoredLog",
    ".context.summarise": "ExtractiveSummariser Summariser",
    ".embed": "Embedder",
    ".errors": (
        "AccessError ConfigError InputError LaminaError NotFoundError ReadError ReadWarning "
        "StoreError UnknownFormatError"
    ),
    ".messages": (
        "Block ImageBlock Kind Message Role Source TextBlock ThinkingBlock ToolResultBlock "
        "ToolUseBlock UnknownBlock"
    ),
    ".simple": "BankHandle MemoryStore open",
    ".readers": (
        "Reader Transcript detect_format read_message_list read_messages read_transcript "
        "register_reader"
    ),
    ".tags": "format_memory_block inject_memory_block strip_tagged_blocks",
    ".tokens": "count_message count_text",
    ".turns": "ChannelTool Turn TurnRules conversational_text is_turn_start iter_turns last_turns",
}
"""Each module of the public API -> the names it defines (as imported above)."""

_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__version__ = "0.1.0"

__all__ = [
    "AccessError",
    "Bank",
    "BankHandle",
    "BankStats",
    "Block",
    "ChannelTool",
    "CompileOptions",
    "CompileResult",
    "Compiler",
    "ConfigError",
    "ContextLog",
    "Document",
    "Embedder",
    "ExtractiveSummariser",
    "ImageBlock",
    "InputError",
    "Kind",
    "LaminaError",
    "Memory",
    "MemoryBank",
    "MemoryStore",
    "Message",
    "NotFoundError",
    "OverBudgetError",
    "Pin",
    "QueryOptions",
    "ReadError",
    "ReadWarning",
    "Reader",
    "RecallHit",
    "RecallOptions",
    "RecallQuery",
    "RecallResult",
    "RetainOptions",
    "RetainReport",
    "Role",
    "Source",
    "StoreError",
    "StoredLog",
    "Summariser",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "Turn",
    "TurnRules",
    "UnknownBlock",
    "UnknownFormatError",
    "__version__",
    "compose_recall_query",
    "conversational_text",
    "count_message",
    "count_text",
    "detect_format",
    "format_memory_block",
    "inject_memory_block",
    "is_turn_start",
    "iter_turns",
    "last_turns",
    "open",
    "read_message_list",
    "read_messages",
    "read_transcript",
    "recall_query_for_file",
    "register_reader",
    "strip_tagged_blocks",
]
