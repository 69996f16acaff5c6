"""Lamina: memory for LLM agents.

Read transcripts into one message model (`read_transcript`), find their conversational turns
(`iter_turns`, `last_turns`), compose the recall query for the next prompt
(`compose_recall_query`), and format or strip memory blocks (`format_memory_block`,
`strip_tagged_blocks`).
"""

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
