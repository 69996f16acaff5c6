"""Render a frontier as an Anthropic Messages request, valid for the provider.

Raw messages keep their blocks (thinking dropped; a message too large for its place cut with a
marker saying so). A summary shows as a recall pair: a user turn `[CM] Recall memory <id>.` and
an assistant turn holding the summary. Then the provider's rules: every tool call is answered by
its result in the next message and unanswered ones (and orphan results) are dropped, roles
alternate (consecutive same-role messages merge, tool results first), the first message is the
user's, and a recall answer is never merged with the agent's own next turn: a user separator
`[CM] The conversation resumes.` goes between them. Up to 4 cache breakpoints mark stable
points: the end of the head, the end of the last summary, the end of the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)
from ..tokens import count_text
from .frontier import Frontier, Summary
from .log import ContextLog

__all__ = ["RECALL_PROMPT", "SEPARATOR", "render_anthropic"]

RECALL_PROMPT = "[CM] Recall memory {id}."
SEPARATOR = "[CM] The conversation resumes."
OPENING = "[CM] The conversation so far follows."


@dataclass
class _Turn:
    role: str
    content: list[dict[str, Any]]
    recall_answer: bool = False
    mark: bool = False


def _cut(text: str, limit: int) -> str:
    """The text, or its beginning and end with a marker between, within `limit` tokens."""
    tokens = count_text(text)
    if tokens <= limit:
        return text
    chars = max(40, int(len(text) * limit / tokens) - 80)
    while True:
        head, tail = text[: chars * 2 // 3], text[-(chars // 3) :]
        cut = f"{head}\n[… {tokens - limit} tokens cut by Lamina to fit the budget …]\n{tail}"
        if count_text(cut) <= limit or chars <= 40:
            return cut
        chars = int(chars * 0.8)


def _blocks(message: Message, largest: int) -> list[dict[str, Any]]:
    """The message's blocks for the provider; when the message is over `largest` tokens, each
    text and tool result is cut in proportion to its size so the whole stays within it."""
    sizes = {
        id(b): count_text(b.text)
        for b in message.blocks
        if isinstance(b, TextBlock | ToolResultBlock)
    }
    total = sum(sizes.values())

    def allowance(block: TextBlock | ToolResultBlock) -> int:
        if total <= largest:
            return largest
        return max(40, largest * sizes[id(block)] // total)

    out: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ThinkingBlock):
            continue
        if isinstance(block, TextBlock):
            if block.text.strip():
                out.append({"type": "text", "text": _cut(block.text, allowance(block))})
        elif isinstance(block, ToolUseBlock):
            out.append({"type": "tool_use", "id": block.id, "name": block.name,
                        "input": block.input if isinstance(block.input, dict) else {}})  # fmt: skip
        elif isinstance(block, ToolResultBlock):
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block.tool_use_id,
                "content": _cut(block.text, allowance(block)) or "(no output)",
            }
            if block.is_error:
                result["is_error"] = True
            out.append(result)
        elif isinstance(block, ImageBlock) and isinstance(block.source, dict):
            out.append({"type": "image", "source": block.source})
        elif isinstance(block, UnknownBlock) and block.type == "document":
            out.append({"type": "text", "text": "[a document was attached here]"})
    return out


def _pair_tools(turns: list[_Turn]) -> list[_Turn]:
    """Keep a tool call only when the next turn answers it, and a result only when the turn
    before called it."""
    for index, turn in enumerate(turns):
        if turn.role != "assistant":
            continue
        following = turns[index + 1] if index + 1 < len(turns) else None
        answered = {
            b["tool_use_id"]
            for b in (following.content if following and following.role == "user" else [])
            if b.get("type") == "tool_result"
        }
        turn.content = [
            b for b in turn.content if b.get("type") != "tool_use" or b["id"] in answered
        ]
    for index, turn in enumerate(turns):
        if turn.role != "user":
            continue
        previous = turns[index - 1] if index > 0 else None
        called = {
            b["id"]
            for b in (previous.content if previous and previous.role == "assistant" else [])
            if b.get("type") == "tool_use"
        }
        turn.content = [
            b for b in turn.content if b.get("type") != "tool_result" or b["tool_use_id"] in called
        ]
    return [t for t in turns if t.content]


def _merge(turns: Sequence[_Turn]) -> list[_Turn]:
    merged: list[_Turn] = []
    for turn in turns:
        last = merged[-1] if merged else None
        if last is not None and last.role == turn.role:
            if last.recall_answer != turn.recall_answer and turn.role == "assistant":
                merged.append(_Turn("user", [{"type": "text", "text": SEPARATOR}]))
                merged.append(turn)
                continue
            content = last.content + turn.content
            if turn.role == "user":  # tool results must lead a user turn
                content.sort(key=lambda b: b.get("type") != "tool_result")
            last.content = content
            last.recall_answer = last.recall_answer and turn.recall_answer
            last.mark = last.mark or turn.mark
        else:
            merged.append(_Turn(turn.role, list(turn.content), turn.recall_answer, turn.mark))
    return merged


def _resolve(turns: list[_Turn]) -> list[_Turn]:
    """Pair tools, merge same roles, until stable (dropping can make new neighbours)."""
    while True:
        paired = _merge(_pair_tools(turns))
        if [(t.role, len(t.content)) for t in paired] == [(t.role, len(t.content)) for t in turns]:
            return paired
        turns = paired


def render_anthropic(
    log: ContextLog, frontier: Frontier, largest: int, system: str | None = None
) -> dict[str, Any]:
    turns: list[_Turn] = []

    def raw(start: int, end: int, mark_last: bool) -> None:
        for message in log.slice(start, end):
            content = _blocks(message, largest)
            if content:
                role = "user" if message.role is Role.USER else "assistant"
                turns.append(_Turn(role, content))
        if mark_last and turns:
            turns[-1].mark = True

    raw(0, frontier.head_end, mark_last=True)
    last_summary_index = -1
    for item in frontier.items:
        if isinstance(item, Summary):
            prompt = RECALL_PROMPT.format(id=item.id)
            turns.append(_Turn("user", [{"type": "text", "text": prompt}]))
            turns.append(_Turn("assistant", [{"type": "text", "text": item.text}], True))
            last_summary_index = len(turns) - 1
        else:
            raw(item[0], item[1], mark_last=False)
    if last_summary_index >= 0:
        turns[last_summary_index].mark = True
    raw(frontier.tail_start, len(log), mark_last=True)

    resolved = _resolve(turns)
    if resolved and resolved[0].role != "user":
        resolved.insert(0, _Turn("user", [{"type": "text", "text": OPENING}]))
    messages: list[dict[str, Any]] = []
    marks = 0
    for turn in resolved:
        content = [dict(b) for b in turn.content]
        if turn.mark and marks < 3:
            content[-1]["cache_control"] = {"type": "ephemeral"}
            marks += 1
        messages.append({"role": turn.role, "content": content})
    request: dict[str, Any] = {"messages": messages}
    if system:
        request["system"] = [
            {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        ]
    return request
