"""Summarisers: text that stands for a chunk (level 1) or for several summaries (level k+1).

`ExtractiveSummariser` is the offline default: deterministic, no model, no network. It keeps,
for every turn of the chunk, what the user asked, the agent's last words and the tool actions
(the same condensed units the memory bank stores), each line capped, until the target length.
Good for: keeping a long session's thread visible (what was asked, what was done, which files)
at a predictable size, cheaply and reproducibly. Not good for: abstraction; it cannot say what
a long exchange concluded unless someone wrote it down. Configure a model provider for that
(a later slice adds the provider summariser with admission and its refusal ladder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..bank.units import UnitOptions, build_units
from ..messages import Message
from ..tokens import TokenCounter, count_text, default_counter

__all__ = ["ExtractiveSummariser", "Summariser"]


class Summariser(Protocol):
    @property
    def name(self) -> str: ...

    def summarise(self, messages: Sequence[Message], target_tokens: int) -> str:
        """A level-1 summary of consecutive log messages."""
        ...

    def merge(self, summaries: Sequence[str], target_tokens: int) -> str:
        """A level-k+1 summary of consecutive level-k summaries."""
        ...


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
        units, _segments = build_units(messages, UnitOptions(windows=0, max_actions=6))
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
