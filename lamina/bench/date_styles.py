"""Questions with their dates written another way: `lamina bench locomo --date-style`.

LoCoMo's questions write dates in words ("on 7 July, 2023", "in August 2023", "on Aug 15th").
`restyle` rewrites those phrases, and nothing else of the question, into one numeric style, so
the same questions can be asked as a user who writes dates in numbers would ask them:

| style | a day with its year | a month with its year | a day without its year |
|---|---|---|---|
| `words` | unchanged | unchanged | unchanged |
| `numeric-dmy` | `07.07.2023` | `07/2023` | `15/08` |
| `numeric-mdy` | `07/07/2023` | `07/2023` | `08/15` |
| `iso` | `2023-07-07` | `2023-07` | unchanged (ISO has no day without a year) |

Day and month are always two digits. A phrase is a day number (with an ordinal suffix, with
"of") and a month name or its abbreviation, in either order, with an optional comma and year;
or a month name and a year. A month named alone ("in May") and a year alone ("in 2023") have no
numeric form and stay as they are. The rule is fixed and reads nothing but the question, so it
cannot be tuned to what recall finds.
"""

from __future__ import annotations

import re
from typing import Literal

from ..text.calendar_names import MONTHS

__all__ = ["DATE_STYLES", "DateStyle", "date_phrases", "restyle"]

DateStyle = Literal["words", "numeric-dmy", "numeric-mdy", "iso"]
DATE_STYLES: tuple[DateStyle, ...] = ("words", "numeric-dmy", "numeric-mdy", "iso")

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20)\d{2}"
_PHRASE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH})\b\.?(?:,?\s*(?P<y1>{_YEAR}))?"
    rf"|(?P<m2>{_MONTH})\b\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(?P<y2>{_YEAR}))?"
    rf"|(?P<m3>{_MONTH})\b\.?,?\s*(?P<y3>{_YEAR}))(?!\d)",
    re.IGNORECASE,
)


def _parts(m: re.Match[str]) -> tuple[int | None, int, str | None]:
    """(day, month, year) of a phrase; day or year None when it has none."""
    day = m["d1"] or m["d2"]
    month = MONTHS[(m["m1"] or m["m2"] or m["m3"]).lower()]
    return (int(day) if day else None), month, m["y1"] or m["y2"] or m["y3"]


def date_phrases(question: str) -> list[re.Match[str]]:
    """The date phrases of a question that have a numeric form, in order."""
    return [m for m in _PHRASE.finditer(question) if 1 <= (_parts(m)[0] or 1) <= 31]


def _numeric(m: re.Match[str], style: DateStyle) -> str:
    day, month, year = _parts(m)
    mm = f"{month:02d}"
    if day is None:
        assert year is not None
        return f"{year}-{mm}" if style == "iso" else f"{mm}/{year}"
    dd = f"{day:02d}"
    if style == "iso":
        return f"{year}-{mm}-{dd}" if year else m.group(0)
    if style == "numeric-dmy":
        return f"{dd}.{mm}.{year}" if year else f"{dd}/{mm}"
    return f"{mm}/{dd}/{year}" if year else f"{mm}/{dd}"


def restyle(question: str, style: DateStyle) -> str:
    """The question with each of its date phrases written in `style`."""
    if style == "words":
        return question
    out: list[str] = []
    at = 0
    for m in date_phrases(question):
        out.append(question[at : m.start()])
        out.append(_numeric(m, style))
        at = m.end()
    out.append(question[at:])
    return "".join(out)
