"""The context log: the append-only message list of one live conversation.

Which records of a source transcript enter the log (one rule): the messages the model was
shown, that is user and assistant messages, including the host's meta records and compaction
summaries, and excluding subagents' sidechain messages, progress, snapshots, queue operations,
titles, system notices and unknown records. Thinking blocks stay in the log (they are part of
the record) and are dropped when a request is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..messages import Kind, Message, Role
from ..tokens import TokenCounter, count_message, default_counter

__all__ = ["ContextLog", "enters_log"]

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


def enters_log(message: Message) -> bool:
    """The log rule (see the module docstring)."""
    return message.role in (Role.USER, Role.ASSISTANT) and message.kind not in _LEFT_OUT


@dataclass
class ContextLog:
    """Messages in order, with their token counts; only ever appended to."""

    counter: TokenCounter = field(default_factory=default_counter)
    messages: list[Message] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    @classmethod
    def from_messages(
        cls, messages: Iterable[Message], counter: TokenCounter | None = None
    ) -> ContextLog:
        log = cls(counter or default_counter())
        log.extend(messages)
        return log

    def append(self, message: Message) -> bool:
        """Add a message if it enters the log; returns whether it did."""
        if not enters_log(message):
            return False
        self.messages.append(message)
        self.tokens.append(count_message(message, self.counter))
        return True

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.append(message)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def span_tokens(self, start: int, end: int) -> int:
        return sum(self.tokens[start:end])

    def slice(self, start: int, end: int) -> Sequence[Message]:
        return self.messages[start:end]
