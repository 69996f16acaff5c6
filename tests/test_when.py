"""Time expressions resolve against a reference time; the time channel ranks by closeness."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import RecallOptions
from lamina.bank.when import resolve_time_expressions
from lamina.embed import HashEmbedder
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.store.sqlite import SQLiteStore

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)  # a Friday


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did we do yesterday?", "2023-10-19", "2023-10-20"),
        ("the trip last May", "2023-05-01", "2023-06-01"),
        ("back in 2022", "2022-01-01", "2023-01-01"),
        ("on 8 May, 2023", "2023-05-08", "2023-05-09"),
        ("around May 8th", "2023-05-08", "2023-05-09"),
        ("three weeks ago", "2023-09-25", "2023-10-02"),
        ("last weekend", "2023-10-14", "2023-10-16"),
        ("earlier this month", "2023-10-01", "2023-11-01"),
        ("notes from 2023-05-08", "2023-05-08", "2023-05-09"),
        ("last week", "2023-10-09", "2023-10-16"),
        ("last friday", "2023-10-13", "2023-10-14"),
        ("in December", "2022-12-01", "2023-01-01"),
    ],
)
def test_expressions_resolve_against_now(query: str, start: str, end: str) -> None:
    (found,) = resolve_time_expressions(query, NOW)
    assert found.start.date().isoformat() == start
    assert found.end.date().isoformat() == end


@pytest.mark.parametrize(
    ("query", "relative"),
    [
        ("What did Maria do last weekend before April 10, 2023?", ("2023-04-08", "2023-04-10")),
        ("What did Joanna finish last Friday on 23 January, 2022?", ("2022-01-21", "2022-01-22")),
        (
            "Tim's writing issue last week, as said on November 6, 2023",
            ("2023-10-30", "2023-11-06"),
        ),
        ("what happened two days ago, on 2023-03-15?", ("2023-03-13", "2023-03-14")),
    ],
)
def test_relative_words_count_from_the_day_the_question_names(
    query: str, relative: tuple[str, str]
) -> None:
    """The Friday in "last Friday on 23 January, 2022" is the one before that day, not now:
    the question's dated day anchors its relative words, and still counts itself."""
    first, second = resolve_time_expressions(query, NOW)
    assert (first.start.date().isoformat(), first.end.date().isoformat()) == relative
    assert second.days == 1
    # A day named without its year anchors nothing.
    (found, _may) = resolve_time_expressions("yesterday, on May 3", NOW)
    assert found.start.date().isoformat() == "2023-10-19"


def test_no_time_and_impossible_dates_resolve_to_nothing() -> None:
    assert resolve_time_expressions("which database did we choose?", NOW) == []
    assert resolve_time_expressions("on 31 February", NOW) == []


def test_time_channel_brings_the_right_period_forward(tmp_path: Path) -> None:
    bank = MemoryBank(SQLiteStore(tmp_path / "db"), HashEmbedder())
    messages = []
    for n, day in enumerate(["2023-03-03", "2023-05-12", "2023-08-20"]):
        when = datetime.fromisoformat(day).replace(tzinfo=UTC)
        messages.append(
            Message(
                id=f"q{n}",
                role=Role.USER,
                blocks=(TextBlock("went hiking again"),),
                kind=Kind.PROMPT,
                timestamp=when,
                session_id=f"s{n}",  # three hikes, three sessions: no window joins them
            )
        )
    bank.retain_messages(messages, "p", "d")
    result = bank.recall("the hike last May", "p", RecallOptions(now=NOW))
    assert result.hits[0].time == datetime(2023, 5, 12, tzinfo=UTC)
    assert result.hits[0].channels["time"]["score"] == 1.0  # inside the resolved range
    march = [h for h in result.hits if h.time == datetime(2023, 3, 3, tzinfo=UTC)]
    assert all(h.channels.get("time", {"score": 0.0})["score"] < 1.0 for h in march)
