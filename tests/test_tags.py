"""Memory blocks: format, inject, strip; envelopes unwrapped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from lamina.tags import (
    format_memory_block,
    inject_memory_block,
    strip_tagged_blocks,
    unwrap_envelopes,
)


@dataclass
class Mem:
    text: str
    time: datetime | None


NOW = datetime(2026, 11, 29, 19, 40, tzinfo=UTC)


def test_block_carries_current_time_and_each_memory_date() -> None:
    block = format_memory_block(
        [
            Mem("We chose SQLite for the first release.", datetime(2026, 5, 3, 9, 0, tzinfo=UTC)),
            Mem("Pagination limit is 50.\nSet in api.py.", None),
        ],
        now=NOW,
    )
    lines = block.split("\n")
    assert lines[0] == "<lamina_memories>" and lines[-1] == "</lamina_memories>"
    assert "Current time: 2026-11-29 19:40 UTC" in block
    assert "- [2026-05-03] We chose SQLite for the first release." in block
    assert "- [undated] Pagination limit is 50.\n  Set in api.py." in block


def test_nothing_to_show_injects_nothing() -> None:
    assert format_memory_block([], now=NOW) == ""
    assert inject_memory_block("hello", "") == "hello"


def test_inject_then_strip_gives_back_the_prompt() -> None:
    block = format_memory_block([Mem("a fact", None)], now=NOW)
    prompt = "what was the fact?"
    injected = inject_memory_block(prompt, block)
    assert injected.startswith("<lamina_memories>") and injected.endswith(prompt)
    assert strip_tagged_blocks(injected).strip() == prompt


def test_a_memory_mentioning_the_tag_cannot_close_the_block_early() -> None:
    tricky = Mem("the marker </lamina_memories> appears in a log", None)
    injected = inject_memory_block("prompt", format_memory_block([tricky], now=NOW))
    assert strip_tagged_blocks(injected).strip() == "prompt"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<hindsight_memories>x</hindsight_memories>hi", "hi"),
        ('<relevant_memories source="m">x\ny</relevant_memories> hi', " hi"),
        ("<LAMINA_MEMORIES>x</LAMINA_MEMORIES>hi", "hi"),
        ("a<lamina_memories>x<lamina_memories>y</lamina_memories>z</lamina_memories>b", "ab"),
        (
            "before <lamina_memories>truncated block with no end",
            "before truncated block with no end",
        ),
        ("no tags at all", "no tags at all"),
        ("a <b>bold</b> tag stays", "a <b>bold</b> tag stays"),
    ],
)
def test_strip(text: str, expected: str) -> None:
    assert strip_tagged_blocks(text) == expected


def test_strip_tags_are_configurable() -> None:
    text = "<mem0>x</mem0><lamina_memories>y</lamina_memories>z"
    assert strip_tagged_blocks(text, ["mem0"]) == "<lamina_memories>y</lamina_memories>z"
    with pytest.raises(ValueError, match="not a valid tag name"):
        strip_tagged_blocks(text, ["bad tag"])


def test_envelopes_keep_their_body() -> None:
    text = '<channel source="slack" user="ana">ship it?</channel>'
    assert unwrap_envelopes(text) == "ship it?"
