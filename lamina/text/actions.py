"""Tool calls in words: the short line that names each call (`Bash (what it was for): command`,
`Edit: src/app.py`), the actions line a part closes with, and a turn's tool activity as entries
(each call's line and what its result printed that a question would look for, from
lamina.text.printed) that lamina.text.units packs into `activity` units."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from ..messages import Message, ToolResultBlock, ToolUseBlock
from ..tokens import count_text
from ..turns import DEFAULT_RULES, TurnRules, clean_text
from .printed import printed_lines, tool_command

__all__ = [
    "STATED_CHARS",
    "Entry",
    "Redact",
    "action_entries",
    "actions_line",
    "activity_entries",
    "cap_text",
    "fit_actions",
    "same",
]

_TARGET_KEYS = (
    "file_path",
    "path",
    "notebook_path",
    "absolute_path",
    "dir_path",
    "command",
    "pattern",
    "url",
    "query",
    "description",
    "skill",
    "prompt",
)


Redact = Callable[[str], str]
"""Replaces secrets in a text; applied before anything is cut, so no cut splits a secret."""


def same(text: str) -> str:
    return text


def _clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_PATH_KEYS = frozenset({"file_path", "path", "notebook_path", "absolute_path", "dir_path"})


def _target(block: ToolUseBlock, redact: Redact = same) -> str:
    data = block.input if isinstance(block.input, Mapping) else {}
    for key in _TARGET_KEYS:
        value = tool_command(data) if key == "command" else data.get(key)
        if isinstance(value, str) and value.strip():
            line = " ".join(redact(value).split())
            if key in _PATH_KEYS and len(line) > 80:
                return "…" + line[-79:]  # a path's end names the file
            return _clip(line, 80)
    return ""


def _tool_name(name: str) -> str:
    if name.startswith("mcp__"):
        parts = name.split("__")
        return ".".join(p for p in parts[1:] if p)
    return name or "tool"


def cap_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]}\n[…]\n{text[-half:]}"


def _workdir(message: Message) -> str:
    """The directory the agent worked in when it wrote this message (Claude Code records it
    as `cwd`), "" when unknown."""
    for record in message.records:
        cwd = record.get("cwd")
        if isinstance(cwd, str) and len(cwd.strip("/")) > 0:
            return cwd.rstrip("/") + "/"
    return ""


def _here(message: Message, redact: Redact) -> Redact:
    """`redact`, then paths under the message's working directory made relative to it: the
    file's name, not the checkout's, is what a question names (and a path's tokens cost)."""
    cwd = _workdir(message)
    if not cwd:
        return redact
    return lambda text: redact(text).replace(cwd, "")


def action_entries(messages: Sequence[Message], redact: Redact = same) -> list[str]:
    errors = {
        b.tool_use_id
        for m in messages
        for b in m.blocks
        if isinstance(b, ToolResultBlock) and b.is_error
    }
    entries: list[str] = []
    for message in messages:
        for block in message.blocks:
            if isinstance(block, ToolUseBlock):
                target = clean_text(_target(block, _here(message, redact)))
                entry = _tool_name(block.name) + (f": {target}" if target else "")
                if block.id in errors:
                    entry += " (error)"
                if entry not in entries:
                    entries.append(entry)
    return entries


def actions_line(entries: Sequence[str], limit: int) -> str:
    if not entries:
        return ""
    shown = " · ".join(entries[:limit])
    more = len(entries) - limit
    return f"actions: {shown}" + (f" · +{more} more" if more > 0 else "")


def fit_actions(entries: Sequence[str], limit: int, room: int) -> str:
    """The longest actions line of at most `limit` entries within `room` tokens ("" if none)."""
    for shown in range(min(limit, len(entries)), 0, -1):
        line = actions_line(entries, shown)
        if count_text(line) <= room:
            return line
    return ""


# -- tool activity in words ----------------------------------------------------------------------
_QUIET_TOOLS = frozenset({"TodoWrite", "BashOutput", "KillShell", "KillBash", "TaskOutput"})
"""Tools whose calls say nothing a question would ask about (polling, the agent's own list)."""

_STATED = re.compile(
    r"""(?:-m|--message|--reason|--title|--description|--body)[= ]\s*"""
    r"""(?:"\$\(cat <<'?EOF'?\n(?P<heredoc>.*?)\n\s*EOF"""
    r"""|"(?P<double>(?:[^"\\]|\\.)*)"|'(?P<single>[^']*)')""",
    re.S,
)
"""A message written on a command line: a commit message, a reason for closing a task."""

_TRAILER = re.compile(r"^(?:[\w-]+-by: .*|.*\bGenerated with \[?Claude Code\b.*)$", re.I)
"""Lines a commit message ends with that say nothing of the change (`Co-Authored-By: ...`)."""

STATED_CHARS = 480
"""Characters kept of a message stated on a command line (a commit's whole message, mostly)."""


def _stated_on_command_line(command: str) -> str:
    """The messages given on a command line (a commit's, a pull request's title and body),
    their lines joined, trailers left out ("" if none); cut to `STATED_CHARS`."""
    lines: list[str] = []
    for found in _STATED.finditer(command):
        text = next(g for g in found.groups() if g is not None)
        lines += [ln.strip() for ln in text.replace("\\n", "\n").split("\n") if ln.strip()]
    said = " ".join(ln for ln in lines if not _TRAILER.match(ln))
    return _clip(said, STATED_CHARS)


def _activity_line(block: ToolUseBlock, redact: Redact) -> str:
    """One tool call in words: the tool, what it was for, its target; "" for quiet tools."""
    if block.name in _QUIET_TOOLS:
        return ""
    data = block.input if isinstance(block.input, Mapping) else {}
    name = _tool_name(block.name)
    command = tool_command(data)
    description = data.get("description")
    why = " ".join(redact(description).split()) if isinstance(description, str) else ""
    if command is not None and command.strip():
        # Redacted whole, as the actions line's target is (the redactor sees it once).
        command = redact(command)
        said = _stated_on_command_line(command)
        stated = _STATED.search(command) if said else None
        # A stated message is shown once, after the command that carries it.
        head = command[: stated.start()] + "…" if stated is not None else command
        head = _clip(" ".join(head.split()), 120)
        line = f"{name} ({why}): {head}" if why else f"{name}: {head}"
        if said:
            line += f" — {said}"
    else:
        target = _target(block, redact)
        line = f"{name}: {target}" if target else name
    return clean_text(line)


Entry = list[tuple[int, str]]
"""One tool call in words: its line and what its result printed, each with the index of the
message it came from."""


def activity_entries(
    messages: Sequence[Message], redact: Redact, rules: TurnRules = DEFAULT_RULES
) -> list[Entry]:
    """The tool activity of these messages, one entry per call: the call's line (at the
    call's message), then what its result printed that a question would look for
    (lamina.text.printed; at the result's message). A call said again in the same words is
    shown again only when it printed something new."""
    results: dict[str, tuple[int, ToolResultBlock]] = {
        b.tool_use_id: (i, b)
        for i, m in enumerate(messages)
        for b in m.blocks
        if isinstance(b, ToolResultBlock)
    }
    out: list[Entry] = []
    seen: set[str] = set()
    shown: set[tuple[str, str]] = set()
    for i, message in enumerate(messages):
        for block in message.blocks:
            if not isinstance(block, ToolUseBlock):
                continue
            here = _here(message, redact)
            line = _activity_line(block, here)
            if not line:
                continue
            at, result = results.get(block.id, (i, None))
            printed = printed_lines(block, result, here, rules)
            printed = [p for p in printed if (line, p) not in shown]
            if line in seen and not printed:
                continue
            seen.add(line)
            shown.update((line, p) for p in printed)
            out.append([(i, line)] + [(at, p) for p in printed])
    return out
