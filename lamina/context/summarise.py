"""Summarisers: text that stands for a chunk (level 1) or for several summaries (level k+1).

The forest hands a summariser a `SummaryRequest` (requests.py: the head, earlier summaries to
recall, the chunk or the summaries to merge, the target length) and gets back a `SummaryResult`
(text, stop reason, who wrote it, tokens spent) or a `SummaryFailure` (nothing could be written
now; the chunk stays raw or covered by its neighbours).

`ExtractiveSummariser` is the offline default: deterministic, no model, no network. It keeps,
for every turn of the chunk, what the user asked, the agent's last words and the tool actions
(the same condensed units the memory bank stores), each line capped, until the target length.
Good for: keeping a long session's thread visible (what was asked, what was done, which files)
at a predictable size, cheaply and reproducibly. Not good for: abstraction; it cannot say what
a long exchange concluded unless someone wrote it down. Configure a model provider for that
(`ModelSummariser` in ladder.py; `summariser_from_config` in configured.py picks one from the
settings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..messages import Message
from ..tokens import TokenCounter, count_text, default_counter

if TYPE_CHECKING:
    from .requests import SummaryFailure, SummaryRequest, SummaryResult

__all__ = ["ExtractiveSummariser", "Summariser", "write_summary"]


class Summariser(Protocol):
    @property
    def name(self) -> str: ...

    def write(self, request: SummaryRequest) -> SummaryResult | SummaryFailure:
        """The summary the request asks for (what the forest calls)."""
        ...

    def summarise(self, messages: Sequence[Message], target_tokens: int) -> str:
        """A level-1 summary of consecutive log messages, with no context (for callers outside
        the forest, such as the benchmarks' baselines)."""
        ...

    def merge(self, summaries: Sequence[str], target_tokens: int) -> str:
        """A level-k+1 summary of consecutive level-k summaries, with no context."""
        ...


def write_summary(
    summariser: Summariser, request: SummaryRequest
) -> SummaryResult | SummaryFailure:
    """`summariser.write(request)`; a summariser written before `write` existed (only
    `summarise` and `merge`) is asked the context-free way."""
    write = getattr(summariser, "write", None)
    if write is not None:
        answer: SummaryResult | SummaryFailure = write(request)
        return answer
    if request.task == "summarise":
        text = summariser.summarise(request.messages, request.target_tokens)
    else:
        text = summariser.merge([s.text for s in request.summaries], request.target_tokens)
    from .requests import SummaryResult

    return SummaryResult(text=text, summariser=summariser.name)


def _cap(line: str, limit: int) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class ExtractiveSummariser:
    line_chars: int = 240
    counter: TokenCounter | None = None
    name: str = "extractive@1"

    def _fit(self, lines: Sequence[str], target_tokens: int) -> str:
        counter = self.counter or default_counter()
        kept: list[str] = []
        used = 0
        for line in lines:
            cost = count_text(line, counter) + 1
            if kept and used + cost > target_tokens:
                kept.append("[…]")
                break
            kept.append(line)
            used += cost
        return "\n".join(kept)

    def summarise(self, messages: Sequence[Message], target_tokens: int) -> str:
        from ..text.units import UnitOptions, build_units  # only when summarising

        units, _segments = build_units(
            messages,
            UnitOptions(windows=0, max_actions=6, max_tokens=None, said_through_tools=False),
        )
        lines: list[str] = []
        for unit in units:
            parts = unit.text.split("\n")
            asked = [p for p in parts if p.startswith("user: ")][:1]
            actions = [p for p in parts if p.startswith("actions: ")]
            replies = [p for p in parts if p.startswith("assistant: ")][-1:]
            for part in [*asked, *replies, *actions]:
                lines.append(_cap(part, self.line_chars))
        if not lines:
            lines = ["(tool activity with no conversation)"]
        return self._fit(lines, target_tokens)

    def merge(self, summaries: Sequence[str], target_tokens: int) -> str:
        share = max(1, target_tokens // max(1, len(summaries)))
        lines: list[str] = []
        for summary in summaries:
            lines.append(self._fit(summary.split("\n"), share))
        return self._fit("\n".join(lines).split("\n"), target_tokens)

    def write(self, request: SummaryRequest) -> SummaryResult:
        """Reads only the chunk (or the summaries to merge); the head and the recalled
        summaries are ignored, so the text for a chunk is the same whatever came before."""
        if request.task == "summarise":
            text = self.summarise(request.messages, request.target_tokens)
        else:
            text = self.merge([s.text for s in request.summaries], request.target_tokens)
        from .requests import SummaryResult

        return SummaryResult(text=text, summariser=self.name)
