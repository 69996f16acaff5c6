"""What counts as conversation, and where turns begin. The one definition every caller uses.

**Conversational text** of a message: its text blocks, plus the outgoing text of channel-reply
tools (tools through which the agent answers on a chat channel), with tool calls, tool results and
thinking left out, transport envelopes (`<channel ...>`) unwrapped, injected blocks (memory blocks,
system reminders) removed, and whitespace trimmed. A host's slash-command wrapper contributes the
command and its arguments when it has arguments ("/deploy staging"), nothing when it is bare.

**A turn** starts at a user-role message whose conversational text is non-empty, unless the
reader marked the message synthetic (`SYNTHETIC_KINDS`: the host's meta records, compaction
summaries, interruption markers, task notifications, sidechain messages, ...). So a record with
only tool results, only whitespace or only an injected memory block starts no turn; a record with a
tool result *and* real text does. A turn runs to the next turn start.

Recall-query composition, retention windows and chunking all call these functions; nothing else
in Lamina decides what a turn is.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .messages import (
    SYNTHETIC_KINDS,
    Kind,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .tags import DEFAULT_ENVELOPE_TAGS, DEFAULT_STRIP_TAGS, strip_tagged_blocks, unwrap_envelopes

__all__ = [
    "DEFAULT_RULES",
    "ChannelTool",
    "Turn",
    "TurnRules",
    "classify",
    "clean_text",
    "conversational_text",
    "is_turn_start",
    "iter_turns",
    "last_turns",
    "turn_starts",
]


@dataclass(frozen=True, slots=True)
class ChannelTool:
    """Tools whose calls carry the agent's words to a person (a Telegram or Slack reply, say).

    `name` is a shell-style pattern matched against the tool name; `fields` are the input keys
    that hold the outgoing text, tried in order.
    """

    name: str
    fields: tuple[str, ...] = ("text", "message", "content")

    def matches(self, tool_name: str) -> bool:
        return fnmatch.fnmatchcase(tool_name, self.name)


DEFAULT_CHANNEL_TOOLS: tuple[ChannelTool, ...] = (
    ChannelTool("mcp__*telegram*__reply"),
    ChannelTool("mcp__*telegram*__send_message"),
    ChannelTool("mcp__*slack*__reply"),
    ChannelTool("mcp__*slack*__send_message"),
    ChannelTool("mcp__*slack*__post_message"),
    ChannelTool("mcp__*discord*__reply"),
    ChannelTool("mcp__*discord*__send_message"),
)


@dataclass(frozen=True, slots=True)
class TurnRules:
    """The configurable parts of the turn definition."""

    channel_tools: tuple[ChannelTool, ...] = DEFAULT_CHANNEL_TOOLS
    strip_tags: tuple[str, ...] = DEFAULT_STRIP_TAGS
    envelope_tags: tuple[str, ...] = DEFAULT_ENVELOPE_TAGS
    _cache: dict[str, ChannelTool | None] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def channel_tool(self, tool_name: str) -> ChannelTool | None:
        if tool_name not in self._cache:
            self._cache[tool_name] = next(
                (t for t in self.channel_tools if t.matches(tool_name)), None
            )
        return self._cache[tool_name]


DEFAULT_RULES = TurnRules()

_COMMAND = re.compile(r"<command-(name|message|args)>(.*?)</command-\1>", re.DOTALL | re.IGNORECASE)


def _unwrap_command(text: str) -> str:
    """`<command-name>/x</command-name>...<command-args>a b</command-args>` -> "/x a b"."""
    if "<command-" not in text:
        return text
    parts = {m.group(1).lower(): m.group(2).strip() for m in _COMMAND.finditer(text)}
    rest = _COMMAND.sub("", text).strip()
    args = parts.get("args", "")
    if not args:
        return rest
    name = parts.get("name") or parts.get("message", "")
    return f"{name} {args}".strip() + (f"\n{rest}" if rest else "")


def clean_text(text: str, rules: TurnRules = DEFAULT_RULES) -> str:
    """Conversational text of a bare string: injected blocks removed, envelopes and command
    wrappers unwrapped, whitespace trimmed (what `conversational_text` does to each block)."""
    if "<" in text:
        text = strip_tagged_blocks(text, rules.strip_tags)
        text = unwrap_envelopes(text, rules.envelope_tags)
        text = _unwrap_command(text)
    return text.strip()


def _channel_text(block: ToolUseBlock, rules: TurnRules) -> str:
    tool = rules.channel_tool(block.name) if rules.channel_tools else None
    if tool is None or not isinstance(block.input, Mapping):
        return ""
    for key in tool.fields:
        value = block.input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def conversational_text(message: Message, rules: TurnRules = DEFAULT_RULES) -> str:
    """The words a person or the agent actually said in this message ("" when none)."""
    parts: list[str] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            cleaned = clean_text(block.text, rules)
        elif isinstance(block, ToolUseBlock):
            cleaned = clean_text(_channel_text(block, rules), rules)
        else:
            continue
        if cleaned:
            parts.append(cleaned)
    return "\n\n".join(parts)


def is_turn_start(message: Message, rules: TurnRules = DEFAULT_RULES) -> bool:
    """True when this message begins a conversational turn (see the module docstring)."""
    if message.role is not Role.USER or message.kind in SYNTHETIC_KINDS:
        return False
    return bool(conversational_text(message, rules))


def classify(message: Message, rules: TurnRules = DEFAULT_RULES) -> Kind:
    """The conversational kind of an ordinary user or assistant message."""
    if conversational_text(message, rules):
        return Kind.PROMPT if message.role is Role.USER else Kind.REPLY
    if any(isinstance(b, ToolUseBlock | ToolResultBlock) for b in message.blocks):
        return Kind.TOOL_ACTIVITY
    if message.role is Role.ASSISTANT and message.blocks:
        return Kind.TOOL_ACTIVITY  # thinking only, or blocks of unknown types
    return Kind.META  # an empty, whitespace-only or memory-only user record


@dataclass(frozen=True, slots=True)
class Turn:
    """One conversational turn: `messages[start:end]` of the sequence it was found in."""

    index: int
    start: int
    end: int
    message: Message
    text: str


def turn_starts(messages: Sequence[Message], rules: TurnRules = DEFAULT_RULES) -> list[int]:
    """Positions of the turn-starting messages, in order."""
    return [i for i, m in enumerate(messages) if is_turn_start(m, rules)]


def iter_turns(messages: Sequence[Message], rules: TurnRules = DEFAULT_RULES) -> Iterator[Turn]:
    """The turns in order. Messages before the first turn start belong to no turn."""
    starts = turn_starts(messages, rules)
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(messages)
        message = messages[start]
        yield Turn(number, start, end, message, conversational_text(message, rules))


def last_turn_start(
    messages: Sequence[Message], n: int, rules: TurnRules = DEFAULT_RULES
) -> int | None:
    """Position of the nth turn start counted from the end (n >= 1), walking backwards only as
    far as needed; the earliest turn start if there are fewer than n; None if there is none."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    found: int | None = None
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if is_turn_start(messages[i], rules):
            found = i
            seen += 1
            if seen == n:
                break
    return found


def last_turns(
    messages: Sequence[Message], n: int, rules: TurnRules = DEFAULT_RULES
) -> list[Message]:
    """The records from the nth turn start from the end through the last record, untouched:
    tool activity between the turns included. Fewer than n turns: from the first turn start.
    No turn at all, or n == 0: an empty list."""
    if n == 0:
        return []
    start = last_turn_start(messages, n, rules)
    return [] if start is None else list(messages[start:])
