"""Month and weekday names (English, full and abbreviated), shared by every date parser."""

from __future__ import annotations

__all__ = ["MONTHS", "WEEKDAYS"]

MONTHS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
"""Lowercase month name or abbreviation -> month number (1-12)."""

WEEKDAYS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        [
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thur", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        ]
    )
    for name in names
}
"""Lowercase weekday name or abbreviation -> weekday number (Monday 0)."""
