"""What the forest asks a summariser, and what it gets back.

A `SummaryRequest` is as-of: it holds only what came before the span being summarised and the
span itself (the head, earlier summaries to recall, then the chunk's messages or the summaries
to merge), never anything after it. Plain data, so any summariser can take one: the offline
one reads only the chunk; the model one (ladder.py) sends all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..messages import Message

__all__ = [
    "PROMPT_VERSION",
    "Recalled",
    "SummaryFailure",
    "SummaryRequest",
    "SummaryResult",
    "Task",
]

PROMPT_VERSION = 1
"""The version of the model summariser's prompts: a failure recorded under another version is
worth retrying."""

Task = Literal["summarise", "merge"]


@dataclass(frozen=True, slots=True)
class Recalled:
    """A summary as the request shows it: a recall pair."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    task: Task
    level: int
    """The level of the summary to write (1 for a chunk)."""
    start: int
    end: int
    """The span of the log it will stand for: `log[start:end]`."""
    target_tokens: int
    head: Sequence[Message] = ()
    """The opening messages of the log, raw."""
    recalled: Sequence[Recalled] = ()
    """Summaries of what came between the head and `start`, oldest first."""
    messages: Sequence[Message] = ()
    """summarise: the chunk's messages."""
    summaries: Sequence[Recalled] = ()
    """merge: the summaries to merge, in order."""


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    stop_reason: str = "complete"
    summariser: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    """Provider calls made (0 for a summariser with no model)."""
    request_hash: str = ""
    """A hash of what was sent ("" lets the forest hash the request itself)."""


@dataclass(frozen=True, slots=True)
class SummaryFailure:
    """No summary could be written. A failure that is not `deferred` is permanent for its keys
    (summariser, window, prompt version): only a change of one of them makes a retry worth it.
    A deferred one (transient errors past their retries, a spend cap) is retried later."""

    task: Task
    level: int
    start: int
    end: int
    summariser: str
    window: int
    prompt_version: int
    reason: str
    deferred: bool = False
    at: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    @property
    def keys(self) -> tuple[str, int, int]:
        return (self.summariser, self.window, self.prompt_version)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "level": self.level,
            "start": self.start,
            "end": self.end,
            "summariser": self.summariser,
            "window": self.window,
            "prompt_version": self.prompt_version,
            "reason": self.reason,
            "deferred": self.deferred,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SummaryFailure:
        task: Task = "merge" if data.get("task") == "merge" else "summarise"
        return cls(
            task=task,
            level=int(data["level"]),
            start=int(data["start"]),
            end=int(data["end"]),
            summariser=str(data["summariser"]),
            window=int(data.get("window", 0)),
            prompt_version=int(data.get("prompt_version", 0)),
            reason=str(data.get("reason", "")),
            deferred=bool(data.get("deferred", False)),
            at=float(data.get("at", 0.0)),
        )
