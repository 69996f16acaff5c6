"""The forest: every summary written for a log, by span, each written once.

A level-1 summary stands for one chunk of the log, a level-k+1 summary for several consecutive
level-k summaries. Summaries are never edited or deleted: a later compile that needs the same
span reuses what was written, and one loaded from a store is never paid for again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import orjson

from ..messages import message_to_json
from ..tokens import count_text
from .chunks import Chunk
from .log import ContextLog
from .summarise import Summariser

__all__ = ["STOP_COMPLETE", "Forest", "Summary"]


STOP_COMPLETE = "complete"
"""The stop reason recorded for a summariser that reports none (the offline one)."""


@dataclass(frozen=True, slots=True)
class Summary:
    id: str
    level: int
    start: int
    end: int
    text: str
    tokens: int
    children: tuple[str, ...]
    summariser: str
    request_hash: str = ""
    """What the summariser was asked, hashed: its name, the task, the target length and the
    input (the chunk's messages, or the merged summaries)."""
    stop_reason: str = STOP_COMPLETE


class Forest:
    """Summaries by span, written once.

    `known` are summaries written earlier (loaded from a store): a span they cover is never
    summarised again. `on_write` is told of every new summary as soon as it is written (to
    store it), so a compile that fails later keeps what it paid for."""

    def __init__(
        self,
        summariser: Summariser,
        known: Iterable[Summary] = (),
        on_write: Callable[[Summary], None] | None = None,
    ) -> None:
        self.summariser = summariser
        self.nodes: dict[tuple[int, int, int], Summary] = {}
        for node in known:  # the first written for a span stands
            self.nodes.setdefault((node.level, node.start, node.end), node)
        self.by_id = {node.id: node for node in self.nodes.values()}
        self.on_write = on_write
        self.written = 0

    def _make(
        self,
        level: int,
        start: int,
        end: int,
        text: str,
        children: Sequence[str],
        request_hash: str,
    ) -> Summary:
        text = text.replace("\x00", "\ufffd")  # stores cannot all hold NUL in text
        digest = hashlib.sha1(f"{level}:{start}:{end}:{text}".encode()).hexdigest()[:8]
        node = Summary(
            id=f"L{level}-{start}-{end}-{digest}",
            level=level,
            start=start,
            end=end,
            text=text,
            tokens=count_text(text),
            children=tuple(children),
            summariser=self.summariser.name,
            request_hash=request_hash,
        )
        self.nodes[(level, start, end)] = node
        self.by_id[node.id] = node
        self.written += 1
        if self.on_write is not None:
            self.on_write(node)
        return node

    def _request_hash(self, task: str, target: int, parts: Iterable[bytes]) -> str:
        digest = hashlib.sha256(f"{self.summariser.name}\n{task}\n{target}\n".encode())
        for part in parts:
            digest.update(part)
            digest.update(b"\n")
        return digest.hexdigest()

    def level1(self, log: ContextLog, chunk: Chunk) -> Summary:
        found = self.nodes.get((1, chunk.start, chunk.end))
        if found is not None:
            return found
        target = max(80, min(600, chunk.tokens // 8))
        messages = log.slice(chunk.start, chunk.end)
        text = self.summariser.summarise(messages, target)
        asked = self._request_hash(
            "summarise", target, (orjson.dumps(message_to_json(m)) for m in messages)
        )
        return self._make(1, chunk.start, chunk.end, text, (), asked)

    def merge(self, nodes: Sequence[Summary]) -> Summary:
        level = nodes[0].level + 1
        key = (level, nodes[0].start, nodes[-1].end)
        found = self.nodes.get(key)
        if found is not None:
            return found
        target = max(120, min(900, sum(n.tokens for n in nodes) // 2))
        texts = [n.text for n in nodes]
        text = self.summariser.merge(texts, target)
        asked = self._request_hash("merge", target, (t.encode() for t in texts))
        return self._make(level, key[1], key[2], text, [n.id for n in nodes], asked)
