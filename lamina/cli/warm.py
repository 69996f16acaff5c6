"""`lamina warm start|stop|status`: the warm server the prompt hook asks before doing the work
itself (see lamina.integrations.claude_code.warm)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import emit_json, json_option, settings

__all__ = ["warm"]


def _home(ctx: click.Context) -> Path:
    return settings(ctx).home


def _describe(status: dict[str, object]) -> str:
    if not status.get("running"):
        reason = status.get("reason")
        why = "" if reason == "no warm server" else f" ({reason})"
        return f"no warm server{why}; hooks take the cold path"
    return (
        f"warm server {status.get('pid')} on {status.get('socket')}: up {status.get('uptime_s')}s, "
        f"{status.get('requests')} recalls, exits after {status.get('idle_timeout_s')}s idle"
    )


@click.group()
def warm() -> None:
    """The warm server: holds the memory bank open and answers the prompt hook's recalls.

    Example: lamina warm start --idle-timeout 3600
    """


@warm.command()
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=1800.0,
    show_default=True,
    help="Seconds without a recall after which the server exits.",
)
@json_option
@click.pass_context
def start(ctx: click.Context, idle_timeout: float, as_json: bool) -> None:
    """Start the data directory's warm server in the background (if none runs) and wait until
    it answers.

    Example: lamina warm start
    """
    from ..integrations.claude_code.warm_control import start_server

    status = start_server(_home(ctx), idle_timeout)
    if as_json:
        emit_json(status)
        return
    click.echo(("started " if status.get("started") else "already running: ") + _describe(status))


@warm.command()
@json_option
@click.pass_context
def stop(ctx: click.Context, as_json: bool) -> None:
    """Stop the data directory's warm server.

    Example: lamina warm stop
    """
    from ..integrations.claude_code.warm_control import stop_server

    result = stop_server(_home(ctx))
    if as_json:
        emit_json(result)
        return
    if result.get("stopped"):
        click.echo(f"stopped warm server {result.get('pid')}")
    else:
        click.echo(f"no warm server stopped ({result.get('reason', 'it did not exit in time')})")


@warm.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether the data directory's warm server runs, and what it has served.

    Example: lamina warm status --json
    """
    from ..integrations.claude_code.warm_control import warm_status

    result = warm_status(_home(ctx))
    if as_json:
        emit_json(result)
        return
    click.echo(_describe(result))


@warm.command(hidden=True)
@click.option("--idle-timeout", type=click.FloatRange(min=0.1), default=1800.0)
@click.pass_context
def serve(ctx: click.Context, idle_timeout: float) -> None:
    """Run the warm server in this process (what `start` runs detached)."""
    from ..integrations.claude_code.warm import serve_forever

    serve_forever(_home(ctx), idle_timeout)
