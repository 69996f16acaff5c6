"""What the user said through tools, and what the agent put up for approval: text for memory.

Conversational text (lamina.turns) leaves tool results out, and it must: a turn starts only at
what the user typed as a prompt. But some tool results carry the user's own words, and they are
often what was decided:

- answers to the agent's questions (Claude Code's AskUserQuestion: `toolUseResult.answers`, or
  the `"question"="answer"` pairs of the result text);
- plan approvals ("User has approved your plan") and rejections with the user's instructions
  ("... the user said: use SQLite instead");
- messages the user typed while the agent worked (queue-operation records, `enqueue`).

And the plan an agent shows for approval (ExitPlanMode's `plan`) is the agent's statement of
what will be done. These functions turn them into labelled lines for memory units; they never
decide what a turn is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..messages import Kind, Message, Role, ToolResultBlock, ToolUseBlock
from ..turns import DEFAULT_RULES, TurnRules, clean_text

__all__ = ["PLAN_TOOLS", "QUESTION_TOOLS", "plan_text", "user_said"]

QUESTION_TOOLS = frozenset({"AskUserQuestion"})
PLAN_TOOLS = frozenset({"ExitPlanMode"})

_PAIR = re.compile(r'"((?:[^"\\]|\\.)+?)"\s*=\s*"((?:[^"\\]|\\.)*?)"')
_APPROVED = "User has approved your plan"
_SAID = "the user said:"
_REJECTED = "The user doesn't want to proceed"


def _answers(message: Message, block: ToolResultBlock) -> list[str]:
    result: Any = message.tool_use_result
    pairs: list[tuple[str, str]] = []
    if isinstance(result, Mapping) and isinstance(result.get("answers"), Mapping):
        pairs = [(str(q), str(a)) for q, a in result["answers"].items()]
    if not pairs:
        pairs = [(q, a) for q, a in _PAIR.findall(block.text)]
    return [f"{q.strip()} → {a.strip()}" for q, a in pairs if a.strip()]


def _after_said(text: str) -> str:
    at = text.find(_SAID)
    return text[at + len(_SAID) :].strip() if at >= 0 else ""


def user_said(
    message: Message, tool_names: Mapping[str, str], rules: TurnRules = DEFAULT_RULES
) -> list[str]:
    """The user's words carried by this message's tool results (or typed into the queue while
    the agent worked), one entry each; `tool_names` maps tool_use ids to tool names."""
    if message.kind is Kind.QUEUE:
        operation = message.records[0].get("operation") if message.records else None
        text = clean_text(message.text, rules)
        if operation == "enqueue" and text and not message.text.lstrip().startswith("<"):
            return [text]
        return []
    if message.role is not Role.USER:
        return []
    out: list[str] = []
    for block in message.blocks:
        if not isinstance(block, ToolResultBlock):
            continue
        name = tool_names.get(block.tool_use_id, "")
        text = block.text
        if name in QUESTION_TOOLS and not block.is_error:
            out.extend(_answers(message, block))
        elif text.startswith(_APPROVED):
            out.append("approved the plan")
        elif text.startswith(_REJECTED) or (block.is_error and _SAID in text):
            said = clean_text(_after_said(text), rules)
            if said:
                out.append(said)
    return out


def plan_text(block: ToolUseBlock) -> str:
    """The plan an ExitPlanMode call puts up for approval ("" for any other tool)."""
    if block.name not in PLAN_TOOLS or not isinstance(block.input, Mapping):
        return ""
    plan = block.input.get("plan")
    return plan.strip() if isinstance(plan, str) else ""
