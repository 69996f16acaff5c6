"""Pins: parts of a log a compile must show in a given way, whatever the budget.

A pin names a stretch of the log, either a message range or a document, and holds it:

- `raw`: always shown as the messages themselves, never folded;
- `exact` at level L: always shown through a level-L summary (folded at once, never unfolded
  or folded deeper);
- `max` at level L: folded no deeper than level L (raw is allowed).

    lamina pin session-42 --messages 120-180 --raw          # the spec the agent works from
    lamina pin session-42 --document CLAUDE.md --raw        # every read of that file
    lamina pin session-42 --messages 0-400 --max-level 1

A document pin covers every message that carries the document: a document block with that
title, or a tool call whose path argument names the file (by full path or file name) together
with the message holding its result. It follows the log as it grows.

The frontier works in chunks, so a pin holds every chunk it touches. Two pins that ask for
incompatible things of one chunk (raw and a summary level, two exact levels, an exact level
above a maximum) are an error that names both. The head (the opening messages, kept raw) ends
where the first exact pin starts. Pins whose messages are still in the raw tail take effect
once their chunk is complete.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, cast

from ..errors import LaminaError
from ..messages import JSONValue, Message, ToolResultBlock, ToolUseBlock, UnknownBlock
from ..store.base import StoredPin

__all__ = [
    "Pin",
    "PinConflictError",
    "PinMode",
    "check_pins",
    "parse_range",
    "pin_json",
    "pin_spans",
]

PinMode = Literal["raw", "exact", "max"]
PIN_MODES: tuple[PinMode, ...] = ("raw", "exact", "max")

_PATH_KEYS = ("file_path", "path", "notebook_path")


class PinConflictError(LaminaError):
    """Pins that ask for incompatible things of the same messages."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class Pin:
    name: str
    mode: PinMode
    level: int = 0
    """The summary level for `exact` (>= 1) and `max` (>= 0); 0 for `raw`."""
    start: int | None = None
    end: int | None = None
    """A message range, `log[start:end]`; None for a document pin."""
    document: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in PIN_MODES:
            raise ValueError(f"pin {self.name!r}: unknown mode {self.mode!r} (raw, exact, max)")
        if (self.document is None) == (self.start is None or self.end is None):
            raise ValueError(f"pin {self.name!r}: give a message range or a document, not both")
        if self.start is not None and self.end is not None and not 0 <= self.start < self.end:
            raise ValueError(f"pin {self.name!r}: empty message range {self.start}-{self.end}")
        if self.mode == "raw" and self.level != 0:
            raise ValueError(f"pin {self.name!r}: a raw pin has no level")
        if self.mode == "exact" and self.level < 1:
            raise ValueError(f"pin {self.name!r}: an exact pin needs a level of at least 1")
        if self.mode == "max" and self.level < 0:
            raise ValueError(f"pin {self.name!r}: a maximum level cannot be negative")

    @classmethod
    def given(
        cls,
        name: str,
        mode: PinMode,
        level: int = 0,
        first: int | None = None,
        last: int | None = None,
        document: str | None = None,
    ) -> Pin:
        """A pin as people give it (the command line, HTTP, MCP): the first and last message
        held, both included, or a document; a raw pin's level is 0 whatever was given."""
        held = 0 if mode == "raw" else level
        if first is not None and last is not None:
            return cls(name, mode, held, first, last + 1)
        return cls(name, mode, held, document=document)

    @classmethod
    def of(cls, stored: StoredPin) -> Pin:
        """A pin as a store keeps it."""
        return cls(stored.name, cast(PinMode, stored.mode), stored.level, stored.start,
                   stored.end, stored.document)  # fmt: skip

    @property
    def allowed(self) -> tuple[int, int]:
        """The levels allowed, as an inclusive range (0 is raw)."""
        if self.mode == "raw":
            return (0, 0)
        if self.mode == "exact":
            return (self.level, self.level)
        return (0, self.level)

    def holding(self) -> str:
        """What it holds and how: `messages 3-5, raw`, `document 'a.md', at most level 1`."""
        what = (
            f"messages {self.start}-{self.end - 1}"
            if self.start is not None and self.end is not None
            else f"document {self.document!r}"
        )
        how = {
            "raw": "raw",
            "exact": f"at level {self.level}",
            "max": f"at most level {self.level}",
        }
        return f"{what}, {how[self.mode]}"

    def describe(self) -> str:
        return f"pin {self.name!r} ({self.holding()})"


def pin_json(pin: Pin | StoredPin) -> dict[str, JSONValue]:
    """A pin (or a stored one) as the command line, HTTP and MCP show it: the messages held as
    `[first, last]`, both included."""
    held = None if pin.start is None or pin.end is None else [pin.start, pin.end - 1]
    return {
        "name": pin.name,
        "mode": pin.mode,
        "level": pin.level,
        "messages": held,
        "document": pin.document,
    }


def parse_range(text: str) -> tuple[int, int]:
    """`120-180` (inclusive, as `lamina logs show` numbers messages) or `120` as a half-open
    span `(120, 181)`."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if match is None:
        raise ValueError(f"not a message range: {text!r} (expected e.g. 120-180)")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ValueError(f"message range {text!r} ends before it starts")
    return first, last + 1


def _names(path: str) -> set[str]:
    return {path, PurePosixPath(path).name}


def _document_spans(messages: Sequence[Message], document: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    calls: dict[str, int] = {}
    for index, message in enumerate(messages):
        for block in message.blocks:
            if isinstance(block, UnknownBlock) and block.type == "document":
                title = block.data.get("title") or block.data.get("name")
                if isinstance(title, str) and document in _names(title):
                    spans.append((index, index + 1))
            elif isinstance(block, ToolUseBlock) and isinstance(block.input, dict):
                for key in _PATH_KEYS:
                    value = block.input.get(key)
                    if isinstance(value, str) and document in _names(value):
                        calls[block.id] = index
                        break
            elif isinstance(block, ToolResultBlock) and block.tool_use_id in calls:
                spans.append((calls.pop(block.tool_use_id), index + 1))
    spans += [(index, index + 1) for index in calls.values()]  # results still to come
    return sorted(spans)


def pin_spans(pins: Iterable[Pin], messages: Sequence[Message]) -> list[tuple[Pin, int, int]]:
    """Every stretch of the log each pin holds, as `(pin, start, end)`, clipped to the log."""
    out: list[tuple[Pin, int, int]] = []
    for pin in pins:
        if pin.document is not None:
            out.extend((pin, s, e) for s, e in _document_spans(messages, pin.document))
        elif pin.start is not None and pin.end is not None and pin.start < len(messages):
            out.append((pin, pin.start, min(pin.end, len(messages))))
    return out


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def check_pins(pins: Sequence[Pin], messages: Sequence[Message] = ()) -> None:
    """`PinConflictError` when two pins hold the same messages in incompatible ways (range
    pins by their ranges; document pins by where the document is in `messages`)."""
    spans = pin_spans(pins, messages) if messages else []
    spans += [
        (p, p.start, p.end)
        for p in pins
        if p.start is not None and p.end is not None and p.start >= len(messages)
    ]
    for i, (a, a_start, a_end) in enumerate(spans):
        for b, b_start, b_end in spans[i + 1 :]:
            if a.name == b.name or a_end <= b_start or b_end <= a_start:
                continue
            if not _overlap(a.allowed, b.allowed):
                first, last = max(a_start, b_start), min(a_end, b_end) - 1
                raise PinConflictError(
                    f"{a.describe()} and {b.describe()} both hold messages {first}-{last}; "
                    "unpin one of them"
                )
