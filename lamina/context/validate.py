"""Check a request against the provider's rules. Every compiler test runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["validate_anthropic", "validate_openai"]

MAX_BREAKPOINTS = 4


def validate_anthropic(request: Mapping[str, Any]) -> list[str]:
    """Every rule the request breaks, as readable lines ([] when valid)."""
    problems: list[str] = []
    messages = request.get("messages") or []
    if not messages:
        return ["no messages"]
    if messages[0].get("role") != "user":
        problems.append("the first message is not the user's")
    breakpoints = sum(
        1
        for block in request.get("system") or []
        if isinstance(block, Mapping) and "cache_control" in block
    )
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role not in ("user", "assistant"):
            problems.append(f"message {index}: role {role!r}")
        if index and role == messages[index - 1].get("role"):
            problems.append(f"message {index}: two {role} messages in a row")
        if not content or (isinstance(content, str) and not content.strip()):
            problems.append(f"message {index}: empty content")
            continue
        if isinstance(content, str):
            continue
        for block in content:
            if "cache_control" in block:
                breakpoints += 1
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                problems.append(f"message {index}: empty text block")
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        if uses:
            following = messages[index + 1] if index + 1 < len(messages) else None
            answered = {
                b.get("tool_use_id")
                for b in (following or {}).get("content", [])
                if b.get("type") == "tool_result"
            }
            for use in uses:
                if use not in answered:
                    problems.append(f"message {index}: tool_use {use} not answered next")
        results = [b for b in content if b.get("type") == "tool_result"]
        if results:
            previous = messages[index - 1] if index else None
            called = {
                b.get("id")
                for b in (previous or {}).get("content", [])
                if b.get("type") == "tool_use"
            }
            for result in results:
                if result.get("tool_use_id") not in called:
                    problems.append(
                        f"message {index}: tool_result {result.get('tool_use_id')} without its call"
                    )
            kinds = [b.get("type") for b in content]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                problems.append(f"message {index}: tool results do not lead the message")
    if breakpoints > MAX_BREAKPOINTS:
        problems.append(f"{breakpoints} cache breakpoints (at most {MAX_BREAKPOINTS})")
    return problems


def validate_openai(request: Mapping[str, Any]) -> list[str]:
    """Every OpenAI Chat Completions rule the request breaks, as readable lines ([] when valid).

    System messages lead; then the user speaks first and user and assistant alternate, with
    `tool` messages between; every tool call of an assistant message is answered by exactly one
    `tool` message with its id before the next user or assistant message, and no tool message
    answers anything else; content is never empty (an assistant message with tool calls may
    have none) and carries no Anthropic blocks or cache marks."""
    problems: list[str] = []
    messages = request.get("messages") or []
    if not any(m.get("role") not in ("system", "developer") for m in messages):
        return ["no messages beyond the system prompt"]
    last_speaker: str | None = None  # the role of the last user or assistant message
    pending: dict[Any, bool] = {}  # the open calls (of the last assistant message): answered?
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if last_speaker is not None:
                problems.append(f"message {index}: a {role} message after the conversation began")
            problems += _content_problems(index, content, ("text",))
            continue
        if role == "tool":
            call = message.get("tool_call_id")
            if call not in pending:
                problems.append(f"message {index}: tool message {call!r} answers no open call")
            elif pending[call]:
                problems.append(f"message {index}: call {call!r} answered twice")
            else:
                pending[call] = True
            problems += _content_problems(index, content, ("text",))
            continue
        if role not in ("user", "assistant"):
            problems.append(f"message {index}: role {role!r}")
            continue
        for call, answered in pending.items():
            if not answered:
                problems.append(f"message {index}: call {call} not answered before it")
        pending = {}
        if last_speaker is None and role != "user":
            problems.append(f"message {index}: the first message is not the user's")
        if role == last_speaker and not (
            index and messages[index - 1].get("role") == "tool" and role == "assistant"
        ):
            problems.append(f"message {index}: two {role} messages in a row")
        last_speaker = role
        tool_calls = message.get("tool_calls") or []
        if role == "user":
            if tool_calls:
                problems.append(f"message {index}: tool calls in a user message")
            problems += _content_problems(index, content, ("text", "image_url"))
            continue
        if content not in (None, "") or not tool_calls:
            problems += _content_problems(index, content, ("text", "refusal"))
        for call in tool_calls:
            problems += _call_problems(index, call)
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if call_id in pending:
                problems.append(f"message {index}: call id {call_id!r} used twice")
            pending[call_id] = False
    for call, answered in pending.items():
        if not answered:
            problems.append(f"call {call} is never answered")
    return problems


def _content_problems(index: int, content: Any, kinds: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [] if content.strip() else [f"message {index}: empty content"]
    if not isinstance(content, list) or not content:
        return [f"message {index}: empty content"]
    problems: list[str] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in kinds:
            problems.append(f"message {index}: a {kind!r} part (allowed: {', '.join(kinds)})")
        elif kind == "text" and not str(part.get("text", "")).strip():
            problems.append(f"message {index}: empty text part")
        if isinstance(part, Mapping) and "cache_control" in part:
            problems.append(f"message {index}: cache_control is not OpenAI's")
    return problems


def _call_problems(index: int, call: Any) -> list[str]:
    if not isinstance(call, Mapping) or not call.get("id") or call.get("type") != "function":
        return [f"message {index}: a tool call without an id or of a type other than function"]
    function = call.get("function")
    if not isinstance(function, Mapping) or not function.get("name"):
        return [f"message {index}: tool call {call['id']} names no function"]
    try:
        text = function.get("arguments")
        arguments = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        return [f"message {index}: tool call {call['id']}: arguments are not a JSON object"]
    return []
