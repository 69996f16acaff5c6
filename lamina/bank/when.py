"""Time expressions in a query, resolved to date ranges against a reference time.

"yesterday", "last May", "in 2023", "on 8 May, 2023", "May 8th", "three weeks ago", "last
weekend", "this month", "2023-05-08" each become a half-open UTC interval `[start, end)`. The
recall's time channel ranks memories by how close they are to those intervals. The reference
time ("now") defaults to the current time; a benchmark or a replay passes its own.

What is not handled: times relative to other events ("two weeks before the trip") need the
event's own date, which only the memories know; such queries are left to the other channels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..calendar_names import MONTHS, WEEKDAYS

__all__ = ["TimeRange", "resolve_time_expressions"]

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


def _day(moment: datetime) -> datetime:
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
    start = _day(moment) - timedelta(days=moment.weekday())
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
        start = _day(anchor)
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


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    (
        "day_month",
        re.compile(
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?,?(?:\s+(\d{{4}}))?",
            re.I,
        ),
    ),
    (
        "month_day",
        re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?(?:\s+(\d{{4}}))?", re.I),
    ),
    ("month_year", re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)),
    ("relative_month", re.compile(rf"\b(last|this|next|in|during|since)\s+({_MONTH})\b", re.I)),
    ("ago", re.compile(rf"\b({_NUMBER})\s+({_UNIT})s?\s+ago\b", re.I)),
    ("relative_unit", re.compile(rf"\b(last|this|next|past|previous)\s+({_UNIT})\b", re.I)),
    ("weekday", re.compile(rf"\b(last|this|on|next)\s+({_WEEKDAY})\b", re.I)),
    ("named_day", re.compile(
        r"\b(today|tonight|yesterday|tomorrow|this (?:morning|evening|afternoon))\b", re.I
    )),
    ("year", re.compile(r"\b(?:in|during|since|of|from)\s+((?:19|20)\d{2})\b", re.I)),
]  # fmt: skip


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    g = m.groups()
    if kind == "iso":
        start = datetime(int(g[0]), int(g[1]), int(g[2]), tzinfo=UTC)
        return start, start + timedelta(days=1)
    if kind in ("day_month", "month_day"):
        day, month = (g[0], g[1]) if kind == "day_month" else (g[1], g[0])
        number = MONTHS[month.lower()]
        year = int(g[2]) if g[2] else now.year
        if not g[2] and datetime(year, number, 1, tzinfo=UTC) > now:
            year -= 1
        start = datetime(year, number, int(day), tzinfo=UTC)
        return start, start + timedelta(days=1)
    if kind == "month_year":
        return _month_range(int(g[1]), MONTHS[g[0].lower()])
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
        return (start, now) if word == "since" else (start, end)
    if kind == "ago":
        unit = g[1].lower()
        return _unit_range(unit, _ago(unit, _number(g[0]), now))
    if kind == "relative_unit":
        word, unit = g[0].lower(), g[1].lower()
        if word == "past" or (word == "previous" and unit == "day"):
            span = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[unit]
            return now - timedelta(days=span), now
        step = {"last": -1, "previous": -1, "this": 0, "next": 1}[word]
        return _unit_range(unit, _ago(unit, -step, now) if step else now)
    if kind == "weekday":
        target = WEEKDAYS[g[1].lower()]
        back = (now.weekday() - target) % 7 or (7 if g[0].lower() == "last" else 0)
        if g[0].lower() == "next":
            back = -((target - now.weekday()) % 7 or 7)
        start = _day(now) - timedelta(days=back)
        return start, start + timedelta(days=1)
    if kind == "named_day":
        word = g[0].lower()
        offset = {"yesterday": -1, "tomorrow": 1}.get(word, 0)
        start = _day(now) + timedelta(days=offset)
        return start, start + timedelta(days=1)
    if kind == "year":
        return _year_range(int(g[0]))
    return None


_RELATIVE = frozenset({"relative_month", "ago", "relative_unit", "weekday", "named_day"})
"""Expressions resolved against a reference day."""


def _dated_day(query: str) -> datetime | None:
    """The first day the query names with its year ("on 23 January, 2022", "2022-01-23")."""
    days: list[tuple[int, datetime]] = []
    for kind, pattern in _PATTERNS[:3]:  # iso, day_month, month_day
        for match in pattern.finditer(query):
            if kind != "iso" and not match.group(3):
                continue
            try:
                resolved = _resolve(kind, match, datetime.now(UTC))
            except (ValueError, OverflowError):
                continue
            if resolved is not None:
                days.append((match.start(), resolved[0]))
    return min(days, key=lambda d: d[0])[1] if days else None


def resolve_time_expressions(query: str, now: datetime | None = None) -> list[TimeRange]:
    """Every time expression of the query, resolved against `now` (default: the current time),
    except that relative ones ("last Friday", "two weeks ago") are resolved against the day
    the query names with its year, when it names one ("last weekend before April 10, 2023",
    "last week, as mentioned on November 6, 2023"). Overlapping matches keep the earliest,
    longest one."""
    reference = (now or datetime.now(UTC)).astimezone(UTC)
    anchor = _dated_day(query)
    relative = reference if anchor is None else anchor + timedelta(hours=12)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeRange]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            span = match.span()
            if any(span[0] < e and s < span[1] for s, e in taken):
                continue
            try:
                resolved = _resolve(kind, match, relative if kind in _RELATIVE else reference)
            except (ValueError, OverflowError):
                continue  # "31 February" and friends
            if resolved is None:
                continue
            taken.append(span)
            found.append((span[0], TimeRange(resolved[0], resolved[1], match.group(0))))
    return [r for _pos, r in sorted(found, key=lambda x: x[0])]
