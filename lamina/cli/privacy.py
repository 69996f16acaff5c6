"""`lamina pause` and `lamina resume`: memory off and on again for a project or one session
(`lamina.pause`). The hooks read it on every event; nothing else changes."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..pause import pause, resume
from .common import bank_option, emit_json, json_option, settings, this_bank

__all__ = ["pause_command", "resume_command"]

_SESSION = click.option(
    "--session",
    default=None,
    metavar="ID",
    help="One session (its id, as `lamina status` and the hook log show it) instead of the "
    "project.",
)


def _target(
    ctx: click.Context, bank: str | None, session: str | None
) -> tuple[str | None, str | None, str]:
    """(bank, session, directory): the project's bank unless a session or bank is named."""
    if session is not None:
        return None, session, ""
    # Inside a Claude Code session (a slash command) the project is the one its hooks use.
    directory = os.environ.get("CLAUDE_PROJECT_DIR") or str(Path.cwd())
    return this_bank(ctx, bank, directory), None, directory if bank is None else ""


@click.command("pause")
@_SESSION
@bank_option
@json_option
@click.pass_context
def pause_command(ctx: click.Context, session: str | None, bank: str | None, as_json: bool) -> None:
    """Pause memory for this project (its bank) or one session: the hooks neither recall nor
    retain for it, and what is said meanwhile is never retained, not even after `lamina
    resume`.

    Without --session, the project is the one the hooks would choose here (the git root of
    $CLAUDE_PROJECT_DIR or the current directory, or --bank). `lamina status` lists what is paused.

    Example: lamina pause

    Example: lamina pause --session 7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17
    """
    home = settings(ctx).home
    chosen_bank, chosen_session, directory = _target(ctx, bank, session)
    result = pause(home, bank=chosen_bank, session=chosen_session, directory=directory)
    if as_json:
        emit_json(result)
        return
    what = f"session {result['name']}" if chosen_session else f"project bank {result['name']}"
    again = "was paused already" if result["already"] else "paused"
    click.echo(f"{what}: memory {again}; the hooks neither recall nor retain until `lamina resume`")


@click.command("resume")
@_SESSION
@bank_option
@json_option
@click.pass_context
def resume_command(
    ctx: click.Context, session: str | None, bank: str | None, as_json: bool
) -> None:
    """Resume memory paused by `lamina pause` for this project (its bank) or one session.

    Example: lamina resume
    """
    home = settings(ctx).home
    chosen_bank, chosen_session, _directory = _target(ctx, bank, session)
    was = resume(home, bank=chosen_bank, session=chosen_session)
    name = chosen_session or chosen_bank
    kind = "session" if chosen_session else "bank"
    if as_json:
        emit_json({"resumed": kind, "name": name, "was_paused": was})
        return
    what = f"session {name}" if chosen_session else f"project bank {name}"
    click.echo(f"{what}: memory on" if was else f"{what}: was not paused")
