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

from .._fields import field_dict
from ..messages import Message

__all__ = [
    "PROMPT_VERSION",
    "RawStretch",
    "RecallItem",
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
class RawStretch:
    """A stretch of the log with no summary to recall (pinned raw, refused by the summariser,
    not folded yet), shown as its messages among the recall pairs, so the recall goes on past
    it instead of stopping there."""

    start: int
    end: int
    messages: Sequence[Message]
    tokens: Sequence[int]
    """What each message costs as shown (`ContextLog.shown`), for admission."""

    @property
    def id(self) -> str:
        return f"messages {self.start}-{self.end - 1}"

    @property
    def cost(self) -> int:
        return sum(self.tokens)

    def newest(self, tokens: int) -> RawStretch | None:
        """The stretch cut to its newest messages within `tokens` (None when not even one
        fits)."""
        kept, used = len(self.messages), 0
        while kept > 0 and used + self.tokens[kept - 1] <= tokens:
            used += self.tokens[kept - 1]
            kept -= 1
        if kept == len(self.messages):
            return None
        return RawStretch(
            self.start + kept, self.end, tuple(self.messages[kept:]), tuple(self.tokens[kept:])
        )


RecallItem = Recalled | RawStretch
"""What a request recalls before its span: a summary, or a stretch shown raw."""


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
    recalled: Sequence[RecallItem] = ()
    """What came between the head and `start`, oldest first: summaries, and the stretches
    with none shown raw."""
    messages: Sequence[Message] = ()
    """summarise: the chunk's messages."""
    summaries: Sequence[Recalled] = ()
    """merge: the summaries to merge, in order."""
    expansion: Sequence[RecallItem] = ()
    """What the last recalled summary stands for, one level down (its children, or for a
    level-1 summary its chunk's messages raw): the refusal ladder's first rung shows it in
    that summary's place."""
    expands: str = ""
    """The id of the summary `expansion` stands for."""


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
        return field_dict(self, leave_out=("input_tokens", "output_tokens", "calls"))

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
