"""`lamina logs`: the context logs kept in a bank (by `lamina compile --bank`, the HTTP API's
`/v1/banks/{bank}/logs` and the MCP server's `append_to_log` / `compile_log`).

Each command is a thin call into `lamina.context.logs.ContextLogs`; without `--bank`, the bank
of the current directory's project is used, as for the other bank commands.
"""

from __future__ import annotations

from typing import Any

import click

from ..context.pins import Pin
from .common import bank_option, confirm_or_yes, emit_json, json_option, open_logs, this_bank

__all__ = ["logs"]


@click.group()
def logs() -> None:
    """Context logs kept in a bank: list them, show one, delete one."""


@logs.command("list")
@bank_option
@json_option
@click.pass_context
def logs_list(ctx: click.Context, bank: str | None, as_json: bool) -> None:
    """The bank's context logs: messages, tokens, summaries, last update.

    Example: lamina logs list --bank my-project
    """
    name = this_bank(ctx, bank)
    with open_logs(ctx) as context_logs:
        rows, _ = context_logs.listing(name)
    if as_json:
        emit_json({"bank": name, "logs": rows})
        return
    if not rows:
        click.echo(f"no context logs in bank {name!r}")
        return
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        click.echo(
            f"{r['id']:<{width}}  {r['messages']:>6,} messages  {r['tokens']:>9,} tokens  "
            f"{r['summaries']:>5,} summaries  updated {r['updated'][:19]}"
        )


@logs.command("show")
@click.argument("log")
@bank_option
@json_option
@click.pass_context
def logs_show(ctx: click.Context, log: str, bank: str | None, as_json: bool) -> None:
    """One context log: messages, tokens, summaries by level, and what its last compile kept
    raw and folded.

    Example: lamina logs show session-42 --bank my-project
    """
    name = this_bank(ctx, bank)
    with open_logs(ctx) as context_logs:
        data = context_logs.describe(name, log)
    if as_json:
        emit_json(data)
        return
    out = [
        f"{data['id']}  (bank {name})",
        f"  messages      {data['messages']:,}  ({data['tokens']:,} tokens)",
        f"  summaries     {data['summaries']:,}"
        + "".join(
            f"  level {level}: {v['count']:,} ({v['tokens']:,} tokens)"
            for level, v in data["summaries_by_level"].items()
        ),
    ]
    frontier: dict[str, Any] | None = data["last_frontier"]
    if frontier is None:
        out.append("  last compile  none yet")
    else:
        shown = ", ".join(
            f"level {k}: {v}" for k, v in frontier["summaries_shown_by_level"].items()
        )
        out.append(
            f"  last compile  {frontier['tokens']:,} tokens; {frontier['raw_messages']:,} "
            f"messages raw, {frontier['folded_messages']:,} folded"
            + (f" into summaries ({shown})" if shown else "")
        )
    for shown in data["pins"]:
        first, last = shown["messages"] or (None, None)
        pin = Pin.given(
            shown["name"], shown["mode"], shown["level"], first, last, shown["document"]
        )
        out.append(f"  pin           {pin.name}: {pin.holding()}")
    out.append(f"  updated       {data['updated']}")
    click.echo("\n".join(out))


@logs.command("delete")
@click.argument("log")
@bank_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def logs_delete(ctx: click.Context, log: str, bank: str | None, yes: bool, as_json: bool) -> None:
    """Delete a context log with its summaries and last frontier (asks first unless --yes).

    Example: lamina logs delete session-42 --bank my-project --yes
    """
    name = this_bank(ctx, bank)
    with open_logs(ctx) as context_logs:
        info = context_logs.find(name, log)
        confirm_or_yes(
            f"delete log {log!r} of bank {name!r} ({info.messages:,} messages, "
            f"{info.summaries:,} summaries)?",
            yes=yes,
            as_json=as_json,
        )
        context_logs.delete(name, log)
    if as_json:
        emit_json({"bank": name, "log": log, "deleted": True})
    else:
        click.echo(f"deleted log {log!r} of bank {name!r}")
