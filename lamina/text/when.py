"""Time expressions in a query, resolved to date ranges against a reference time.

"yesterday", "last May", "in 2023", "on 8 May, 2023", "May 8th", "three weeks ago", "last
weekend", "this month", "2023-05-08" each become a half-open UTC interval `[start, end)`. The
recall's time channel ranks memories by how close they are to those intervals. The reference
time ("now") defaults to the current time; a benchmark or a replay passes its own.

Dates are read in every common written form: in words ("January 22, 2024", "22nd of January",
"Jan. 22", "22 Jan 2024", "22-Jan-2024") and in numbers: `2024-01-22`, `2024/01/22`,
`2024-01-22T10:00`, `22.01.2024` (dots: day first), `01/22/2024`, `22/01/2024`, `1/22/24`,
`22-01-2024`; months as `01/2024`, `2024-01`; and a day without its year as `22/01`
or `01/22` after a word that asks for a date ("on", "since", "before", ...). A date without a
year takes the reference's year, or the year before when its month is still to come. A date whose
numbers read either way (`01/02/2024`) gives both days, unless the query's other dates show which
number comes first. What is not a date: versions ("3.11.2", "v1.2.2024"), addresses
("192.168.1.10"), decimals, times ("10:30"), fractions and scores ("3/4", "line 10/20") and
numbers inside a path or a name ("logs/2024-01-22.txt", "backup-2024-01-22").

One parser for every date a text holds: recall's queries here, and the dates a model gives for
the facts it extracts (`read_day`).

What is not handled: times relative to other events ("two weeks before the trip") need the
event's own date, which only the memories know; such queries are left to the other channels.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeAlias

from .calendar_names import MONTHS, WEEKDAYS

__all__ = ["TimeRange", "read_day", "resolve_time_expressions"]

NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a few": 3, "several": 3,
}  # fmt: skip

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_NUMBER = r"\d+|" + "|".join(sorted((re.escape(n) for n in NUMBERS), key=len, reverse=True))
_UNIT = r"day|week|month|year|weekend"


@dataclass(frozen=True, slots=True)
class TimeRange:
    start: datetime
    end: datetime
    text: str
    """The words it was read from."""

    def distance_days(self, moment: datetime) -> float:
        """0 inside the range, else the days to its nearest edge."""
        if moment < self.start:
            return (self.start - moment).total_seconds() / 86400
        if moment >= self.end:
            return (moment - self.end).total_seconds() / 86400
        return 0.0

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400


def _start_of_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _days_in(year: int, month: int) -> int:
    """Days in the month (as `calendar.monthrange`, whose import, with `locale`, costs every
    recall's process a few ms)."""
    if month == 12:
        return 31
    return (datetime(year, month + 1, 1) - datetime(year, month, 1)).days


def _month_range(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, start + timedelta(days=_days_in(year, month))


def _year_range(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _week_range(moment: datetime) -> tuple[datetime, datetime]:
    start = _start_of_day(moment) - timedelta(days=moment.weekday())
    return start, start + timedelta(days=7)


def _number(word: str) -> int:
    word = word.strip().lower()
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


def _shift_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    day = min(moment.day, _days_in(year, month + 1))
    return moment.replace(year=year, month=month + 1, day=day)


def _unit_range(unit: str, anchor: datetime) -> tuple[datetime, datetime]:
    if unit == "day":
        start = _start_of_day(anchor)
        return start, start + timedelta(days=1)
    if unit == "week":
        return _week_range(anchor)
    if unit == "weekend":
        monday, _ = _week_range(anchor)
        start = monday + timedelta(days=5)
        return start, start + timedelta(days=2)
    if unit == "month":
        return _month_range(anchor.year, anchor.month)
    return _year_range(anchor.year)


def _ago(unit: str, n: int, now: datetime) -> datetime:
    if unit in ("day",):
        return now - timedelta(days=n)
    if unit in ("week", "weekend"):
        return now - timedelta(weeks=n)
    if unit == "month":
        return _shift_months(now, -n)
    return (
        now.replace(year=now.year - n)
        if not (now.month == 2 and now.day == 29)
        else (now - timedelta(days=365 * n))
    )


_L = r"(?<![\w./\\:@#+\-])"
"""A numeric date starts here: not glued to a path, a version, an address or a name."""
_R = r"(?![\w/\\]|[.:\-+]\w)"
"""...and ends here: no more path, version, address, time or name after it."""
_Y4 = r"(?:19|20)\d{2}"
_CLOCK = r"(?:T\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)"
"""The time of an ISO datetime ("T10:00", "T10:00:00.5+02:00"): read over, the day counts."""

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # Numbers: 2024-01-22, 2024/01/22, 2024.01.22, 2024-01-22T10:00
    ("year_first", re.compile(rf"{_L}({_Y4})([-/.])(\d{{1,2}})\2(\d{{1,2}}){_CLOCK}?{_R}")),
    # 22.01.2024: day first, as everywhere dots are written
    ("dotted", re.compile(rf"{_L}(\d{{1,2}})\.(\d{{1,2}})\.({_Y4}){_R}")),
    # 01/02/2024, 01-02-2024, 1/2/24: month or day first
    ("numeric", re.compile(rf"{_L}(\d{{1,2}})([/-])(\d{{1,2}})\2({_Y4}|\d{{2}}){_R}")),
    # 01/2024; 2024-01, 2024/01 (not 01.2024: "in 12.2023 s" is a duration)
    ("month_slash_year", re.compile(rf"{_L}(\d{{1,2}})/({_Y4}){_R}")),
    ("year_dash_month", re.compile(rf"{_L}({_Y4})[-/](\d{{1,2}}){_R}")),
    # 22/01, 01/22: only after a word that asks for a date (see `_YEARLESS_CUE`)
    ("numeric_day", re.compile(rf"{_L}(\d{{1,2}})/(\d{{1,2}}){_R}")),
    # Words: 22 Jan 2024, 22nd of January, 22-Jan-2024; January 22, 2024, Jan. 22nd
    ("day_month", re.compile(
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?|-)({_MONTH})\b\.?"
        rf"(?:(?:,?\s*|-)(\d{{4}})\b)?",
        re.I,
    )),
    ("month_day", re.compile(
        rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(\d{{4}})\b)?", re.I
    )),
    ("month_year", re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)),
    ("year", re.compile(r"\b(?:in|during|since|of|from)\s+((?:19|20)\d{2})\b", re.I)),
    # Relative to a day: "now", or the day the query names with its year
    ("relative_month", re.compile(rf"\b(last|this|next|in|during|since)\s+({_MONTH})\b", re.I)),
    ("ago", re.compile(rf"\b({_NUMBER})\s+({_UNIT})s?\s+ago\b", re.I)),
    ("relative_unit", re.compile(rf"\b(last|this|next|past|previous)\s+({_UNIT})\b", re.I)),
    ("weekday", re.compile(rf"\b(last|this|on|next)\s+({_WEEKDAY})\b", re.I)),
    ("named_day", re.compile(
        r"\b(today|tonight|yesterday|tomorrow|this (?:morning|evening|afternoon))\b", re.I
    )),
]  # fmt: skip

_RELATIVE = frozenset({"relative_month", "ago", "relative_unit", "weekday", "named_day"})
"""Expressions resolved against a reference day."""

_YEARLESS_CUE = re.compile(
    r"\b(?:on|since|from|until|till|by|before|after|between|through|as of|dated?)\s+$", re.I
)
"""What a day and month in numbers without a year ("on 22/01") must follow: alone, "3/4" and
"10/20" are fractions, scores and line numbers far more often than dates."""
_AFTER_DATE = re.compile(r"\s*(?:and|to|through|until|till|or|-|\u2013|\u2014)\s*", re.I)
"""...or a date read just before it, and a word joining the two ("from 20/10 to 25/10")."""
_VERSION = re.compile(r"\b(?:v|version|release)\s*$", re.I)
"""Numbers with dots after these are versions ("v1.2.2024", "version 1.10.2024")."""

Order: TypeAlias = Literal["dmy", "mdy"]
"""Which number comes first in a date with its day and month in numbers."""
Reading: TypeAlias = tuple[datetime, datetime, Order | None]
"""A range an expression reads as, and the order of its numbers when that decides it."""


def _year_of(text: str, now: datetime) -> int:
    """A written year; two digits ("24") the one within 80 years before and 20 after `now`."""
    year = int(text)
    if len(text) == 2:
        year += 2000 if 2000 + year <= now.year + 20 else 1900
    return year


def _day(year: int, month: int, day: int, order: Order | None = None) -> Reading:
    start = datetime(year, month, day, tzinfo=UTC)
    return start, start + timedelta(days=1), order


def _yearless_day(month: int, day: int, now: datetime, order: Order | None = None) -> Reading:
    """A day and month named without a year: this year's, unless its month is still to come."""
    year = now.year
    if datetime(year, month, 1, tzinfo=UTC) > now:
        year -= 1
    return _day(year, month, day, order)


def _readings(first: int, second: int) -> list[tuple[int, int, Order | None]]:
    """(month, day, order) readings of two numbers written day-month or month-day: both when
    both make a date, else the one that does (the order None when both numbers are equal)."""
    if first == second:
        return [(first, second, None)]
    out: list[tuple[int, int, Order | None]] = []
    if first <= 12:
        out.append((first, second, "mdy"))
    if second <= 12:
        out.append((second, first, "dmy"))
    return out


def _range(start: datetime, end: datetime) -> Reading:
    return start, end, None


def _resolve(kind: str, m: re.Match[str], now: datetime) -> list[Reading]:
    """The ranges one expression reads as (two for "01/02/2024", which reads either way)."""
    g = m.groups()
    if kind == "year_first":
        if g[1] == "." and (len(g[2]) != 2 or len(g[3]) != 2 or _follows(_VERSION, m)):
            return []  # 2024.1.2 is a version more often than a date
        return [_day(int(g[0]), int(g[2]), int(g[3]))]
    if kind == "dotted":
        if _follows(_VERSION, m):
            return []
        return [_day(int(g[2]), int(g[1]), int(g[0]), "dmy")]
    if kind == "numeric":
        if g[1] == "-" and len(g[3]) == 2:
            return []  # 01-02-24: an identifier as often as a date
        year = _year_of(g[3], now)
        return [_day(year, mo, d, order) for mo, d, order in _readings(int(g[0]), int(g[2]))]
    if kind == "numeric_day":
        if len(g[0]) == len(g[1]) == 1:
            return []  # 3/4: a fraction
        return [
            _yearless_day(mo, d, now, order) for mo, d, order in _readings(int(g[0]), int(g[1]))
        ]
    if kind == "month_slash_year":
        return [_range(*_month_range(int(g[1]), int(g[0])))]
    if kind == "year_dash_month":
        return [_range(*_month_range(int(g[0]), int(g[1])))]
    if kind in ("day_month", "month_day"):
        day, month = (g[0], g[1]) if kind == "day_month" else (g[1], g[0])
        number = MONTHS[month.lower()]
        if g[2]:
            return [_day(int(g[2]), number, int(day))]
        return [_yearless_day(number, int(day), now)]
    if kind == "month_year":
        return [_range(*_month_range(int(g[1]), MONTHS[g[0].lower()]))]
    if kind == "year":
        return [_range(*_year_range(int(g[0])))]
    if kind == "relative_month":
        number = MONTHS[g[1].lower()]
        word = g[0].lower()
        year = now.year
        if (word == "last" and number >= now.month) or (
            word in ("in", "during", "since") and number > now.month
        ):
            year -= 1
        if word == "next" and number <= now.month:
            year += 1
        start, end = _month_range(year, number)
        return [_range(start, now) if word == "since" else _range(start, end)]
    if kind == "ago":
        unit = g[1].lower()
        return [_range(*_unit_range(unit, _ago(unit, _number(g[0]), now)))]
    if kind == "relative_unit":
        word, unit = g[0].lower(), g[1].lower()
        if word == "past" or (word == "previous" and unit == "day"):
            span = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[unit]
            return [_range(now - timedelta(days=span), now)]
        step = {"last": -1, "previous": -1, "this": 0, "next": 1}[word]
        return [_range(*_unit_range(unit, _ago(unit, -step, now) if step else now))]
    if kind == "weekday":
        target = WEEKDAYS[g[1].lower()]
        back = (now.weekday() - target) % 7 or (7 if g[0].lower() == "last" else 0)
        if g[0].lower() == "next":
            back = -((target - now.weekday()) % 7 or 7)
        start = _start_of_day(now) - timedelta(days=back)
        return [_range(start, start + timedelta(days=1))]
    if kind == "named_day":
        word = g[0].lower()
        offset = {"yesterday": -1, "tomorrow": 1}.get(word, 0)
        start = _start_of_day(now) + timedelta(days=offset)
        return [_range(start, start + timedelta(days=1))]
    return []


def _has_year(kind: str, m: re.Match[str]) -> bool:
    """A day named with its year ("on 23 January, 2022", "23.01.2022", "2022-01-23")."""
    if kind in ("year_first", "dotted", "numeric"):
        return True
    return kind in ("day_month", "month_day") and m.group(3) is not None


@dataclass(slots=True)
class _Found:
    at: int
    end: int
    text: str
    readings: list[Reading]
    dated: bool
    """A day named with its year."""


_REACH = 16
"""Characters before a number that `_YEARLESS_CUE`, `_AFTER_DATE` and `_VERSION` look at (each
lookup costs the same however long the query)."""


def _follows(pattern: re.Pattern[str], m: re.Match[str]) -> bool:
    """Whether the text just before the match ends with `pattern`."""
    return pattern.search(m.string, max(0, m.start() - _REACH), m.start()) is not None


def _may_be_yearless_day(m: re.Match[str], ends: set[int]) -> bool:
    if _follows(_YEARLESS_CUE, m):
        return True
    start = m.start()
    return any(
        p in ends and _AFTER_DATE.fullmatch(m.string, p, start)
        for p in range(max(0, start - _REACH), start)
    )


def _in_query_order(found: list[_Found]) -> None:
    """Where the query's dates in numbers show which number comes first (a day above 12 first,
    "22/01/2024", or a dotted date: day first; a day above 12 second: month first) and none
    shows the other, its dates that read either way keep only that reading."""
    shown = {f.readings[0][2] for f in found if len(f.readings) == 1} - {None}
    if len(shown) != 1:
        return
    (order,) = shown
    for f in found:
        if len(f.readings) > 1:
            f.readings = [r for r in f.readings if r[2] == order] or f.readings


def _read(query: str, reference: datetime) -> list[_Found]:
    """Every expression of the query with the ranges it reads as. Days, months and years come
    first; relative expressions then count from the day the query names with its year, when
    it names one (from each reading of one that reads either way), else from `reference`.
    Overlapping matches: the kind earlier in `_PATTERNS` wins."""
    found: list[_Found] = []
    taken: list[tuple[int, int]] = []
    """The spans of `found`, in order (they never overlap)."""
    ends: set[int] = set()
    anchors: list[datetime] | None = None
    for kind, pattern in _PATTERNS:
        if kind in _RELATIVE and anchors is None:
            _in_query_order(found)
            dated = [f for f in found if f.dated]
            first = min(dated, key=lambda f: f.at) if dated else None
            anchors = [reference]
            if first is not None:
                anchors = [start + timedelta(hours=12) for start, _end, _o in first.readings]
        for match in pattern.finditer(query):
            start, end = match.span()
            i = bisect.bisect_left(taken, (start, end))
            if (i and taken[i - 1][1] > start) or (i < len(taken) and taken[i][0] < end):
                continue  # overlaps one found before
            if kind == "numeric_day" and not _may_be_yearless_day(match, ends):
                continue
            readings: list[Reading] = []
            for now in anchors if kind in _RELATIVE and anchors is not None else [reference]:
                try:
                    readings.extend(_resolve(kind, match, now))
                except (ValueError, OverflowError):
                    continue  # "31 February" and friends
            if readings:
                found.append(_Found(start, end, match.group(0), readings, _has_year(kind, match)))
                taken.insert(i, (start, end))
                ends.add(end)
    return sorted(found, key=lambda f: f.at)


def resolve_time_expressions(query: str, now: datetime | None = None) -> list[TimeRange]:
    """Every time expression of the query, resolved against `now` (default: the current time),
    except that relative ones ("last Friday", "two weeks ago") are resolved against the day
    the query names with its year, when it names one ("last weekend before April 10, 2023",
    "last week, as mentioned on 06.11.2023"). Overlapping matches keep the one whose kind comes
    first. A date in numbers that reads either way ("01/02/2024") gives both days, unless
    another date of the query shows the order ("22/01/2024" or "22.01.2024": day first)."""
    reference = (now or datetime.now(UTC)).astimezone(UTC)
    return [TimeRange(s, e, f.text) for f in _read(query, reference) for s, e, _o in f.readings]


def read_day(text: str) -> datetime | None:
    """The day `text` names when it is nothing but one date with its year ("2024-01-22",
    "22.01.2024", "January 22, 2024", "2024-01-22T10:00"), read only one way; else None."""
    found = _read(text.strip(), datetime.now(UTC))
    if len(found) != 1:
        return None
    (only,) = found
    if not only.dated or len(only.readings) != 1 or only.text != text.strip():
        return None
    return only.readings[0][0]
