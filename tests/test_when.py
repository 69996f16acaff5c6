"""Time expressions resolve against a reference time; the time channel ranks by closeness."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.extract import parse_facts
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.readers.locomo import read_locomo_samples
from lamina.store.sqlite import SQLiteStore
from lamina.text.when import read_day, resolve_time_expressions

from .conftest import LOCOMO, needs_shared

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


def _days(query: str, now: datetime = NOW) -> list[tuple[str, float]]:
    return [(r.start.date().isoformat(), r.days) for r in resolve_time_expressions(query, now)]


@pytest.mark.parametrize(
    ("query", "days"),
    [
        # Numbers, year first
        ("what did she cook on 2023-01-22?", [("2023-01-22", 1)]),
        ("notes of 2023/01/22", [("2023-01-22", 1)]),
        ("notes of 2023/1/5", [("2023-01-05", 1)]),
        ("notes of 2023.01.22", [("2023-01-22", 1)]),
        ("the deploy at 2023-01-22T10:00 failed", [("2023-01-22", 1)]),
        ("logged 2023-01-22T10:00:05.123+02:00, then", [("2023-01-22", 1)]),
        ("logged 2023-01-22 10:00:05", [("2023-01-22", 1)]),
        # Numbers, day or month first
        ("what did she cook on 22.01.2023?", [("2023-01-22", 1)]),
        ("on 1.2.2023", [("2023-02-01", 1)]),  # dots: day first, always
        ("on 01/22/2023", [("2023-01-22", 1)]),
        ("on 22/01/2023", [("2023-01-22", 1)]),
        ("on 22-01-2023", [("2023-01-22", 1)]),
        ("on 1/22/23", [("2023-01-22", 1)]),
        ("on 22/1/23.", [("2023-01-22", 1)]),
        # Months
        ("in 01/2023", [("2023-01-01", 31)]),
        ("in 1/2023", [("2023-01-01", 31)]),
        ("in 2023-01", [("2023-01-01", 31)]),
        ("in 2023/02", [("2023-02-01", 28)]),
        # Words
        ("on Jan 22nd", [("2023-01-22", 1)]),
        ("on the 22nd of January", [("2023-01-22", 1)]),
        ("on 22 Jan 2022", [("2022-01-22", 1)]),
        ("on Jan. 22", [("2023-01-22", 1)]),
        ("on Sept. 3rd, 2022", [("2022-09-03", 1)]),
        ("on 22-Jan-2022", [("2022-01-22", 1)]),
        ("the forest picture shared on December 1,2022", [("2022-12-01", 1)]),
        ("between August 11 and August 15 2023", [("2023-08-11", 1), ("2023-08-15", 1)]),
    ],
)
def test_dates_in_every_common_written_form(query: str, days: list[tuple[str, float]]) -> None:
    assert _days(query) == days


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("on 22/01", [("2023-01-22", 1)]),  # only day/month makes a date
        ("on 01/22", [("2023-01-22", 1)]),  # only month/day does
        ("since 1/22", [("2023-01-22", 1)]),
        ("before 30/09", [("2023-09-30", 1)]),
        ("from 20/09 to 25/09", [("2023-09-20", 1), ("2023-09-25", 1)]),
        ("between 11/08 and 15/08", [("2023-08-11", 1), ("2023-08-15", 1)]),
        ("dated 22/11", [("2022-11-22", 1)]),  # November is still to come: last year's
    ],
)
def test_a_day_in_numbers_without_a_year(query: str, days: list[tuple[str, float]]) -> None:
    """The year comes from `now` as for a day in words: the same day, "on January 22" or
    "on 22/01", resolves alike."""
    assert _days(query) == days
    assert _days("on 22/11") == _days("on November 22") == [("2022-11-22", 1)]
    assert _days("on 01/22") == _days("on January 22")


def test_an_ambiguous_date_reads_both_ways_unless_the_query_shows_its_order() -> None:
    assert _days("on 01/02/2023") == [("2023-01-02", 1), ("2023-02-01", 1)]
    assert _days("on 05/05/2023") == [("2023-05-05", 1)]  # both ways the same day
    assert _days("since 03/04") == [("2023-03-04", 1), ("2023-04-03", 1)]
    # Another date of the query shows which number comes first.
    assert _days("on 01/02/2023, not 22/01/2023") == [("2023-02-01", 1), ("2023-01-22", 1)]
    assert _days("on 01/02/2023, not 01/22/2023") == [("2023-01-02", 1), ("2023-01-22", 1)]
    assert _days("on 01/02/2023 or 22.01.2023") == [("2023-02-01", 1), ("2023-01-22", 1)]
    # Dates that show both orders show neither.
    assert _days("01/02/2023, 22/01/2023, 01/22/2023")[:2] == [
        ("2023-01-02", 1),
        ("2023-02-01", 1),
    ]


def test_relative_words_count_from_a_day_named_in_numbers() -> None:
    """As with "last Friday on 23 January, 2022": the dated day anchors "last Friday", in
    numbers too; a day that reads either way anchors both readings."""
    assert _days("what did Joanna finish last Friday on 23.01.2022?") == [
        ("2022-01-21", 1),
        ("2022-01-23", 1),
    ]
    assert _days("last week, as mentioned on 2023-11-06") == [("2023-10-30", 7), ("2023-11-06", 1)]
    assert _days("last weekend before 04/10/2023") == [
        ("2023-04-08", 2),
        ("2023-09-30", 2),
        ("2023-04-10", 1),
        ("2023-10-04", 1),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "upgrade to 3.11.2",
        "python 2.7",
        "bump to 1.2.10",
        "v1.2.2024",
        "version 1.2.2024",
        "release 2024.01.22",
        "pip install tool==2024.1.1",
        "ping 192.168.1.10",
        "host 10.0.2020.1",
        "took 12.5 s",
        "costs 12.2023 EUR",
        "ran in 10.2034 s",
        "at 10:30",
        "ratio 3/4",
        "a 2/3 majority",
        "on 3/4 of the hosts",
        "line 10/20",
        "scored 8/10 and 9/10",
        "see logs/2024-01-22.txt",
        "src/2024/01/22/main.py",
        "tests/01/02/2024",
        "backup-2024-01-22.tar",
        r"C:\logs\2024-01-22",
        "ticket 2024-0042",
        "the 2023-2024 season",
        "ids 01-02-24",
        "on 31/02/2023",
        "on 13/13/2023",
        "build 20240122",
    ],
)
def test_numbers_that_are_not_dates_are_not_read_as_dates(query: str) -> None:
    assert resolve_time_expressions(query, NOW) == []


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("2024-01-22", "2024-01-22"),
        (" 22.01.2024 ", "2024-01-22"),
        ("January 22, 2024", "2024-01-22"),
        ("2024-01-22T10:00:00Z", "2024-01-22"),
        ("22/01/2024", "2024-01-22"),
        ("01/02/2024", None),  # either way: not one day
        ("Jan 22", None),  # no year
        ("2024-01", None),  # a month
        ("on 2024-01-22 and 2024-01-23", None),
        ("null", None),
        ("", None),
    ],
)
def test_read_day_names_one_day_or_none(text: str, day: str | None) -> None:
    found = read_day(text)
    assert (found.date().isoformat() if found else None) == day


def test_fact_dates_are_read_by_the_same_parser() -> None:
    """A model asked for YYYY-MM-DD that answers another form still dates its fact."""
    facts = parse_facts(
        '{"facts": [{"fact": "A moved.", "date": "2026-02-01"},'
        ' {"fact": "B moved.", "date": "01.03.2026"},'
        ' {"fact": "C moved.", "date": "March 2, 2026"},'
        ' {"fact": "D moved.", "date": "02/03/2026"},'
        ' {"fact": "E moved.", "date": "soon"}]}'
    )
    assert [f.occurred_at.date().isoformat() if f.occurred_at else None for f in facts] == [
        "2026-02-01",
        "2026-03-01",
        "2026-03-02",
        None,
        None,
    ]


@pytest.mark.parametrize(
    "question",
    [
        "what did we decide on 12.05.2023?",
        "what did we decide on 05/12/2023?",
        "what did we decide on 2023-05-12?",
        "what did we decide on 2023-05-12T09:30?",
        "what did we decide on 12/05?",
        "what did we decide on May 12th?",
    ],
)
def test_a_question_dated_in_numbers_finds_the_memory_of_that_day(
    tmp_path: Path, question: str
) -> None:
    """Three sessions say the same words; only the day tells them apart."""
    bank = MemoryBank(SQLiteStore(tmp_path / "db"), HashEmbedder())
    messages = [
        Message(
            id=f"q{n}",
            role=Role.USER,
            blocks=(TextBlock("we decided to keep the cache"),),
            kind=Kind.PROMPT,
            timestamp=datetime.fromisoformat(day).replace(tzinfo=UTC),
            session_id=f"s{n}",
        )
        for n, day in enumerate(["2023-03-03T10:00", "2023-05-12T10:00", "2023-08-20T10:00"])
    ]
    bank.retain_messages(messages, "p", "d")
    result = bank.recall(question, "p", RecallOptions(now=NOW))
    assert result.hits[0].time == datetime(2023, 5, 12, 10, tzinfo=UTC)
    assert result.hits[0].channels["time"]["score"] == 1.0


@needs_shared
@pytest.mark.parametrize(
    "date", ["1 February, 2023", "01.02.2023", "02/01/2023", "01/02/2023", "2023-02-01"]
)
def test_a_locomo_question_dated_in_numbers_finds_its_evidence(tmp_path: Path, date: str) -> None:
    """A real conversation (LoCoMo conv-30), asked as its question file asks and with the date in
    numbers, either order: the evidence turn is among the first memories all the same."""
    sample = next(s for s in read_locomo_samples(str(LOCOMO)) if s.sample_id == "conv-30")
    bank = MemoryBank(SQLiteStore(tmp_path / "db"), HashEmbedder())
    bank.retain_messages(sample.messages, "b", sample.sample_id)
    now = max(s.date_time for s in sample.sessions if s.date_time is not None)
    question = f"What did Gina find for her clothing store on {date}?"
    result = bank.recall(question, "b", RecallOptions(limit=5, now=now))
    found = [r for h in result.hits for r in h.memory.record_ids]
    assert "conv-30:D3:2" in found
