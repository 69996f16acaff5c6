"""`lamina pin` / `lamina unpin`: hold parts of a context log raw or at a summary level.

    lamina pin session-42 --messages 120-180 --raw           # never fold the spec
    lamina pin session-42 --document CLAUDE.md --raw         # every read of that file, raw
    lamina pin session-42 --messages 0-400 --max-level 1     # fold, but no deeper than level 1
    lamina pin session-42 --messages 40-90 --level 2         # always as one level-2 summary
    lamina pin session-42                                     # list the log's pins
    lamina unpin session-42 messages-120-180

Message numbers are positions in the log, counted from 0 (`lamina logs show` prints them); a
range includes both ends. Pins take effect at the log's next compile (`lamina compile --bank`,
the HTTP API, the MCP server). See lamina.context.pins for what each kind holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..errors import InputError
from .common import bank_option, count_option, emit_json, json_option, open_logs, this_bank

if TYPE_CHECKING:
    from ..context.pins import Pin

__all__ = ["pin", "unpin"]


def _pin_json(pin: Pin) -> dict[str, Any]:
    from ..context.pins import pin_json

    return {**pin_json(pin), "description": pin.describe()}


@click.command("pin")
@click.argument("log")
@bank_option
@click.option("--messages", "span", metavar="FIRST-LAST", help="A message range, e.g. 120-180.")
@click.option("--document", metavar="NAME", help="A document or file, by title, path or name.")
@click.option("--raw", "raw", is_flag=True, help="Always show it raw.")
@count_option("--level", at_least=1, help="Always show it at this level.")
@count_option("--max-level", at_least=0, help="Fold it no deeper than this.")
@click.option("--name", help="The pin's name (default: from the range or the document).")
@json_option
@click.pass_context
def pin(
    ctx: click.Context,
    log: str,
    bank: str | None,
    span: str | None,
    document: str | None,
    raw: bool,
    level: int | None,
    max_level: int | None,
    name: str | None,
    as_json: bool,
) -> None:
    """Pin a message range or a document of a context log: keep it raw (--raw), at an exact
    summary level (--level N) or at most a level (--max-level N). With no range or document,
    list the log's pins. A pin of the same name is replaced.

    Example: lamina pin session-42 --messages 120-180 --raw
    """
    from ..context.pins import Pin, PinMode, parse_range

    bank_name = this_bank(ctx, bank)
    listing = span is None and document is None
    given = (("raw", raw), ("exact", level is not None), ("max", max_level is not None))
    modes = [m for m, on in given if on]  # --max-level 0 is given (raw is allowed, no folding)
    if listing and (modes or name):
        raise InputError("give --messages or --document to pin (or nothing, to list the pins)")
    if not listing and span is not None and document is not None:
        raise InputError("give --messages or --document, not both")
    if not listing and len(modes) != 1:
        raise InputError("say how to hold it: one of --raw, --level N, --max-level N")
    if not listing:
        mode: PinMode = modes[0]  # type: ignore[assignment]
        first = last = None
        if span is not None:
            try:
                start, end = parse_range(span)
            except ValueError as exc:
                raise InputError(f"--messages: {exc}") from None
            first, last = start, end - 1
        default = f"messages-{first}-{last}" if span is not None else str(document)
        held = {"raw": 0, "exact": level, "max": max_level}[mode] or 0
        new = Pin.given(name or default, mode, held, first, last, document)
    with open_logs(ctx) as logs:
        pins = logs.pins(bank_name, log) if listing else logs.pin(bank_name, log, new)
    if as_json:
        emit_json({"bank": bank_name, "log": log, "pins": [_pin_json(p) for p in pins]})
        return
    if not listing:
        click.echo(f"pinned: {new.describe()}")
    elif not pins:
        click.echo(f"no pins on {log!r}")
    for each in pins if listing else ():
        click.echo(each.describe())


@click.command("unpin")
@click.argument("log")
@click.argument("name")
@bank_option
@json_option
@click.pass_context
def unpin(ctx: click.Context, log: str, name: str, bank: str | None, as_json: bool) -> None:
    """Remove a pin from a context log, by name (see `lamina pin LOG` for the names).

    Example: lamina unpin session-42 messages-120-180
    """
    bank_name = this_bank(ctx, bank)
    with open_logs(ctx) as logs:
        logs.unpin(bank_name, log, name)
    if as_json:
        emit_json({"bank": bank_name, "log": log, "removed": name})
    else:
        click.echo(f"unpinned {name!r}")
