"""Pieces every command module shares: the --json option and printing one JSON document."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from .output import emit_json

if TYPE_CHECKING:
    from pathlib import Path

    from ..bank.bank import MemoryBank
    from ..bank.retain import RetainOptions
    from ..config import Settings
    from ..context.logs import ContextLogs
    from ..store.base import Store

__all__ = [
    "bank_option",
    "confirm_or_yes",
    "count_option",
    "document_label",
    "document_names",
    "emit_json",
    "json_option",
    "open_bank",
    "open_logs",
    "report_install",
    "report_uninstall",
    "require_bank",
    "require_documents",
    "server_token",
    "settings",
    "this_bank",
    "when",
]


def settings(ctx: click.Context) -> Settings:
    """The settings of this command line (its --home and --database-url, the environment, the
    config file), resolved on first use and kept for the rest of the command."""
    from ..config import resolve_settings

    root = ctx.find_root()
    if root.obj is None:
        root.obj = {}
    found: Settings | None = root.obj.get("settings")
    if found is None:
        found = root.obj["settings"] = resolve_settings(
            home=root.obj.get("home"), database_url=root.obj.get("database_url")
        )
    return found


def this_bank(ctx: click.Context, bank: str | None = None, directory: str | None = None) -> str:
    """`bank`, else the bank of `directory`'s project (None: the working directory's) as the
    settings choose it (lamina.config.default_bank)."""
    from ..config import default_bank

    return bank or default_bank(directory, settings(ctx))


def open_bank(ctx: click.Context, retain_options: RetainOptions | None = None) -> MemoryBank:
    """The memory bank the command line's --home / --database-url (or their defaults) name."""
    from ..bank.bank import MemoryBank
    from ..embed import set_model_cache

    resolved = settings(ctx)
    set_model_cache(resolved.home / "cache")  # the optimised model, kept
    bank = MemoryBank.open(settings=resolved, retain_options=retain_options)
    exposed = getattr(bank.store, "exposed", None)
    for path in exposed() if exposed is not None else ():
        click.echo(f"warning: {path} is readable by other users; chmod go-rwx it", err=True)
    return bank


@contextmanager
def open_logs(ctx: click.Context) -> Iterator[ContextLogs]:
    """The context logs of the database `open_bank` opens, for the duration of the block."""
    from ..context.logs import ContextLogs
    from ..context.summarise import ExtractiveSummariser

    memory = open_bank(ctx)
    try:
        yield ContextLogs(memory.store, ExtractiveSummariser())  # no CLI log command summarises
    finally:
        memory.close()


def server_token(ctx: click.Context, store: Store) -> tuple[str | None, Path | None]:
    """For a server on loopback with no API key: the data directory's local token, which it
    asks of every request, and its file (None, None when keys exist: they are asked instead)."""
    from ..access import LOCAL_TOKEN_FILE, local_token

    if store.count_api_keys():
        return None, None
    home = settings(ctx).home
    return local_token(home), home / LOCAL_TOKEN_FILE


def require_bank(bank: MemoryBank, name: str) -> str:
    """`name` if the bank exists; `NotFoundError` (exit 2, one line) if it does not, so that a
    mistyped name fails instead of acting on an empty bank."""
    return bank.require_bank(name)


def require_documents(bank: MemoryBank, name: str, documents: Iterable[str]) -> list[str]:
    """The ids of `documents` in bank `name`, each given by its id or by the path of the file
    it was retained from (every document retained from that file); `NotFoundError` naming the
    first that matches nothing."""
    from pathlib import Path

    from ..errors import NotFoundError

    bank.require_bank(name)
    by_source: dict[str, list[str]] | None = None
    found: list[str] = []
    for document in documents:
        try:
            found.append(bank.require_document(name, document))
            continue
        except NotFoundError as exc:
            missing = exc
        if by_source is None:
            by_source = {}
            for doc in bank.documents(name):
                if doc.source:
                    by_source.setdefault(doc.source, []).append(doc.id)
        path = str(Path(document).expanduser().resolve())
        ids = by_source.get(document) or by_source.get(path)
        if not ids:
            raise missing
        found.extend(i for i in ids if i not in found)
    return found


def confirm_or_yes(question: str, *, yes: bool, as_json: bool) -> None:
    """Ask `question` on the terminal unless `--yes` was given; a no aborts (exit 130). With
    `--json` nobody is there to answer, so `--yes` is required."""
    from ..errors import InputError

    if yes:
        return
    if as_json:
        raise InputError("--json needs --yes (there is no one to confirm)")
    click.confirm(question, abort=True, err=True)


def report_install(
    target: str,
    scope: str,
    paths: dict[str, str],
    *,
    hooks: str,
    mcp: str,
    notes: list[str],
    as_json: bool,
) -> None:
    """What `lamina install AGENT` says: the files written (`paths`, named as the JSON names
    them), then where the hooks and the MCP server went (`hooks`, `mcp`: the lines' own
    words), the notes on stderr, and that the agent's next sessions remember."""
    if as_json:
        emit_json({"target": target, "scope": scope, **paths, "installed": True, "advice": notes})
        return
    click.echo(f"installed Lamina's hooks for {target} in {hooks}")
    click.echo(f"registered Lamina's MCP server as {mcp}")
    for line in notes:
        click.echo(f"note: {line}", err=True)
    name = target.capitalize()
    click.echo(f"new {name} sessions now recall before each prompt and retain after each turn")


def report_uninstall(
    target: str, scope: str, paths: dict[str, str], where: str, changed: bool, as_json: bool
) -> None:
    """What `lamina uninstall AGENT` says: the files looked at (`paths`, as the JSON names
    them; `where` in words) and whether Lamina's hooks and MCP server were taken out."""
    if as_json:
        emit_json({"target": target, "scope": scope, **paths, "removed": changed})
    elif changed:
        click.echo(f"removed Lamina's hooks and MCP server from {where}")
    else:
        click.echo(f"no Lamina hooks or MCP server in {where}")


def bank_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--bank/-b` (or LAMINA_BANK); None means the current directory's project bank."""
    return click.option(
        "--bank",
        "-b",
        default=None,
        envvar="LAMINA_BANK",
        help="Bank name (default: this directory's project bank; see `lamina banks`).",
    )(f)


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(f)


def count_option(
    *decls: str,
    at_least: int,
    default: int | tuple[int, ...] | None = None,
    help: str | None = None,
    show_default: bool | None = None,
    **more: Any,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An option that takes a whole number of at least `at_least`; its default is shown in the
    help when it has one (unless `show_default` says otherwise)."""
    shown = default is not None if show_default is None else show_default
    return click.option(
        *decls,
        type=click.IntRange(min=at_least),
        default=default,
        show_default=shown,
        help=help,
        **more,
    )


def count(n: object, one: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories` (`many` defaults to `one` + s); anything but an int counts 0
    (a value read from a report)."""
    number = n if isinstance(n, int) else 0
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def when(moment: datetime, *, age: bool = False, now: datetime | None = None) -> str:
    """A time for people: local, to the minute (`2026-03-14 09:15`), with how long ago when
    `age` (`2026-03-14 09:15, 3 hours ago`)."""
    local = moment.astimezone() if moment.tzinfo is not None else moment
    text = f"{local:%Y-%m-%d %H:%M}"
    if not age:
        return text
    then = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    if seconds < 60:
        return f"{text}, just now"
    for size, unit in ((86400.0, "day"), (3600.0, "hour"), (60.0, "minute")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{text}, {n} {unit}{'' if n == 1 else 's'} ago"
    return text


def document_label(document: str, source: str | None, *, short: bool = False) -> str:
    """How people see a document: the name of the file it was retained from, its id beside it
    (`session.jsonl (7c1e4b2a-...)`; the first 8 characters when `short`), or the id alone
    when no file is known or the file is named by the id already."""
    if not source:
        return document
    from pathlib import PurePath

    name = PurePath(source).name or source
    if document in (name, PurePath(name).stem):
        return name
    return f"{name} ({document[:8] if short and len(document) > 12 else document})"


def document_names(
    bank: MemoryBank, name: str, documents: Iterable[str], *, short: bool = False
) -> dict[str, str]:
    """`document_label` of each of `documents` of bank `name`, looked up one by one (a recall
    shows a handful of documents: the bank's list is not read for them)."""
    labels: dict[str, str] = {}
    for document in documents:
        if document not in labels:
            found = bank.store.get_document(name, document)
            labels[document] = document_label(
                document, found.source if found else None, short=short
            )
    return labels
