"""Render a frontier as a request valid for the provider: Anthropic Messages or OpenAI Chat
Completions.

One walk builds provider-neutral turns; each renderer only spells them out. Raw messages keep
their blocks (thinking dropped; a message too large for its place cut with a marker saying so).
A summary shows as a recall pair: a user turn `[CM] Recall memory <id>.` and an assistant turn
holding the summary. Then the providers' shared rules: every tool call is answered by its result
in the next turn and unanswered ones (and orphan results) are dropped, roles alternate
(consecutive same-role turns merge, tool results first), the first turn is the user's, and a
recall answer is never merged with the agent's own next turn: a user separator
`[CM] The conversation resumes.` goes between them.

Anthropic: up to 4 cache breakpoints mark stable points: the end of the head, the end of the
last summary, the end of the request. OpenAI: the system prompt as a leading `system` message,
text as strings, tool calls as `tool_calls` with JSON `arguments`, and each tool result as its
own `tool` message right after the assistant message that called it, in call order. OpenAI
caches prefixes by itself, so there are no breakpoints; the prefix is as stable as Anthropic's,
because both come from the same turns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import orjson

from ..errors import InputError
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
from ..tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, count_text
from .forest import Summary
from .frontier import Frontier
from .log import ContextLog

__all__ = [
    "RECALL_PROMPT",
    "REQUEST_FORMATS",
    "SEPARATOR",
    "RequestFormat",
    "Turn",
    "message_blocks",
    "render",
    "render_anthropic",
    "render_openai",
    "request_tokens",
    "resolve_turns",
]

RECALL_PROMPT = "[CM] Recall memory {id}."
SEPARATOR = "[CM] The conversation resumes."
OPENING = "[CM] The conversation so far follows."
IMAGE_PLACEHOLDER = "[an image was shown here]"

RequestFormat = Literal["anthropic", "openai"]
REQUEST_FORMATS: tuple[RequestFormat, ...] = get_args(RequestFormat)


@dataclass
class Turn:
    """One request message being built: its role and content blocks; a recall pair's answer
    and a cache mark are flagged so merging and rendering keep them apart."""

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


def message_blocks(message: Message, largest: int) -> list[dict[str, Any]]:
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


def _pair_tools(turns: list[Turn]) -> list[Turn]:
    """Keep a tool call only when the user turns right after it answer it, and a result only
    when the assistant turns right before it called it. Consecutive turns of one role count
    together (they merge into one): the results of parallel calls often come back one record
    each."""
    runs: list[list[Turn]] = []
    for turn in turns:
        if runs and runs[-1][0].role == turn.role:
            runs[-1].append(turn)
        else:
            runs.append([turn])

    def ids(run: list[Turn], kind: str, key: str) -> set[str]:
        return {b[key] for t in run for b in t.content if b.get("type") == kind}

    for index, run in enumerate(runs):
        if run[0].role == "assistant":
            following = runs[index + 1] if index + 1 < len(runs) else []
            answered = ids(following, "tool_result", "tool_use_id")
            for turn in run:
                turn.content = [
                    b for b in turn.content if b.get("type") != "tool_use" or b["id"] in answered
                ]
    for index, run in enumerate(runs):
        if run[0].role == "user":
            called = ids(runs[index - 1], "tool_use", "id") if index else set()
            for turn in run:
                turn.content = [
                    b
                    for b in turn.content
                    if b.get("type") != "tool_result" or b["tool_use_id"] in called
                ]
    return [t for t in turns if t.content]


def _merge(turns: Sequence[Turn]) -> list[Turn]:
    merged: list[Turn] = []
    for turn in turns:
        last = merged[-1] if merged else None
        if last is not None and last.role == turn.role:
            if last.recall_answer != turn.recall_answer and turn.role == "assistant":
                merged.append(Turn("user", [{"type": "text", "text": SEPARATOR}]))
                merged.append(turn)
                continue
            content = last.content + turn.content
            if turn.role == "user":  # tool results must lead a user turn
                content.sort(key=lambda b: b.get("type") != "tool_result")
            last.content = content
            last.recall_answer = last.recall_answer and turn.recall_answer
            last.mark = last.mark or turn.mark
        else:
            merged.append(Turn(turn.role, list(turn.content), turn.recall_answer, turn.mark))
    return merged


def resolve_turns(turns: list[Turn]) -> list[Turn]:
    """Pair tools, merge same roles, until stable (dropping can make new neighbours)."""
    while True:
        paired = _merge(_pair_tools(turns))
        if [(t.role, len(t.content)) for t in paired] == [(t.role, len(t.content)) for t in turns]:
            return paired
        turns = paired


def _turns(log: ContextLog, frontier: Frontier, largest: int) -> list[Turn]:
    """The frontier as turns every provider accepts: tools paired, roles alternating, the
    user's first, cache marks on the stable points."""
    turns: list[Turn] = []

    def raw(start: int, end: int, mark_last: bool) -> None:
        for message in log.slice(start, end):
            content = message_blocks(message, largest)
            if content:
                role = "user" if message.role is Role.USER else "assistant"
                turns.append(Turn(role, content))
        if mark_last and turns:
            turns[-1].mark = True

    raw(0, frontier.head_end, mark_last=True)
    last_summary_index = -1
    for item in frontier.items:
        if isinstance(item, Summary):
            prompt = RECALL_PROMPT.format(id=item.id)
            turns.append(Turn("user", [{"type": "text", "text": prompt}]))
            turns.append(Turn("assistant", [{"type": "text", "text": item.text}], True))
            last_summary_index = len(turns) - 1
        else:
            raw(item[0], item[1], mark_last=False)
    if last_summary_index >= 0:
        turns[last_summary_index].mark = True
    raw(frontier.tail_start, len(log), mark_last=True)

    resolved = resolve_turns(turns)
    if resolved and resolved[0].role != "user":
        resolved.insert(0, Turn("user", [{"type": "text", "text": OPENING}]))
    return resolved


def render_anthropic(
    log: ContextLog, frontier: Frontier, largest: int, system: str | None = None
) -> dict[str, Any]:
    """The frontier as an Anthropic Messages request (`system`, `messages`)."""
    messages: list[dict[str, Any]] = []
    marks = 0
    for turn in _turns(log, frontier, largest):
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


def render_openai(
    log: ContextLog, frontier: Frontier, largest: int, system: str | None = None
) -> dict[str, Any]:
    """The frontier as an OpenAI Chat Completions request (`messages`; the caller adds `model`)."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    calls: list[str] = []  # the tool call ids of the last assistant turn, in call order
    for turn in _turns(log, frontier, largest):
        if turn.role == "assistant":
            message, calls = _openai_assistant(turn.content)
            messages.append(message)
            continue
        results: dict[str, dict[str, Any]] = {}
        for block in turn.content:
            if block.get("type") == "tool_result":
                results.setdefault(block["tool_use_id"], block)
        for call in calls:  # pairing left exactly the called ones, so each call is answered
            result = results[call]
            text = f"[error] {result['content']}" if result.get("is_error") else result["content"]
            messages.append({"role": "tool", "tool_call_id": call, "content": text})
        calls = []
        content = _openai_user_content(turn.content)
        if content:
            messages.append({"role": "user", "content": content})
    return {"messages": messages}


def _openai_assistant(content: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """An assistant turn as one OpenAI message, and its tool call ids in order."""
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "image":
            texts.append(IMAGE_PLACEHOLDER)
        elif kind == "tool_use" and all(c["id"] != block["id"] for c in tool_calls):
            function = {"name": block["name"], "arguments": orjson.dumps(block["input"]).decode()}
            tool_calls.append({"id": block["id"], "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message, [c["id"] for c in tool_calls]


def _openai_user_content(content: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user turn's text (tool results aside) as a string, or as parts when it holds images."""
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            url = _image_url(block["source"])
            parts.append(
                {"type": "image_url", "image_url": {"url": url}}
                if url
                else {"type": "text", "text": IMAGE_PLACEHOLDER}
            )
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


def _image_url(source: dict[str, Any]) -> str | None:
    """An image source (Anthropic's, or an OpenAI `image_url` part as read) as a URL."""
    if source.get("type") == "base64" and source.get("data"):
        return f"data:{source.get('media_type') or 'image/png'};base64,{source['data']}"
    if source.get("type") == "url" and source.get("url"):
        return str(source["url"])
    image = source.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    return url if isinstance(url, str) and url else None


_RENDERERS: dict[str, Callable[[ContextLog, Frontier, int, str | None], dict[str, Any]]] = {
    "anthropic": render_anthropic,
    "openai": render_openai,
}


def render(
    request_format: str,
    log: ContextLog,
    frontier: Frontier,
    largest: int,
    system: str | None = None,
) -> dict[str, Any]:
    """The frontier as a request in `request_format` (one of `REQUEST_FORMATS`)."""
    renderer = _RENDERERS.get(request_format)
    if renderer is None:
        raise InputError(
            f"unknown request format {request_format!r} (use {' or '.join(REQUEST_FORMATS)})"
        )
    return renderer(log, frontier, largest, system)


def request_tokens(request: dict[str, Any]) -> int:
    """Tokens of a rendered request, Anthropic or OpenAI: its text, tool calls and results,
    per-message framing. The same conversation counts the same in both, bar the framing of
    OpenAI's separate `system` and `tool` messages."""
    system = request.get("system") or []
    total = count_text(system) if isinstance(system, str) else 0
    for block in system if isinstance(system, list) else []:
        total += count_text(str(block.get("text", "")))
    for message in request["messages"]:
        total += MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            total += count_text(content)
        else:
            total += sum(_block_tokens(block) for block in content or [])
        for call in message.get("tool_calls") or []:  # OpenAI
            function = call.get("function") or {}
            total += (
                count_text(str(function.get("name", "")))
                + count_text(str(function.get("arguments", "")))
                + 8
            )
        if message.get("role") == "tool":
            total += 4
    return total


def _block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return count_text(block["text"])
    if kind == "tool_use":
        return count_text(block["name"]) + count_text(orjson.dumps(block["input"]).decode()) + 8
    if kind == "tool_result":
        return count_text(str(block.get("content", ""))) + 4
    if kind in ("image", "image_url"):
        return IMAGE_TOKENS
    return 0
