"""The inspector's page as first sent: `index.html` with the caller's banks already in it.

A browser signed in (its session cookie) gets the bank cards rendered here, in `<main>`, and
the same data as JSON for the script (`#lamina-initial`), so the first paint shows the banks
instead of "Loading…" and the script starts without asking for them again. A caller the gate
does not let in (a key is needed: a page load carries no `Authorization`) gets the page as it
is, and the script asks for a key. Every text from the store is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import orjson

from .api.models import BankDetail

__all__ = ["INITIAL_BANKS", "MAIN_PLACEHOLDER", "first_page"]

INITIAL_BANKS = 200
"""Banks rendered into the page at most (the script pages through the rest)."""
MAIN_PLACEHOLDER = '<p class="muted">Loading…</p>'


_NOT_ON_CARD: set[str] = {"created_at", "last_document"}
"""`BankDetail`'s fields that a card neither shows nor hands to the script."""


def _num(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


def _when(value: datetime | None) -> str:
    """As the script's `when`: UTC, to the minute."""
    if value is None:
        return "—"
    from datetime import UTC

    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M") + " UTC"


def _bytes(n: int | None) -> str:
    if n is None:
        return "—"
    units = ["B", "KB", "MB", "GB", "TB"]
    size, i = float(n), 0
    while size >= 1024 and i < len(units) - 1:
        size, i = size / 1024, i + 1
    return f"{size:.1f} {units[i]}" if i else f"{size:.0f} {units[i]}"


def _card(d: BankDetail) -> str:
    e = html.escape
    link = e(_quote(d.bank), quote=True)
    size = (
        _bytes(d.bank_bytes)
        if d.bank_bytes is not None
        else (f"{_bytes(d.database_bytes)} (whole database)")
    )
    logs = f'<a href="#/logs?bank={link}">{_num(d.logs)}</a>' if d.logs else "0"
    first, last = (_when(d.first_time), _when(d.last_time)) if d.first_time else ("undated",) * 2
    facts = [
        ("documents", "", e(_num(d.documents))),
        ("memories", "", e(_num(d.memories))),
        ("records", "", e(_num(d.records))),
        ("embedded", "", e(_num(d.embedded))),
        ("embedder", "", e(", ".join(d.embedders) or "none")),
        ("last retain", "date", e(_when(d.last_retain))),
        ("first", "date", e(first)),
        ("last", "date", e(last)),
        ("context logs", "", logs),
        ("size on disk", "", e(size)),
    ]
    rows = "".join(
        f'<dt>{name}</dt><dd class="{kind}">{value}</dd>'
        if kind
        else f"<dt>{name}</dt><dd>{value}</dd>"
        for name, kind, value in facts
    )
    return (
        f'<section class="card" aria-label="Bank {e(d.bank, quote=True)}">'
        f'<h3><a href="#/memories?bank={link}">{e(d.bank)}</a></h3>'
        f'<dl class="facts">{rows}</dl>'
        f'<div class="row" style="margin-top:8px"><a href="#/memories?bank={link}">Memories</a>'
        f'<a href="#/recall?bank={link}">Recall</a></div></section>'
    )


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _json_in_script(data: object) -> str:
    """JSON safe inside a `<script>` element (no `</script>`, no `<!--`)."""
    return orjson.dumps(data).decode().replace("<", "\\u003c").replace(">", "\\u003e")


def first_page(
    index: Path, banks: Sequence[str], detail: Callable[[str], BankDetail], hook_budget: int
) -> str:
    """`index` with `banks` (the caller's, in order) rendered as the bank list (the first
    INITIAL_BANKS); `detail` gives one bank's facts, `hook_budget` the prompt hook's budget."""
    shown = [detail(name) for name in banks[:INITIAL_BANKS]]
    if shown:
        body = '<div class="cards">' + "".join(_card(d) for d in shown) + "</div>"
    else:
        body = (
            '<p class="empty">No banks yet. Retain a transcript with: '
            "lamina retain FILE --bank NAME</p>"
        )
    initial = {
        "banks": [{"bank": d.bank, "documents": d.documents, "memories": d.memories}
                  for d in shown],
        "details": [d.model_dump(mode="json", exclude=_NOT_ON_CARD) for d in shown],
        "complete": len(banks) <= INITIAL_BANKS,
        "hook_budget": hook_budget,
    }  # fmt: skip
    page = index.read_text(encoding="utf-8")
    main = f'<h2>Banks</h2>{body}<script type="application/json" id="lamina-initial">'
    main += _json_in_script(initial) + "</script>"
    return page.replace(MAIN_PLACEHOLDER, main, 1)
