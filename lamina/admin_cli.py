"""Setup commands: install/uninstall the Claude Code hooks, and status (alias doctor)."""

from __future__ import annotations

import click

from .cli_common import emit_json
from .errors import InputError

__all__ = ["register"]


def _scope(project: bool, user: bool) -> str:
    if project and user:
        raise InputError("choose one of --project and --user")
    return "project" if project else "user"


@click.command()
@click.argument("target", type=click.Choice(["claude-code"]))
@click.option("--project", is_flag=True, help="This project's .claude/settings.json.")
@click.option("--user", is_flag=True, help="Your ~/.claude/settings.json (the default).")
@click.pass_context
def install(ctx: click.Context, target: str, project: bool, user: bool) -> None:
    """Add Lamina's hooks to Claude Code's settings, keeping everything else there.

    Example: lamina install claude-code --user
    """
    from .integrations.claude_code.install import hook_command
    from .integrations.claude_code.install import install as do_install

    home = (ctx.obj or {}).get("home")
    path = do_install(_scope(project, user), command=hook_command(home))
    click.echo(f"installed Lamina's hooks for {target} in {path}")
    click.echo("new Claude Code sessions now recall before each prompt and retain after each turn")


@click.command()
@click.argument("target", type=click.Choice(["claude-code"]))
@click.option("--project", is_flag=True, help="This project's .claude/settings.json.")
@click.option("--user", is_flag=True, help="Your ~/.claude/settings.json (the default).")
def uninstall(target: str, project: bool, user: bool) -> None:
    """Remove Lamina's hooks from Claude Code's settings (nothing else is touched).

    Example: lamina uninstall claude-code --user
    """
    from .integrations.claude_code.install import uninstall as do_uninstall

    path, changed = do_uninstall(_scope(project, user))
    click.echo(f"removed Lamina's hooks from {path}" if changed else f"no Lamina hooks in {path}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Where the data lives, installed hooks, banks, last retains, the hook log's tail.

    Example: lamina status
    """
    from .status import status_report

    report = status_report((ctx.obj or {}).get("home"))
    if as_json:
        emit_json(report)
        return
    click.echo(f"data        {report['data_dir']}")
    size = report.get("database_bytes")
    click.echo(
        f"database    {report['database']}"
        + (
            f" ({size / 1e6:.1f} MB)"
            if size
            else ""
            if report["database_exists"]
            else " (none yet)"
        )
    )
    click.echo(f"this bank   {report['default_bank']}")
    for scope, info in report["hooks"].items():
        state = "installed" if info["installed"] else "not installed"
        click.echo(f"hooks       {scope}: {state} ({info['settings']})")
    for bank in report["banks"]:
        click.echo(
            f"bank        {bank['bank']}: {bank['documents']} documents, "
            f"{bank['memories']} memories, {bank['records']} records"
        )
        for doc in bank["recent_documents"][:5]:
            pending = doc["bytes_not_retained"]
            note = f", {pending} bytes not retained yet" if pending else ""
            click.echo(f"              {doc['document']}  last retain {doc['last_retain']}{note}")
    if report["hook_log_tail"]:
        click.echo(f"hook log    {report['hook_log']}")
        for line in report["hook_log_tail"]:
            click.echo(f"  {line}")


@click.command()
@click.option(
    "--bank",
    "-b",
    default=None,
    envvar="LAMINA_BANK",
    help="Default bank for tools called without one (default: this project's).",
)
@click.pass_context
def mcp(ctx: click.Context, bank: str | None) -> None:
    """Serve the memory banks over MCP on stdio (needs the `mcp` extra).

    Example: claude mcp add lamina -- lamina mcp
    """
    try:
        from .integrations.mcp import build_server
    except ImportError:
        raise InputError("the MCP server needs: pip install 'lamina[mcp]'") from None
    build_server((ctx.obj or {}).get("home"), bank).run("stdio")


def register(group: click.Group) -> None:
    group.add_command(install)
    group.add_command(uninstall)
    group.add_command(status)
    group.add_command(status, name="doctor")
    group.add_command(mcp)
