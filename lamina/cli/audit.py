"""Audit and correction: `lamina injections` (what the prompt hook injected on which prompt,
and why nothing when it injected nothing) and `lamina memory` (mark a memory wrong or
superseded, undo it, list the marks)."""

from __future__ import annotations

from typing import Any

import click

from .common import (
    bank_option,
    count_option,
    emit_json,
    json_option,
    open_bank,
    settings,
    this_bank,
)

__all__ = ["injections", "memory"]


@click.command("injections")
@click.option("--session", default=None, metavar="ID", help="Only this session's prompts.")
@count_option(
    "--last",
    at_least=0,
    default=20,
    metavar="N",
    help="The newest N prompts (0: all the log keeps).",
)
@json_option
@click.pass_context
def injections(ctx: click.Context, session: str | None, last: int, as_json: bool) -> None:
    """What the prompt hook injected on each prompt, and why nothing when nothing was.

    Each entry: when, the session and bank, the prompt (redacted, cut short), which memories
    (ids, kinds, scores, tokens), how long it took, the path (cold, warm, lexical-only), and
    the reason when nothing was injected (the relevance floor, a pause, an exclusion...).

    The log is the data directory's logs/injections.jsonl (readable by you only, rotated
    past 2 MB). Oldest first, so the newest prompt is at the bottom.

    Example: lamina injections --last 5

    Example: lamina injections --session 7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17 --json
    """
    from ..integrations.claude_code.injections import injections_path, read_injections

    home = settings(ctx).home
    entries = read_injections(home, session=session, last=last or None)
    if as_json:
        emit_json({"log": str(injections_path(home)), "injections": entries})
        return
    if not entries:
        click.echo("no prompts recorded yet (the prompt hook adds one per prompt)", err=True)
        return
    for entry in entries:
        click.echo(_line(entry))
        for memory in entry.get("memories") or []:
            replaces = memory.get("replaces")
            also = f"  (replaces {', '.join(replaces)})" if replaces else ""
            click.echo(
                f"    {memory.get('id')}  {memory.get('kind')}  score {memory.get('score')}"
                f"  {memory.get('tokens')} tokens{also}"
            )


def _line(entry: dict[str, Any]) -> str:
    at = str(entry.get("at") or "")[:19].replace("T", " ")
    session = str(entry.get("session") or "-")[:8]
    prompt = entry.get("prompt")
    shown = f'"{prompt}"' if isinstance(prompt, str) else "(prompt not kept)"
    ms = entry.get("ms")
    took = f", {ms:.0f} ms" if isinstance(ms, int | float) else ""
    path = f", {entry['path']}" if entry.get("path") else ""
    if entry.get("injected"):
        what = f"{len(entry.get('memories') or [])} memories, {entry.get('tokens', 0)} tokens"
    else:
        what = f"nothing: {entry.get('reason') or 'no memories found'}"
    return f"{at}  {session}  {entry.get('bank') or '-'}  {shown}\n  -> {what}{path}{took}"


@click.group("memory")
def memory() -> None:
    """Correct a memory: mark it wrong, or superseded by a newer one; unmark to undo.

    A memory marked wrong is left out by recall and never injected by the prompt hook; one
    superseded yields to its replacement, which recall shows in its place.

    Memory ids are shown by `lamina recall --json`, `lamina injections` and the inspector.

    Example: lamina memory wrong 3f9a0c1d2e4b5a6978877665 --note "we moved to PostgreSQL"
    """


_NOTE = click.option("--note", default="", help="Why (kept with the mark, shown with it).")


def _report(as_json: bool, bank: str, action: str, mark: Any, text: str) -> None:
    if as_json:
        emit_json({"bank": bank, "action": action, "mark": mark.as_dict()})
        return
    click.echo(text)


@memory.command("wrong")
@click.argument("memory_id", metavar="ID")
@_NOTE
@bank_option
@json_option
@click.pass_context
def wrong(ctx: click.Context, memory_id: str, note: str, bank: str | None, as_json: bool) -> None:
    """Mark a memory wrong: recall leaves it out from now on (`lamina recall --show-wrong`
    shows it last, marked), and the prompt hook never injects it.

    Example: lamina memory wrong 3f9a0c1d2e4b5a6978877665 --note "a hypothesis, not the fix"
    """
    name = this_bank(ctx, bank)
    mark = open_bank(ctx).mark_wrong(name, memory_id, note)
    _report(as_json, name, "wrong", mark, f"memory {memory_id} marked wrong in bank {name}")


@memory.command("supersede")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@_NOTE
@bank_option
@json_option
@click.pass_context
def supersede(
    ctx: click.Context, old: str, new: str, note: str, bank: str | None, as_json: bool
) -> None:
    """Mark memory OLD superseded by memory NEW: where recall would return OLD, it returns
    NEW (once), noting that it replaces OLD.

    Example: lamina memory supersede 3f9a0c1d2e4b5a6978877665 8b7c6d5e4f3a2b1c0d9e8f7a
    """
    name = this_bank(ctx, bank)
    mark = open_bank(ctx).supersede(name, old, new, note)
    _report(as_json, name, "supersede", mark, f"memory {old} superseded by {new} in bank {name}")


@memory.command("unmark")
@click.argument("memory_id", metavar="ID")
@bank_option
@json_option
@click.pass_context
def unmark(ctx: click.Context, memory_id: str, bank: str | None, as_json: bool) -> None:
    """Remove a memory's mark (wrong or superseded): recall treats it as before.

    Example: lamina memory unmark 3f9a0c1d2e4b5a6978877665
    """
    name = this_bank(ctx, bank)
    mark = open_bank(ctx).unmark(name, memory_id)
    _report(as_json, name, "unmark", mark, f"memory {memory_id} is no longer marked {mark.state}")


@memory.command("marks")
@bank_option
@json_option
@click.pass_context
def marks(ctx: click.Context, bank: str | None, as_json: bool) -> None:
    """The bank's marked memories, oldest mark first.

    Example: lamina memory marks --json
    """
    name = this_bank(ctx, bank)
    memory_bank = open_bank(ctx)
    memory_bank.require_bank(name)
    found = memory_bank.corrections(name)
    if as_json:
        emit_json({"bank": name, "marks": [m.as_dict() for m in found]})
        return
    if not found:
        click.echo(f"no marked memories in bank {name}", err=True)
    for mark in found:
        also = f" by {mark.replacement}" if mark.replacement else ""
        note = f"  ({mark.note})" if mark.note else ""
        click.echo(f"{mark.memory}  {mark.state}{also}{note}")
