"""The memory-bank commands: retain, recall, banks, documents, forget, reindex.

Each is a thin call into `lamina.bank.MemoryBank`. Without `--bank`, the bank of the current
directory's project is used (`lamina.config.default_bank`), the same one the Claude Code plugin
uses there.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions
from ..errors import InputError, NotFoundError
from ..progress import Progress, clear_line

if TYPE_CHECKING:
    from ..bank.expand import QueryExpander
    from ..bank.retain import RetainReport
    from ..llm.spend import SpendCaps
from .common import (
    bank_option,
    confirm_or_yes,
    count,
    count_option,
    document_label,
    document_names,
    emit_json,
    json_option,
    open_bank,
    require_bank,
    require_documents,
    settings,
    this_bank,
    when,
)

__all__ = [
    "banks",
    "documents",
    "export_command",
    "forget",
    "hook_command",
    "hook_worker_command",
    "import_command",
    "recall",
    "reindex",
    "retain",
]


def _open(ctx: click.Context, *, embed: bool = True, facts_model: str | None = None) -> MemoryBank:
    """The bank, with these retain options; the defaults are left to the bank, so a command
    that does not retain (recall) does not import the retain pipeline and its redaction."""
    if embed and not facts_model:
        return open_bank(ctx)
    from ..bank.retain import RetainOptions

    extractor = None
    if facts_model:
        from ..bank.extract import FactExtractor
        from ..llm import get_llm

        extractor = FactExtractor(get_llm(facts_model))
    memory_bank = open_bank(ctx, RetainOptions(embed=embed, extractor=extractor))
    if extractor is not None:
        extractor.caps = _caps(ctx, memory_bank)
    return memory_bank


def _caps(ctx: click.Context, memory_bank: MemoryBank) -> SpendCaps:
    """The configured spend caps (`summariser_tokens_per_hour` / `_per_day`, shared by every
    model call), the spending kept in the bank's store so they hold across processes."""
    from ..llm.spend import SpendCaps
    from ..store.ledger import StoreSpendLedger

    caps = settings(ctx).summariser
    return SpendCaps(StoreSpendLedger(memory_bank.store), caps.tokens_per_hour, caps.tokens_per_day)


def _expander(ctx: click.Context, memory_bank: MemoryBank, spec: str) -> QueryExpander:
    """A query expander over the model `spec`, under the configured spend caps."""
    from ..bank.expand import QueryExpander
    from ..llm import get_llm

    return QueryExpander(get_llm(spec), caps=_caps(ctx, memory_bank))


SHOWN = 5
"""Memories `lamina recall` shows without `--full`."""

LINES = 3
"""Lines of each memory `lamina recall` shows without `--full`."""


def _date(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{name}: not a date or date-time: {value!r} (use 2026-03-14)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@bank_option
@click.option("--document-id", default=None, help="Document id (default: session id or file name).")
@click.option("--tag", "tags", multiple=True, help="Tag the document (repeatable).")
@click.option("--format", "fmt", default=None, metavar="NAME", help="Transcript format.")
@click.option("--no-embed", is_flag=True, help="Store without vectors (fill later: reindex).")
@click.option(
    "--facts",
    "facts_model",
    default=None,
    envvar="LAMINA_FACTS_MODEL",
    metavar="PROVIDER:MODEL",
    help="Also extract facts with a model, e.g. anthropic:claude-haiku-4-5 (optional).",
)
@json_option
@click.pass_context
def retain(
    ctx: click.Context,
    paths: tuple[str, ...],
    bank: str | None,
    document_id: str | None,
    tags: tuple[str, ...],
    fmt: str | None,
    no_embed: bool,
    facts_model: str | None,
    as_json: bool,
) -> None:
    """Add transcripts, or what is new in them, to a bank.

    Retaining again reads only what was added since; an unchanged file costs a few
    milliseconds. Directories are searched for *.jsonl and *.json files.

    Example: lamina retain ~/.claude/projects/my-project/*.jsonl --bank my-project
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in (".jsonl", ".json"))
            if not found and len(paths) == 1:
                raise InputError(f"{raw}: nothing to retain (no *.jsonl or *.json files in it)")
            if not found:
                click.echo(f"warning: {raw}: no *.jsonl or *.json files in it", err=True)
            files += found
        else:
            files.append(path)
    if not files:
        raise InputError(f"{', '.join(paths)}: nothing to retain (no *.jsonl or *.json files)")
    if document_id and len(files) > 1:
        raise InputError("--document-id names one document; give one file with it")
    from ..readers import reader_for

    name = this_bank(ctx, bank)
    memory_bank = _open(ctx, embed=not no_embed, facts_model=facts_model)
    retained: list[tuple[Path, RetainReport]] = []
    failures: list[dict[str, str]] = []
    first_error: InputError | None = None
    stages: dict[str, Progress] = {}

    def tell(stage: str, done: int, total: int) -> None:
        bar = stages.get(stage)
        if bar is None or bar.total != total:
            for old in stages.values():
                old.close()
            bar = stages[stage] = Progress(
                stage, total=total, unit="B" if stage == "reading" else "units"
            )
        bar.update(done)

    memory_bank.progress = tell
    with Progress("retaining", total=len(files), unit="files") as progress:
        for number, path in enumerate(files, 1):
            try:
                # A format the file plainly is not fails here, before a document is made.
                checked = reader_for(str(path), fmt).name if fmt and path.is_file() else fmt
                # Every file's text first (recalled by its words once committed); the
                # vectors of all of them after, so the model is loaded once they are read.
                report = memory_bank.retain_file(
                    path, name, document=document_id, format=checked, tags=tags,
                    vectors_later=True,
                )  # fmt: skip
            except InputError as exc:
                clear_line()
                click.echo(f"error: {exc}", err=True)
                failures.append({"path": str(path), "error": str(exc)})
                first_error = first_error or exc
                continue
            clear_line()  # the file's result starts a line of its own
            for warning in report.warnings[:20]:
                click.echo(f"warning: {warning}", err=True)
            retained.append((path, report))
            if not as_json:
                click.echo(
                    f"{path}: {report.status}, {report.new_records} new records, "
                    f"{report.memories_added} memories added, {report.memories_updated} updated"
                    + (f", {report.redactions} secrets redacted" if report.redactions else "")
                    + (f", {report.facts} facts" if facts_model else "")
                )
            for error in report.fact_errors[:5]:
                click.echo(f"warning: fact extraction failed for {error}", err=True)
            progress.update(number)
    memory_bank.fill_vectors([report for _path, report in retained], name)
    for bar in stages.values():
        bar.close()
    reports = [{"path": str(path), **report.as_dict()} for path, report in retained]
    expired = _expire(ctx, memory_bank, name) if reports else 0
    if expired and not as_json:
        click.echo(f"{name}: forgot {expired} memories older than retain_days")
    if as_json:
        result: dict[str, Any] = {
            "bank": name,
            "files": reports,
            "failed": failures,
            "expired": expired,
        }
        if first_error is not None and not reports:  # nothing retained: an error, as any other
            from .main import error_type

            message = str(first_error) if len(failures) == 1 else "no file could be retained"
            result["error"] = {"type": error_type(first_error), "message": message}
        emit_json(result)
    if failures and not reports:
        sys.exit(2)


@click.command()
@click.argument("query")
@bank_option
@count_option("--budget", at_least=1, default=1024, help="Tokens the memories may take.")
@count_option(
    "--limit", at_least=1, default=50, help="Most memories to return (the budget may allow fewer)."
)
@click.option(
    "--document",
    "documents",
    multiple=True,
    help="Only these documents (ids, or paths of retained files).",
)
@click.option("--tag", "tags", multiple=True, help="Only documents with one of these tags.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    help="Only sessions of this agent: claude-code, codex, gemini or copilot (repeatable).",
)
@click.option("--since", default=None, help="Only memories from this date on (ISO 8601).")
@click.option("--until", default=None, help="Only memories up to this date (ISO 8601).")
@click.option("--block", is_flag=True, help="Print the <lamina_memories> block for a prompt.")
@click.option(
    "--full",
    is_flag=True,
    help=f"Every memory found, whole (default: the best {SHOWN}, a few lines of each).",
)
@click.option(
    "--show-wrong",
    is_flag=True,
    help="Also show memories marked wrong (`lamina memory wrong`), last, with their mark.",
)
@click.option(
    "--expand-with",
    "expand_model",
    default=None,
    envvar="LAMINA_QUERY_EXPANDER",
    help="Also ask a model for search queries in the words the answer was likely said in, "
    "e.g. anthropic:claude-haiku-4-5 (optional; spend capped like summaries).",
)
@json_option
@click.pass_context
def recall(
    ctx: click.Context,
    query: str,
    bank: str | None,
    budget: int,
    limit: int,
    documents: tuple[str, ...],
    tags: tuple[str, ...],
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    block: bool,
    full: bool,
    show_wrong: bool,
    expand_model: str | None,
    as_json: bool,
) -> None:
    """The memories that best answer QUERY, within a token budget.

    Shows the best few, each cut to a few lines, with the file each comes from; `--full`
    shows every memory found, whole, and `--json` gives them all with every field. A memory
    marked wrong is not shown (--show-wrong: shown last, marked); one superseded by a newer
    memory yields to it (`lamina memory`).

    Example: lamina recall "which database did we pick?" --bank my-project
    Example: lamina recall "why did we drop the cache?" --agent codex
    """
    name = this_bank(ctx, bank)
    since_date, until_date = _date(since, "--since"), _date(until, "--until")
    memory_bank = _open(ctx)
    chosen = require_documents(memory_bank, name, documents)
    scope = frozenset(chosen) if chosen else None
    if agents:
        scope = memory_bank.agent_documents(name, agents, chosen)
    options = RecallOptions(
        budget=budget,
        limit=limit,
        documents=scope,
        tags=frozenset(tags) if tags else None,
        since=since_date,
        until=until_date,
        framed=block,
        show_wrong=show_wrong,
    )
    expander = _expander(ctx, memory_bank, expand_model) if expand_model else None
    result = memory_bank.recall(query, name, options, expander=expander)
    if result.expansion is not None and not as_json:
        if result.expansion.skipped:
            click.echo(f"warning: query not expanded: {result.expansion.skipped}", err=True)
        else:
            click.echo(f"expanded with: {'; '.join(result.expansion.queries)}", err=True)
    if as_json:
        emit_json({"bank": name, **result.as_dict()})
        return
    if block:
        click.echo(result.block())
        return
    if not result.hits:
        click.echo("no memories found", err=True)
        return
    hits = result.hits if full else result.hits[:SHOWN]
    names = document_names(memory_bank, name, (h.memory.document for h in hits), short=not full)
    width = min(shutil.get_terminal_size((100, 24)).columns, 100) - 4
    for rank, hit in enumerate(hits, 1):
        said = when(hit.time) if hit.time else "undated"
        head = f"[{rank}] {names[hit.memory.document]}  {said}  score {hit.score:.3f}"
        if not full:
            click.echo(head)
            if hit.correction:
                click.echo(f"    ({_correction_note(hit.correction)})")
            for line in [line for line in hit.text.splitlines() if line.strip()][:LINES]:
                click.echo(f"    {line if len(line) <= width else line[: width - 1] + '…'}")
            continue
        why = ", ".join(f"{k} #{int(v['rank'])}" for k, v in hit.channels.items())
        click.echo(f"{head} ({why})")
        if hit.correction:
            click.echo(f"    ({_correction_note(hit.correction)})")
        for line in hit.text.splitlines():
            click.echo(f"    {line}")
    if len(hits) < len(result.hits):
        click.echo(
            f"{len(hits)} of {len(result.hits)} memories shown; --full shows them all, whole",
            err=True,
        )


@click.command()
@json_option
@click.pass_context
def banks(ctx: click.Context, as_json: bool) -> None:
    """The banks in the data directory, with their sizes.

    Example: lamina banks --json
    """
    memory_bank = _open(ctx)
    rows = []
    for bank in memory_bank.banks():
        stats = memory_bank.stats(bank.name)
        rows.append(
            {
                "bank": bank.name,
                "documents": stats.documents,
                "memories": stats.memories,
                "records": stats.records,
                "embedded": stats.embedded,
                "embedders": dict(stats.embedders),
                "first_time": stats.first_time.isoformat() if stats.first_time else None,
                "last_time": stats.last_time.isoformat() if stats.last_time else None,
            }
        )
    if as_json:
        emit_json({"default": this_bank(ctx), "banks": rows})
        return
    if not rows:
        click.echo("no banks yet (lamina retain FILE creates one)")
    for row in rows:
        mark = " (this directory)" if row["bank"] == this_bank(ctx) else ""
        click.echo(
            f"{row['bank']}{mark}: {count(row['documents'], 'document', 'documents')}, "
            f"{count(row['memories'], 'memory', 'memories')}, "
            f"{count(row['records'], 'record', 'records')}"
        )


@click.command()
@bank_option
@json_option
@click.pass_context
def documents(ctx: click.Context, bank: str | None, as_json: bool) -> None:
    """The documents retained in a bank.

    Example: lamina documents --bank my-project
    """
    name = this_bank(ctx, bank)
    memory_bank = _open(ctx)
    docs = memory_bank.documents(require_bank(memory_bank, name))
    if as_json:
        emit_json(
            {
                "bank": name,
                "documents": [
                    {
                        "id": d.id,
                        "source": d.source,
                        "format": d.format,
                        "tags": list(d.tags),
                        "metadata": dict(d.metadata),
                        "created_at": d.created_at.isoformat(),
                        "updated_at": d.updated_at.isoformat(),
                    }
                    for d in docs
                ],
            }
        )
        return
    if not docs:
        click.echo(f"no documents in bank {name}", err=True)
    for d in docs:
        where = f"  {d.source}" if d.source else ""
        click.echo(f"{document_label(d.id, d.source)}  retained {when(d.updated_at)}{where}")


def _expire(ctx: click.Context, memory_bank: MemoryBank, bank: str) -> int:
    """Forget the bank's memories older than `retain_days` (config file); how many went."""
    days = settings(ctx).retain_days
    if days is None:
        return 0
    return memory_bank.forget_before(bank, datetime.now(UTC) - timedelta(days=days))


_AGE_UNITS = {"d": 1.0, "w": 7.0, "h": 1 / 24}


def older_than(value: str, now: datetime | None = None) -> datetime:
    """The moment `--older-than` names: an age (`30d`, `12w`, `36h`; a bare number is days)
    before now, or a date or date-time (ISO 8601, UTC unless it says otherwise)."""
    text = value.strip().lower()
    unit = text[-1:] if text[-1:] in _AGE_UNITS else "d"
    number = text[:-1] if text[-1:] in _AGE_UNITS else text
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if number and amount >= 0 and amount == amount and amount < 1e6:  # not NaN, not huge
        return (now or datetime.now(UTC)) - timedelta(days=amount * _AGE_UNITS[unit])
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InputError(
            f"--older-than: not an age or a date: {value!r} (use 30d, 12w, 36h or 2026-01-31)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@click.command()
@click.argument("document", required=False)
@bank_option
@click.option("--memory", "memory_id", default=None, help="Forget one memory by id instead.")
@click.option(
    "--older-than",
    "age",
    default=None,
    metavar="AGE|DATE",
    help="Forget every memory of the bank older than this: 30d, 12w, 36h, or a date "
    "(2026-01-31). Memories without a time stay.",
)
@click.option(
    "--all-of-bank",
    "all_of_bank",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[NAME]",
    help="Delete the whole bank, NAME or --bank's (asks first).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (--all-of-bank).")
@json_option
@click.pass_context
def forget(
    ctx: click.Context,
    document: str | None,
    bank: str | None,
    memory_id: str | None,
    age: str | None,
    all_of_bank: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Forget a document (its memories and records), one memory, old memories, or a whole bank.

    DOCUMENT is a document's id or the path of the file it was retained from. A name that does
    not exist is an error (exit 2), not a silent no-op. `--older-than 30d` forgets what
    happened more than 30 days ago (`retain_days` in the config file does it after every
    retain).

    Example: lamina forget 7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17 --bank my-project

    Example: lamina forget --older-than 90d --bank my-project

    Example: lamina forget --all-of-bank my-project
    """
    chosen = sum(
        [document is not None, memory_id is not None, age is not None, all_of_bank is not None]
    )
    if chosen != 1:
        raise InputError(
            "give exactly one of: DOCUMENT, --memory ID, --older-than AGE, --all-of-bank [NAME]"
        )
    if all_of_bank and bank and all_of_bank != bank:
        raise InputError(f"--all-of-bank {all_of_bank} and --bank {bank} name two banks")
    cutoff = older_than(age) if age is not None else None
    name = all_of_bank or this_bank(ctx, bank)
    memory_bank = _open(ctx)
    require_bank(memory_bank, name)
    if all_of_bank is not None:
        stats = memory_bank.stats(name)
        sizes = (
            f"{count(stats.documents, 'document', 'documents')}, "
            f"{count(stats.memories, 'memory', 'memories')}"
        )
        confirm_or_yes(f"delete bank {name!r} ({sizes})?", yes=yes, as_json=as_json)
        result: dict[str, Any] = {"bank": name, "deleted_bank": memory_bank.delete_bank(name)}
        said = f"deleted bank {name} ({sizes})"
    elif memory_id is not None:
        if not memory_bank.forget_memory(name, memory_id):
            raise NotFoundError(f"no memory {memory_id!r} in bank {name!r}")
        result = {"bank": name, "memory": memory_id, "forgotten": True}
        said = f"forgot memory {memory_id} of bank {name}"
    elif cutoff is not None:
        moment = cutoff.astimezone(UTC).isoformat(timespec="seconds")
        gone = memory_bank.forget_before(name, cutoff)
        result = {"bank": name, "older_than": moment, "memories_forgotten": gone}
        said = (
            f"forgot {count(gone, 'memory', 'memories')} of bank {name} from before {when(cutoff)}"
        )
    else:
        assert document is not None
        ids = require_documents(memory_bank, name, [document])
        names = document_names(memory_bank, name, ids)
        gone = sum(memory_bank.forget_document(name, i) for i in ids)
        result = {
            "bank": name,
            "document": ids[0] if len(ids) == 1 else document,
            "documents": ids,
            "memories_forgotten": gone,
        }
        said = (
            f"forgot {', '.join(names[i] for i in ids)} from bank {name}: "
            f"{count(gone, 'memory', 'memories')}"
        )
    if as_json:
        emit_json(result)
    else:
        click.echo(said)


@click.command()
@bank_option
@click.option("--all", "every_bank", is_flag=True, help="Every bank of the data directory.")
@click.option("--force", is_flag=True, help="Embed every memory again, not only stale ones.")
@click.option(
    "--entities",
    is_flag=True,
    help="Also extract the memories' names and identifiers again (banks retained before the "
    "entity channel have none).",
)
@json_option
@click.pass_context
def reindex(
    ctx: click.Context,
    bank: str | None,
    every_bank: bool,
    force: bool,
    entities: bool,
    as_json: bool,
) -> None:
    """Embed again the memories whose vectors are missing or from another model.

    The model is the configured one (LAMINA_EMBEDDER, the config file's `embedder`), else the
    default: a bank embedded by an earlier default keeps using that model until this moves it.
    An interrupted run keeps what it wrote; running it again goes on from there.

    Example: lamina reindex --bank my-project --entities
    """
    if every_bank and bank:
        raise InputError("give --bank or --all, not both")
    memory_bank = _open(ctx)
    if every_bank:
        names = [b.name for b in memory_bank.banks()]
    else:
        names = [require_bank(memory_bank, this_bank(ctx, bank))]
    model = memory_bank.embedder.name
    results: list[dict[str, object]] = []
    for name in names:
        with Progress(f"embedding {name}", unit="memories", leave=True) as bar:

            def tell(_stage: str, done: int, total: int, bar: Progress = bar) -> None:
                bar.total = total
                bar.update(done)

            memory_bank.progress = tell
            done = memory_bank.reindex(name, force=force)
        result: dict[str, object] = {"bank": name, "embedded": done, "embedder": model}
        if entities:
            result["entities_updated"] = memory_bank.refresh_entities(name)
        results.append(result)
        if not as_json:
            click.echo(f"{name}: {done} memories embedded with {model}")
            if entities:
                click.echo(
                    f"{name}: entities extracted again for {result['entities_updated']} memories"
                )
    if as_json:
        emit_json({"banks": results} if every_bank else results[0])


@click.command("export")
@bank_option
@click.option("--output", "-o", default="-", help="File to write (default: stdout).")
@click.option("--no-embeddings", is_flag=True, help="Leave vectors out (recomputed on import).")
@click.option(
    "--json", "as_json", is_flag=True, help="With -o FILE: print what was written as JSON."
)
@click.pass_context
def export_command(
    ctx: click.Context, bank: str | None, output: str, no_embeddings: bool, as_json: bool
) -> None:
    """Write a bank as JSON Lines: documents, cursors, records, memories (and vectors).

    Example: lamina export --bank my-project -o my-project.jsonl
    """
    from ..bank.transfer import export_bank

    if as_json and output == "-":
        raise InputError("--json needs -o FILE (the export itself goes to stdout otherwise)")
    name = this_bank(ctx, bank)
    memory_bank = _open(ctx)
    require_bank(memory_bank, name)  # before the output file is opened: no empty file left
    lines = export_bank(memory_bank.store, name, with_embeddings=not no_embeddings)
    if output == "-":
        for line in lines:
            sys.stdout.buffer.write(line)
        sys.stdout.flush()
        return
    written = size = 0
    from ..owned import private_opener

    # An export holds every memory of the bank: readable by its owner alone, like the database.
    with open(output, "wb", opener=private_opener) as handle:
        for line in lines:
            handle.write(line)
            written += 1
            size += len(line)
    if as_json:
        emit_json({"bank": name, "output": output, "lines": written, "bytes": size})
    else:
        click.echo(f"exported {name} to {output}", err=True)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--bank", "-b", default=None, help="Import into this bank (default: its own name).")
@click.option("--no-reindex", is_flag=True, help="Do not embed memories that came without vectors.")
@json_option
@click.pass_context
def import_command(
    ctx: click.Context, file: str, bank: str | None, no_reindex: bool, as_json: bool
) -> None:
    """Load a bank written by `lamina export` (merging by id; safe to repeat).

    Example: lamina import my-project.jsonl --bank my-project
    """
    from ..bank.transfer import import_bank

    memory_bank = _open(ctx)
    path = Path(file)
    if not path.is_file():
        raise InputError(f"{file}: no such file")

    def read() -> Iterator[bytes]:
        with path.open("rb") as handle:
            yield from handle

    counts = import_bank(memory_bank.store, read, bank=bank, source=file)
    embedded = 0 if no_reindex else memory_bank.reindex(str(counts["bank"]))
    result = {**counts, "embedded": embedded}
    if as_json:
        emit_json(result)
    else:
        logs = f", {count(counts['logs'], 'context log', 'context logs')}" if counts["logs"] else ""
        embeds = f"; embedded {count(embedded, 'memory', 'memories')}" if embedded else ""
        click.echo(
            f"imported into {counts['bank']}: "
            f"{count(counts['documents'], 'document', 'documents')}, "
            f"{count(counts['memories'], 'memory', 'memories')} "
            f"({count(counts['records'], 'new record', 'new records')}){logs}{embeds}"
        )


@click.command("hook")
@click.pass_context
def hook_command(ctx: click.Context) -> None:
    """Serve a Claude Code hook: reads the event's JSON on stdin (any event).

    Install it as the command of every Lamina hook in Claude Code's settings. It fails open:
    errors print one line on stderr, exit 0 and are logged under the data directory.

    No --json: stdout is what Claude Code reads from a hook, in the shape it expects.

    Example: echo '{"hook_event_name": "SessionStart"}' | lamina hook
    """
    from ..integrations.claude_code.hook import hook_main

    hook_main(sys.stdin.read(), home=(ctx.obj or {}).get("home"))


@click.command("hook-worker", hidden=True)
@click.option("--transcript", required=True)
@click.option("--session", required=True)
@click.option("--bank", required=True)
@click.option("--event", default="")
@click.option("--parent", default=None, help="The parent session of a subagent's transcript.")
@click.option("--skip", is_flag=True, help="Memory is paused: move the cursor, keep nothing.")
@click.pass_context
def hook_worker_command(
    ctx: click.Context,
    transcript: str,
    session: str,
    bank: str,
    event: str,
    parent: str | None,
    skip: bool,
) -> None:
    """The detached retain a Stop hook starts (internal)."""
    from ..integrations.claude_code import run_worker

    home = (ctx.obj or {}).get("home")
    code = run_worker(transcript, session, bank, home=home, event=event, parent=parent, skip=skip)
    sys.exit(code)


def _correction_note(note: Mapping[str, Any]) -> str:
    if note.get("state") == "wrong":
        why = f": {note['note']}" if note.get("note") else ""
        return f"marked wrong{why}"
    return f"replaces {', '.join(note.get('replaces') or [])}"
