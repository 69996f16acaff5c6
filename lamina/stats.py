"""What a transcript holds: the numbers `lamina show` prints, computed in one pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .messages import Kind, Message, Role, ToolUseBlock
from .tokens import TokenCounter, count_message, default_counter
from .turns import DEFAULT_RULES, TurnRules, is_turn_start

__all__ = ["TranscriptStats", "transcript_stats"]

_CONVERSATION_ROLES = (Role.USER, Role.ASSISTANT)


@dataclass
class TranscriptStats:
    records: int = 0
    messages: int = 0
    turns: int = 0
    records_by_type: Counter[str] = field(default_factory=Counter)
    messages_by_kind: Counter[str] = field(default_factory=Counter)
    user_records: int = 0
    tool_result_only_user_records: int = 0
    tokens: int = 0
    """Tokens of the user and assistant messages (what a model would be sent)."""
    first_time: datetime | None = None
    last_time: datetime | None = None
    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    sidechain_messages: int = 0
    compactions: int = 0
    sessions: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "messages": self.messages,
            "turns": self.turns,
            "records_by_type": dict(self.records_by_type.most_common()),
            "messages_by_kind": dict(self.messages_by_kind.most_common()),
            "user_records": self.user_records,
            "tool_result_only_user_records": self.tool_result_only_user_records,
            "tokens": self.tokens,
            "first_time": self.first_time.isoformat() if self.first_time else None,
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "duration_s": (
                (self.last_time - self.first_time).total_seconds()
                if self.first_time and self.last_time
                else None
            ),
            "tool_calls": self.tool_calls,
            "tools": dict(self.tools.most_common()),
            "sidechain_messages": self.sidechain_messages,
            "compactions": self.compactions,
            "sessions": sorted(self.sessions),
        }


def transcript_stats(
    messages: Iterable[Message],
    *,
    rules: TurnRules = DEFAULT_RULES,
    counter: TokenCounter | None = None,
) -> TranscriptStats:
    """Count what a stream of messages holds, without keeping the messages."""
    counter = counter or default_counter()
    stats = TranscriptStats()
    boundaries = summaries = 0
    for message in messages:
        stats.messages += 1
        records = max(1, len(message.records))
        stats.records += records
        stats.records_by_type[message.record_type or message.role.value] += records
        stats.messages_by_kind[message.kind.value] += 1
        if message.timestamp is not None:
            if stats.first_time is None or message.timestamp < stats.first_time:
                stats.first_time = message.timestamp
            if stats.last_time is None or message.timestamp > stats.last_time:
                stats.last_time = message.timestamp
        if message.session_id:
            stats.sessions.add(message.session_id)
        if message.is_sidechain or message.kind is Kind.SIDECHAIN:
            stats.sidechain_messages += 1
        if message.subtype == "compact_boundary":
            boundaries += 1
        elif message.kind is Kind.COMPACT_SUMMARY:
            summaries += 1
        if message.role is Role.USER:
            stats.user_records += 1
            if message.blocks and all(b.type == "tool_result" for b in message.blocks):
                stats.tool_result_only_user_records += 1
        if is_turn_start(message, rules):
            stats.turns += 1
        if message.role in _CONVERSATION_ROLES:
            stats.tokens += count_message(message, counter)
        for block in message.blocks:
            if isinstance(block, ToolUseBlock):
                stats.tool_calls += 1
                stats.tools[block.name] += 1
    # A compaction leaves a boundary record, a summary record, or (usually) both.
    stats.compactions = max(boundaries, summaries)
    return stats
