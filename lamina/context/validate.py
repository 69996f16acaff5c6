"""Check a request against the provider's rules. Every compiler test runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["validate_anthropic"]

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
        if not content:
            problems.append(f"message {index}: empty content")
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
