"""Database commands: `lamina migrate` and `lamina copy`."""

from __future__ import annotations

import click

from ..errors import NotFoundError
from ..progress import Progress
from ..store import describe_target, open_store, sqlite_path
from .common import emit_json, json_option, settings

__all__ = ["copy_command", "migrate"]


@click.command()
@json_option
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Bring the database's schema up to date (first use does this too).

    Works on SQLite and PostgreSQL alike; safe to run from several hosts at once (one migrates,
    the others wait and find nothing left to do).

    Example: lamina --database-url postgresql://lamina@db/lamina migrate
    """
    target = settings(ctx).database
    store = open_store(target)
    try:
        applied = store.migrate()
    finally:
        store.close()
    if as_json:
        emit_json({"database": describe_target(target), "applied": applied})
        return
    where = describe_target(target)
    if applied:
        click.echo(f"{where}: applied {', '.join(applied)}")
    else:
        click.echo(f"{where}: up to date")


@click.command("copy")
@click.option("--from", "source", required=True, metavar="URL", help="Database to copy from.")
@click.option("--to", "target", required=True, metavar="URL", help="Database to copy into.")
@click.option(
    "--bank", "-b", "banks", multiple=True, metavar="NAME", help="Only this bank (repeatable)."
)
@click.option("--no-api-keys", is_flag=True, help="Leave API keys behind.")
@json_option
def copy_command(
    source: str, target: str, banks: tuple[str, ...], no_api_keys: bool, as_json: bool
) -> None:
    """Copy banks between databases (SQLite <-> PostgreSQL), without loss, resumable.

    Documents, cursors, retained record ids, memories with their vectors, context logs with
    their summaries and last frontier, and API keys. Each document is copied in one
    transaction; run the command again after an interruption and it skips what is already
    there.

    Example: lamina copy --from ~/.local/share/lamina/lamina.db --to postgresql://lamina@db/lamina
    """
    from ..store.copy import copy_banks

    if source == target:
        raise click.BadParameter("source and target are the same database", param_hint="--to")
    source_file = sqlite_path(source)
    if source_file is not None and not source_file.is_file():
        # Opening it would create an empty database and copy nothing, successfully.
        raise NotFoundError(f"{describe_target(source)}: no such database file (--from)")
    src, dst = open_store(source), open_store(target)
    bars: dict[str, Progress] = {}

    def tell(bank: str, done: int, total: int) -> None:
        bar = bars.get(bank)
        if bar is None:
            bar = bars[bank] = Progress(f"copying {bank}", total=total, unit="documents")
        bar.update(done)

    def note(bank: str, text: str) -> None:
        bar = bars.pop(bank, None)
        if bar is not None:
            bar.close()
        click.echo(f"{bank}: {text}", err=True)

    try:
        report = copy_banks(
            src, dst, banks or None, api_keys=not no_api_keys, progress=tell, note=note
        )
    finally:
        for bar in bars.values():
            bar.close()
        src.close()
        dst.close()
    if as_json:
        emit_json(
            {"from": describe_target(source), "to": describe_target(target)} | report.as_dict()
        )
        return
    for bank in report.banks:
        click.echo(
            f"{bank.bank}: {bank.copied} documents copied ({bank.memories} memories,"
            f" {bank.records} records), {bank.skipped} already there; {bank.logs} context logs"
            f" ({bank.log_messages} messages, {bank.summaries} summaries copied)"
        )
    if not no_api_keys:
        click.echo(
            f"API keys: {report.api_keys_copied} copied, {report.api_keys_skipped} already there"
        )
