"""Lamina: memory for LLM agents.

Read transcripts into one message model (`read_transcript`), find their conversational turns
(`iter_turns`, `last_turns`), compose the recall query for the next prompt
(`compose_recall_query`), and format or strip memory blocks (`format_memory_block`,
`strip_tagged_blocks`).

The names are imported on first use (PEP 562), so that `import lamina` -- which every `lamina`
command and hook pays for -- costs next to nothing until one of them is asked for.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .bank.query import QueryOptions, RecallQuery, compose_recall_query, recall_query_for_file
    from .errors import (
        ConfigError,
        InputError,
        LaminaError,
        ReadError,
        ReadWarning,
        StoreError,
        UnknownFormatError,
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
        read_messages,
        read_transcript,
        register_reader,
    )
    from .tags import format_memory_block, inject_memory_block, strip_tagged_blocks
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

_EXPORTS: dict[str, str] = {
    "QueryOptions": ".bank.query",
    "RecallQuery": ".bank.query",
    "compose_recall_query": ".bank.query",
    "recall_query_for_file": ".bank.query",
    "ConfigError": ".errors",
    "InputError": ".errors",
    "LaminaError": ".errors",
    "ReadError": ".errors",
    "ReadWarning": ".errors",
    "StoreError": ".errors",
    "UnknownFormatError": ".errors",
    "Block": ".messages",
    "ImageBlock": ".messages",
    "Kind": ".messages",
    "Message": ".messages",
    "Role": ".messages",
    "Source": ".messages",
    "TextBlock": ".messages",
    "ThinkingBlock": ".messages",
    "ToolResultBlock": ".messages",
    "ToolUseBlock": ".messages",
    "UnknownBlock": ".messages",
    "Reader": ".readers",
    "Transcript": ".readers",
    "detect_format": ".readers",
    "read_messages": ".readers",
    "read_transcript": ".readers",
    "register_reader": ".readers",
    "format_memory_block": ".tags",
    "inject_memory_block": ".tags",
    "strip_tagged_blocks": ".tags",
    "count_message": ".tokens",
    "count_text": ".tokens",
    "ChannelTool": ".turns",
    "Turn": ".turns",
    "TurnRules": ".turns",
    "conversational_text": ".turns",
    "is_turn_start": ".turns",
    "iter_turns": ".turns",
    "last_turns": ".turns",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__version__ = "0.1.0"

__all__ = [
    "Block",
    "ChannelTool",
    "ConfigError",
    "ImageBlock",
    "InputError",
    "Kind",
    "LaminaError",
    "Message",
    "QueryOptions",
    "ReadError",
    "ReadWarning",
    "Reader",
    "RecallQuery",
    "Role",
    "Source",
    "StoreError",
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
    "read_messages",
    "read_transcript",
    "recall_query_for_file",
    "register_reader",
    "strip_tagged_blocks",
]
