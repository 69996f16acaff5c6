"""The context log: the append-only message list of one live conversation.

Which records of a source transcript enter the log (one rule): the messages the model was
shown, that is user and assistant messages, including the host's meta records and compaction
summaries, and excluding subagents' sidechain messages, progress, snapshots, queue operations,
titles, system notices and unknown records. Thinking blocks stay in the log (they are part of
the record) and are dropped when a request is rendered.

The system prompt (an OpenAI `system` or `developer` message, an Anthropic `system` field: kind
INSTRUCTIONS) is not a log position; the log keeps its text beside the messages (`system`), and
every compile sends it where the provider expects it, counted in the budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass, field, replace

from ..messages import (
    Block,
    ImageBlock,
    Kind,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)
from ..tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    count_message,
    count_text,
    default_counter,
)
from .paged import PagedMessages

__all__ = [
    "COUNTING_VERSION",
    "SYSTEM_JOIN",
    "ContextLog",
    "MessageCounts",
    "counts_key",
    "enters_log",
    "is_system_prompt",
    "shown_tokens",
    "system_text",
    "uncut_tokens",
]

COUNTING_VERSION = 1
"""Bumped whenever `count_message`, `shown_tokens` or `uncut_tokens` change what they count, so
counts kept beside a stored log are taken again."""

MessageCounts = tuple[int, int, int]
"""A message's `(tokens, shown, uncut)`."""

PLACEHOLDER_TOKENS = 10
"""What a one-line placeholder costs (a document attached to a message is shown as one)."""

_LEFT_OUT = frozenset(
    {
        Kind.SIDECHAIN,
        Kind.PROGRESS,
        Kind.SNAPSHOT,
        Kind.QUEUE,
        Kind.TITLE,
        Kind.SYSTEM_NOTICE,
        Kind.UNKNOWN,
        Kind.INSTRUCTIONS,
    }
)


SYSTEM_JOIN = "\n\n"
"""Between the texts of several system messages, joined into one system prompt."""


def is_system_prompt(message: Message) -> bool:
    """Whether a message is (part of) the system prompt rather than a turn of the log."""
    return message.role is Role.SYSTEM and message.kind is Kind.INSTRUCTIONS


def system_text(messages: Iterable[Message]) -> str:
    """The system prompt the messages give: the text of each system message, in order, the
    same text once."""
    texts: list[str] = []
    for message in messages:
        text = message.text.strip()
        if is_system_prompt(message) and text and text not in texts:
            texts.append(text)
    return SYSTEM_JOIN.join(texts)


def counts_key(counter: TokenCounter) -> str:
    """What a message's counts depend on: the tokenizer and the counting rules' version."""
    return f"{counter.name}/{COUNTING_VERSION}"


def enters_log(message: Message) -> bool:
    """The log rule (see the module docstring)."""
    return message.role in (Role.USER, Role.ASSISTANT) and message.kind not in _LEFT_OUT


def shown_tokens(message: Message, tokens: int, counter: TokenCounter) -> int:
    """What a message of `tokens` (its `count_message`) costs in a rendered request: less its
    thinking, blocks Lamina does not interpret (a document stays as a placeholder), images
    that are not sendable, and the non-text parts of tool results. Only those rare blocks are
    counted again."""
    for block in message.blocks:
        if isinstance(block, TextBlock):
            continue
        if isinstance(block, ThinkingBlock):
            tokens -= counter.count(block.thinking)
        elif isinstance(block, UnknownBlock):
            tokens -= _block_tokens(message, block, counter)
            tokens += PLACEHOLDER_TOKENS if block.type == "document" else 0
        elif isinstance(block, ImageBlock) and not isinstance(block.source, dict):
            tokens -= _block_tokens(message, block, counter)
        elif isinstance(block, ToolResultBlock) and not all(
            isinstance(b, TextBlock) for b in block.content
        ):
            tokens -= _block_tokens(message, block, counter)
            tokens += 4 + counter.count(block.text)
    return max(MESSAGE_OVERHEAD, tokens)


def uncut_tokens(message: Message, counter: TokenCounter) -> int:
    """The part of a message's shown tokens that stays whole when a large message is cut to fit
    its place: its framing and tool calls (only text and tool results are cut)."""
    calls = [b for b in message.blocks if isinstance(b, ToolUseBlock)]
    return MESSAGE_OVERHEAD + sum(_block_tokens(message, b, counter) for b in calls)


def _block_tokens(message: Message, block: Block, counter: TokenCounter) -> int:
    one = replace(message, blocks=(block,))
    return count_message(one, counter) - MESSAGE_OVERHEAD


@dataclass
class ContextLog:
    """Messages in order, with their token counts; only ever appended to. Messages are held
    without their source records (`Message.records`, `tool_use_result`), which no request
    shows; a store keeps them whole."""

    counter: TokenCounter = field(default_factory=default_counter)
    messages: MutableSequence[Message] = field(default_factory=list)
    """A list, or a stored log's `PagedMessages` (read from the store when first asked for)."""
    tokens: list[int] = field(default_factory=list)
    """What each message costs as recorded (`count_message`)."""
    shown: list[int] = field(default_factory=list)
    """What each message costs in a rendered request (`shown_tokens`: thinking and the like are
    left out). The frontier plans with these."""
    uncut: list[int] = field(default_factory=list)
    """The part of `shown` a cut leaves whole (`uncut_tokens`)."""
    system: str = ""
    """The system prompt ("" when none was given): not a log position, sent by every compile."""

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Message],
        counter: TokenCounter | None = None,
        counts: Sequence[MessageCounts] = (),
    ) -> ContextLog:
        """`counts`: the counts of the first messages, known from before (`counts_key` must
        match), so they are not counted again."""
        log = cls(counter or default_counter())
        for index, message in enumerate(messages):
            log.append(message, counts[index] if index < len(counts) else None)
        return log

    @property
    def counts_key(self) -> str:
        return counts_key(self.counter)

    def counts(self, start: int = 0) -> list[MessageCounts]:
        """`(tokens, shown, uncut)` of each message from `start` on, to keep beside it."""
        return list(zip(self.tokens[start:], self.shown[start:], self.uncut[start:], strict=True))

    def append(self, message: Message, counts: MessageCounts | None = None) -> bool:
        """Add a message if it enters the log; returns whether it did. A system message adds
        its text to the system prompt instead (see `system_text`). `counts`: its counts as
        known from before (see `from_messages`)."""
        if is_system_prompt(message):
            text = message.text.strip()
            joined = f"{SYSTEM_JOIN}{self.system}{SYSTEM_JOIN}"
            if text and f"{SYSTEM_JOIN}{text}{SYSTEM_JOIN}" not in joined:  # the same text once
                self.system = f"{self.system}{SYSTEM_JOIN}{text}" if self.system else text
            return False
        if not enters_log(message):
            return False
        if counts is not None:
            tokens, shown, uncut = counts
        else:
            tokens = count_message(message, self.counter)
            shown = shown_tokens(message, tokens, self.counter)
            uncut = uncut_tokens(message, self.counter)
        if message.records or message.tool_use_result is not None:
            # The source records and the host's structured tool result are kept where the
            # message is stored; a request never shows them, and they are often most of it.
            message = replace(message, records=(), tool_use_result=None)
        self.messages.append(message)
        self.tokens.append(tokens)
        self.shown.append(shown)
        self.uncut.append(uncut)
        return True

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.append(message)

    def snapshot(self) -> ContextLog:
        """A copy that later appends to this log leave as it is (for a background reader)."""
        return ContextLog(
            self.counter,
            self.messages.copy() if isinstance(self.messages, PagedMessages) else [*self.messages],
            self.tokens[:],
            self.shown[:],
            self.uncut[:],
            self.system,
        )

    @property
    def system_tokens(self) -> int:
        """What the system prompt costs in a request (0 with none)."""
        if not self.system:
            return 0
        counter = None if self.counter is default_counter() else self.counter
        return count_text(self.system, counter) + MESSAGE_OVERHEAD

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def span_tokens(self, start: int, end: int) -> int:
        return sum(self.tokens[start:end])

    def slice(self, start: int, end: int) -> Sequence[Message]:
        return self.messages[start:end]
