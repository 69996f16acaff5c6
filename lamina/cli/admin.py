"""Setup commands: install/uninstall the Claude Code hooks, and status (alias doctor)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..errors import InputError, NotFoundError
from .common import (
    count,
    count_option,
    document_label,
    emit_json,
    json_option,
    open_bank,
    server_token,
    settings,
    when,
)

if TYPE_CHECKING:
    from ..context import RequestFormat

__all__ = ["compile_command", "install", "keys", "mcp", "serve", "status", "uninstall"]


def _scope(project: bool, user: bool) -> str:
    if project and user:
        raise InputError("choose one of --project and --user")
    return "project" if project else "user"


def _target_and_scope(command: Callable[..., Any]) -> Callable[..., Any]:
    """TARGET (the agent) and --project / --user (where), as install and uninstall take them."""
    for decorator in reversed(
        (
            click.argument(
                "target", type=click.Choice(["claude-code", "codex", "gemini", "copilot"])
            ),
            click.option(
                "--project",
                is_flag=True,
                help="This project's .claude/settings.json (codex: .codex/; gemini: .gemini/; "
                "copilot: .github/).",
            ),
            click.option(
                "--user",
                is_flag=True,
                help="Your ~/.claude/settings.json (codex: $CODEX_HOME; gemini: ~/.gemini/; "
                "copilot: $COPILOT_HOME); the default.",
            ),
        )
    ):
        command = decorator(command)
    return command


@click.command()
@_target_and_scope
@click.option(
    "--trust", is_flag=True, help="codex: also trust Lamina's hooks, through `codex app-server`."
)
@click.option(
    "--plugin",
    is_flag=True,
    help="codex: trust the Codex plugin's hooks (after `codex plugin add lamina@lamina`) "
    "instead of writing Lamina's own.",
)
@click.option("--codex", "codex_bin", default=None, help="codex: the Codex CLI to trust with.")
@json_option
@click.pass_context
def install(
    ctx: click.Context,
    target: str,
    project: bool,
    user: bool,
    trust: bool,
    plugin: bool,
    codex_bin: str | None,
    as_json: bool,
) -> None:
    """Add Lamina's hooks to Claude Code's settings (or Codex's hooks.json and MCP server to its
    config.toml, the Gemini CLI's to its settings.json, the Copilot CLI's to hooks/lamina.json
    and its MCP configuration), keeping everything else there.

    Example: lamina install claude-code --user
    Example: lamina install codex --trust
    Example: lamina install codex --plugin
    Example: lamina install gemini --project
    Example: lamina install copilot
    """
    from ..integrations.claude_code.install import hook_command
    from ..integrations.claude_code.install import install as do_install

    home = (ctx.obj or {}).get("home")
    scope = _scope(project, user)
    if plugin and target != "codex":
        raise InputError(f"--plugin is for codex; {target} has no plugin Lamina trusts")
    if target == "codex":
        from .codex_setup import install_codex, trust_codex_plugin

        if plugin:
            if project:
                raise InputError("--plugin: Codex installs plugins per user; leave out --project")
            trust_codex_plugin(codex_bin, as_json)
        else:
            install_codex(scope, home, trust, codex_bin, as_json)
        return
    if target == "gemini":
        from .gemini_setup import install_gemini

        install_gemini(scope, home, as_json)
        return
    if target == "copilot":
        from .copilot_setup import install_copilot

        install_copilot(scope, home, as_json)
        return
    if scope == "project" and home:
        # The project's settings are shared: this machine's data directory stays out of them.
        click.echo("warning: --home is not written into a project's settings; set LAMINA_HOME "
                   "or `home` in the config file instead", err=True)  # fmt: skip
    path = do_install(scope, command=hook_command(home) if scope == "user" else None)
    from ..integrations.claude_code.detect import installation_warnings, plugin_state
    from ..integrations.claude_code.install import installed_scopes

    warnings = installation_warnings(plugin_state(), installed_scopes(), [])
    if as_json:
        emit_json({"target": target, "scope": scope, "settings": str(path),
                   "installed": True, "warnings": list(warnings)})  # fmt: skip
        return
    click.echo(f"installed Lamina's hooks for {target} in {path}")
    click.echo("new Claude Code sessions now recall before each prompt and retain after each turn")
    if scope == "project":
        click.echo("they run `lamina` from PATH: each teammate installs Lamina once")
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@_target_and_scope
@json_option
def uninstall(target: str, project: bool, user: bool, as_json: bool) -> None:
    """Remove Lamina's hooks from Claude Code's settings, or Lamina's hooks and MCP server from
    Codex's, the Gemini CLI's or the Copilot CLI's (nothing else is touched).

    Example: lamina uninstall claude-code --user
    """
    from ..integrations.claude_code.install import uninstall as do_uninstall

    scope = _scope(project, user)
    if target == "codex":
        from .codex_setup import uninstall_codex

        uninstall_codex(scope, as_json)
        return
    if target == "gemini":
        from .gemini_setup import uninstall_gemini

        uninstall_gemini(scope, as_json)
        return
    if target == "copilot":
        from .copilot_setup import uninstall_copilot

        uninstall_copilot(scope, as_json)
        return
    path, changed = do_uninstall(scope)
    if as_json:
        emit_json({"target": target, "scope": scope, "settings": str(path), "removed": changed})
        return
    click.echo(f"removed Lamina's hooks from {path}" if changed else f"no Lamina hooks in {path}")


@click.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Where the data lives, installed hooks, banks, last retains, the hook log's tail.

    Example: lamina status
    """
    from .status import status_report

    report = status_report(settings(ctx))
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
    paused = report["paused"]
    for kind in ("banks", "sessions"):
        for name, info in paused[kind].items():
            what = "project bank" if kind == "banks" else "session"
            click.echo(f"paused      {what} {name} since {_human_stamp(info.get('since', '?'))}")
    for scope, info in report["hooks"].items():
        state = "installed" if info["installed"] else "not installed"
        click.echo(f"hooks       {scope}: {state} ({info['settings']})")
    for scope, info in report.get("codex_hooks", {}).items():
        if info["installed"]:
            trusted = info["trusted"]
            said = "trusted" if trusted is True else "NOT trusted" if trusted is False else trusted
            click.echo(f"codex       {scope}: installed, {said} ({info['hooks_file']})")
    for scope, info in report.get("gemini_hooks", {}).items():
        if info["installed"]:
            click.echo(f"gemini      {scope}: installed ({info['settings']})")
    for scope, info in report.get("copilot_hooks", {}).items():
        if info["installed"]:
            click.echo(f"copilot     {scope}: installed ({info['hooks_file']})")
    plugin = report["plugin"]
    state = "enabled" if plugin["enabled"] else "installed, disabled" if plugin["installed"] else ""
    click.echo(f"plugin      {plugin['id']}: {state}" if state else "plugin      not installed")
    for server in report["mcp_servers"]:
        click.echo(f"mcp         {server['name']} ({server['scope']}: {server['source']})")
    if not report["mcp_servers"]:
        click.echo("mcp         no Lamina MCP server configured")
    for warning in report["warnings"]:
        click.echo(f"warning     {warning}")
    for bank in report["banks"]:
        click.echo(
            f"bank        {bank['bank']}: {count(bank['documents'], 'document')}, "
            f"{count(bank['memories'], 'memory', 'memories')}, "
            f"{count(bank['records'], 'record')}"
        )
        for doc in bank["recent_documents"][:5]:
            pending = doc["bytes_not_retained"]
            note = f", {pending:,} bytes not retained yet" if pending else ""
            label = document_label(doc["document"], doc["source"])
            retained = _human_stamp(doc["last_retain"], age=True)
            click.echo(f"              {label}  last retain {retained}{note}")
    warm = report["warm_server"]
    if warm["running"]:
        click.echo(f"warm server running (pid {warm['pid']}, {warm['requests']} recalls)")
    elif warm["reason"] == "no warm server":
        click.echo("warm server not running (optional: `lamina warm start`)")
    else:
        click.echo(f"warm server not answering: {warm['reason']}")
    audit = report["injections"]
    if audit["prompts"]:
        last = audit["last"]
        said = (
            f"{len(last.get('memories') or [])} memories"
            if last.get("injected")
            else f"nothing ({last.get('reason')})"
        )
        click.echo(
            f"injections  {audit['injected']} of {audit['prompts']} prompts got memories; the "
            f"last ({_human_stamp(str(last.get('at')), age=True)}): {said}; see `lamina injections`"
        )
    if report["prompt_timings"]:
        click.echo("prompts     the last UserPromptSubmit hooks, stage times in ms:")
        for entry in report["prompt_timings"]:
            click.echo(f"  {_human_stamp(entry['time'])}  {_prompt_timing(entry)}")
    if report["hook_log_tail"]:
        from ..integrations.claude_code.hook import TIMINGS_MARK

        click.echo(f"hook log    {report['hook_log']}")
        for line in report["hook_log_tail"]:
            stamp, _, rest = line.split(TIMINGS_MARK, 1)[0].partition(" ")
            click.echo(f"  {_human_stamp(stamp)} {rest}")


def _human_stamp(stamp: str, *, age: bool = False) -> str:
    """An ISO 8601 time as `when` shows it (local, to the minute); anything else as it is."""
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    return when(moment, age=age)


def _prompt_timing(entry: dict[str, Any]) -> str:
    stages = {
        **entry.get("stages_ms", {}),
        **{f"server.{k}": v for k, v in entry.get("server_ms", {}).items()},
    }
    parts = [
        f"{entry.get('path')} path",
        f"{entry.get('memories', 0)} memories",
        f"total {entry.get('total_ms')}",
        " ".join(f"{name} {ms:g}" for name, ms in stages.items()),
    ]
    if entry.get("lexical_only"):
        parts.append("lexical only")
    if entry.get("over_limit"):
        parts.append("over the limit")
    if entry.get("warm_unavailable") and entry.get("warm_unavailable") != "no warm server":
        parts.append(f"warm: {entry['warm_unavailable']}")
    return ", ".join(parts)


@click.command()
@click.option(
    "--bank",
    "-b",
    default=None,
    envvar="LAMINA_BANK",
    help="Default bank for tools called without one (default: this project's).",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "streamable-http"]),
    default="stdio",
    show_default=True,
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP address to bind.")
@click.option("--port", default=8421, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--allow-dir",
    "allow_dirs",
    multiple=True,
    envvar="LAMINA_MCP_ALLOW_DIRS",
    type=click.Path(file_okay=False),
    help="Over HTTP: a directory whose transcripts callers may name by path (repeatable; "
    "none by default, so remote callers send messages, not paths).",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    bank: str | None,
    transport: str,
    host: str,
    port: int,
    allow_dirs: tuple[str, ...],
) -> None:
    """Serve the memory banks over MCP, on stdio or streamable HTTP (needs the `mcp` extra).

    Over HTTP, the API keys of `lamina keys` apply, binding beyond loopback needs one,
    without one every request needs the local token (Authorization: Bearer, from the file
    named at start), and tools take file paths only inside the directories of --allow-dir.

    No --json: stdout is the MCP protocol itself (on stdio), or nothing (over HTTP).

    Example: claude mcp add lamina -- lamina mcp
    """
    try:
        from ..integrations.mcp import build_server, http_app
    except ImportError:
        raise InputError("`lamina mcp` needs the `mcp` extra: pip install 'lamina[mcp]'") from None
    home = (ctx.obj or {}).get("home")
    database_url = (ctx.obj or {}).get("database_url")
    if transport == "stdio":
        server = build_server(
            home,
            bank,
            database_url=database_url,
            host=host,
            allow_dirs=allow_dirs,
            settings=settings(ctx),
        )
        server.run("stdio")
        return

    from ..access import Gate

    store = open_bank(ctx).store
    if not _loopback(host) and store.count_api_keys() == 0:
        raise InputError(
            f"refusing to serve on {host} without API keys: create one with `lamina keys create`"
        )
    token, token_file = server_token(ctx, store)
    described = Gate.at_start(store, host, token=token).describe(token_file)
    click.echo(f"lamina mcp on {host}:{port}: {described}", err=True)
    import uvicorn

    app = http_app(
        home,
        bank,
        database_url=database_url,
        host=host,
        allow_dirs=allow_dirs,
        token=token,
        settings=settings(ctx),
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _loopback(host: str) -> bool:
    from ..access import is_loopback

    return is_loopback(host)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8420, show_default=True, type=click.IntRange(1, 65535))
@count_option(
    "--max-body",
    at_least=1024,
    default=16 * 1024 * 1024,
    help="Largest request body accepted, in bytes.",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, max_body: int) -> None:
    """Serve the memory banks over HTTP (needs the `server` extra).

    Loopback only until an API key exists (`lamina keys create`), and every request needs
    the local token meanwhile (Authorization: Bearer, from the file named at start); with
    keys, every request needs one, and a key only sees the banks it is scoped to.

    No --json: the server answers in JSON over HTTP; the address it listens on goes to stderr.

    Example: lamina serve --port 8420
    """
    try:
        import uvicorn

        from ..integrations.http import create_app
    except ImportError:
        raise InputError("the HTTP server needs: pip install 'lamina[server]'") from None

    from ..access import Gate

    memory = open_bank(ctx)
    if not _loopback(host) and memory.store.count_api_keys() == 0:
        raise InputError(
            f"refusing to serve on {host} without API keys: create one with `lamina keys create`"
        )
    token, token_file = server_token(ctx, memory.store)
    gate = Gate.at_start(memory.store, host, token=token)
    app = create_app(settings=settings(ctx), memory=memory, max_body=max_body,
                     gate=gate)  # fmt: skip
    # The model and the banks load before the server listens, not on the first request.
    with contextlib.suppress(Exception):  # the first request reports what fails, in its answer
        memory.warm_up()
    shown = f"[{host}]" if ":" in host else host
    described = gate.describe(token_file)
    click.echo(f"lamina serve: listening on http://{shown}:{port} ({described})", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


@click.group()
def keys() -> None:
    """API keys for `lamina serve` (stored hashed, scoped to banks)."""


@keys.command("create")
@click.argument("name")
@click.option("--bank", "banks", multiple=True, help="A bank the key may use (repeatable).")
@click.option("--all-banks", is_flag=True, help="The key may use every bank.")
@click.option(
    "--new-bank",
    is_flag=True,
    help="Allow --bank names no bank has yet (a client will create them by retaining).",
)
@json_option
@click.pass_context
def keys_create(
    ctx: click.Context,
    name: str,
    banks: tuple[str, ...],
    all_banks: bool,
    new_bank: bool,
    as_json: bool,
) -> None:
    """Create a key; it is shown once, only its hash is kept. A --bank that does not exist
    is an error (a typo would make a key for nothing) unless --new-bank says it is meant.

    Example: lamina keys create ci-agent --bank my-project
    """
    from ..access import hash_key, new_key

    if bool(banks) == all_banks:
        raise InputError("give --bank (one or more) or --all-banks")
    memory = open_bank(ctx)
    missing = [b for b in banks if memory.store.get_bank(b) is None]
    if missing and not new_bank:
        raise NotFoundError(
            f"no bank named {missing[0]!r} (see `lamina banks`); add --new-bank to make a key "
            "for a bank a client will create"
        )
    key = new_key()
    scope = ["*"] if all_banks else list(banks)
    memory.store.create_api_key(name, hash_key(key), scope)
    if as_json:
        emit_json({"name": name, "key": key, "banks": scope})
    else:
        click.echo(key)
        click.echo(f"(key {name!r} for {', '.join(scope)}; shown once, keep it safe)", err=True)


@keys.command("list")
@json_option
@click.pass_context
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """The keys (names and scopes; the keys themselves are not stored).

    Example: lamina keys list --json"""

    rows = open_bank(ctx).store.list_api_keys()
    if as_json:
        emit_json([{"name": n, "banks": b, "created_at": c} for n, b, c in rows])
        return
    for name, banks, created in rows:
        click.echo(f"{name}  {', '.join(banks)}  {created}")


@keys.command("revoke")
@click.argument("name")
@json_option
@click.pass_context
def keys_revoke(ctx: click.Context, name: str, as_json: bool) -> None:
    """Delete a key; requests with it fail from now on.

    Example: lamina keys revoke ci-agent
    """

    if not open_bank(ctx).store.delete_api_key(name):
        raise NotFoundError(f"no API key named {name!r} (see `lamina keys list`)")
    if as_json:
        emit_json({"name": name, "revoked": True})
    else:
        click.echo(f"revoked {name}")


@click.command("compile")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@count_option(
    "--budget",
    at_least=1000,
    default=32_000,
    help="Maximum tokens of the request, reply reserve included.",
)
@count_option(
    "--reserve",
    at_least=0,
    help="Tokens kept free for the reply (default: an eighth of the budget, at most 4000).",
)
@count_option(
    "--head",
    "head_tokens",
    at_least=0,
    help="Tokens of opening messages kept raw (default: 20% of the budget).",
)
@count_option(
    "--recent",
    "recent_tokens",
    at_least=0,
    help="Tokens of newest messages a fold leaves raw (default: 5% of the budget).",
)
@click.option(
    "--from",
    "from_fmt",
    default=None,
    metavar="NAME",
    help="Transcript format, as `--format` of the other commands (default: detected).",
)
@click.option(
    "--to",
    "fmt",
    type=click.Choice(["anthropic", "openai"]),
    default=None,
    help="Request format: an Anthropic Messages or an OpenAI Chat Completions request "
    "[default: anthropic].",
)
@click.option(
    "--format",
    "old_fmt",
    type=click.Choice(["anthropic", "openai"]),
    default=None,
    hidden=True,
    help="The old name of --to (deprecated: every other command's --format is the input's).",
)
@click.option("--report", "show_report", is_flag=True, help="Print the report (text mode).")
@click.option(
    "--bank",
    default=None,
    help="Keep the log in this bank: append what is new, reuse the summaries and the last "
    "frontier stored with it, store what this compile writes.",
)
@click.option(
    "--log",
    "log_id",
    default=None,
    help="The log's id in the bank (default: the file's name without its extension).",
)
@click.option(
    "--ahead",
    is_flag=True,
    help="With --bank: once the request is printed, write the summaries the next fold will "
    "need, so the compile that folds does not wait for the summariser.",
)
@json_option
@click.pass_context
def compile_command(
    ctx: click.Context,
    file: str,
    budget: int,
    reserve: int | None,
    head_tokens: int | None,
    recent_tokens: int | None,
    from_fmt: str | None,
    fmt: RequestFormat | None,
    old_fmt: RequestFormat | None,
    show_report: bool,
    bank: str | None,
    log_id: str | None,
    ahead: bool,
    as_json: bool,
) -> None:
    """Compile a transcript into a request that fits a token budget, old stretches folded into
    summaries shown as recall pairs, written by the configured summariser (`summariser` in the
    config file or LAMINA_SUMMARISER; the offline extractive one by default). With --bank, the
    log is kept in the database, so the next compile of the grown transcript summarises only
    what is new and keeps the request's prefix.

    `--to` names the request's format; `--from` the transcript's, like `--format` of every
    other command (`--format` here is the old name of `--to`, still accepted, deprecated).

    Example: lamina compile examples/session.jsonl --budget 8000 --to openai --report
    """
    from .compiling import run_compile

    if old_fmt is not None:
        if fmt is not None and fmt != old_fmt:
            raise InputError(f"--to {fmt} and --format {old_fmt} disagree; give --to only")
        click.echo(
            "warning: compile --format is deprecated: use --to (the request's format)", err=True
        )
        fmt = old_fmt
    run_compile(
        settings(ctx),
        file,
        budget=budget,
        reserve=reserve,
        head_tokens=head_tokens,
        recent_tokens=recent_tokens,
        from_fmt=from_fmt,
        fmt=fmt,
        show_report=show_report,
        bank=bank,
        log_id=log_id,
        ahead=ahead,
        as_json=as_json,
    )
