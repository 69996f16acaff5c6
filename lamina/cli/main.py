"""The `lamina` command line: each command a thin call into the library.

With `--json`, stdout holds exactly one JSON document; warnings, progress and logs go to stderr.
Errors a user can fix print one line (`error: ...`) and exit non-zero, never a traceback; with
`--json` the same error is also one JSON object on stdout, `{"error": {"type", "message"}}`.

Commands are loaded by name, when they run: `lamina recall` imports the recall command's module
and no other, and `lamina --help` lists every command from `SUMMARIES`, grouped by `SECTIONS`,
without importing any.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..errors import LaminaError, NotFoundError
from .lazy import LazyGroup

__all__ = [
    "COMMANDS",
    "SECTIONS",
    "SUMMARIES",
    "cli",
    "error_type",
    "exit_for",
    "fail",
    "main",
    "wants_json",
]

COMMANDS: dict[str, str] = {
    "banks": "cli.bank:banks",
    "bench": "bench:bench",
    "compile": "cli.admin:compile_command",
    "copy": "cli.store:copy_command",
    "doctor": "cli.admin:status",
    "documents": "cli.bank:documents",
    "export": "cli.bank:export_command",
    "forget": "cli.bank:forget",
    "hook": "cli.bank:hook_command",
    "hook-worker": "cli.bank:hook_worker_command",
    "import": "cli.bank:import_command",
    "injections": "cli.audit:injections",
    "inspect": "cli.inspector:inspect",
    "install": "cli.admin:install",
    "keys": "cli.admin:keys",
    "logs": "cli.logs:logs",
    "mcp": "cli.admin:mcp",
    "memory": "cli.audit:memory",
    "migrate": "cli.store:migrate",
    "pause": "cli.privacy:pause_command",
    "pin": "cli.pins:pin",
    "recall": "cli.bank:recall",
    "recall-query": "cli.transcripts:recall_query",
    "reindex": "cli.bank:reindex",
    "resume": "cli.privacy:resume_command",
    "retain": "cli.bank:retain",
    "serve": "cli.admin:serve",
    "show": "cli.transcripts:show",
    "status": "cli.admin:status",
    "turns": "cli.transcripts:turns",
    "uninstall": "cli.admin:uninstall",
    "unpin": "cli.pins:unpin",
    "warm": "cli.warm:warm",
}
"""Command name -> `module:attribute` inside the `lamina` package."""

SUMMARIES: dict[str, str] = {
    "banks": "The banks in the data directory, with their sizes.",
    "bench": "Benchmarks that print JSON, with a baseline from the same run.",
    "compile": "Fit a transcript into a token budget, summarising old parts.",
    "copy": "Copy banks between databases (SQLite <-> PostgreSQL).",
    "doctor": "The same as `lamina status`.",
    "documents": "The documents retained in a bank, by file name.",
    "export": "Write a bank as JSON Lines (to move or back it up).",
    "forget": "Forget a document, a memory, old memories or a whole bank.",
    "hook": "Serve a Claude Code hook: the event's JSON on stdin.",
    "import": "Load a bank written by `lamina export` (safe to repeat).",
    "injections": "What the prompt hook injected on each prompt, and why.",
    "inspect": "Look inside the memory banks in a browser.",
    "install": "Add Lamina's hooks to Claude Code, Codex, Gemini or Copilot.",
    "keys": "API keys for `lamina serve` and `lamina mcp` over HTTP.",
    "logs": "Context logs kept in a bank: list, show, delete.",
    "mcp": "Serve the memory banks over MCP (needs the `mcp` extra).",
    "memory": "Correct a memory: mark it wrong or superseded; unmark.",
    "migrate": "Bring the database's schema up to date.",
    "pause": "Pause memory for this project (its bank) or one session.",
    "pin": "Keep a stretch of a context log raw or at a summary level.",
    "recall": "The memories that best answer QUERY, within a token budget.",
    "recall-query": "The query recall would search with before the next prompt.",
    "reindex": "Embed again memories with missing or other-model vectors.",
    "resume": "Resume memory paused by `lamina pause`.",
    "retain": "Add transcripts, or what is new in them, to a bank.",
    "serve": "Serve the memory banks over HTTP (needs the `server` extra).",
    "show": "What a transcript holds: records, turns, tokens, tools.",
    "status": "Where the data lives, hooks, banks, last retains, hook log.",
    "turns": "The conversational turns of a transcript.",
    "uninstall": "Remove Lamina's hooks (Claude Code, Codex, Gemini, Copilot).",
    "unpin": "Remove a pin from a context log, by name.",
    "warm": "The warm server that answers the prompt hook's recalls.",
}
"""Each listed command's one-line summary: `lamina --help` shows it (whole, on one line at 80
columns; a test keeps it so) and so does the command's `short_help`, so the docs' table agrees.
A command missing here is hidden (`hook-worker`)."""

SECTIONS: dict[str, tuple[str, ...]] = {
    "Memory": (
        "retain",
        "recall",
        "documents",
        "banks",
        "memory",
        "forget",
        "pause",
        "resume",
        "injections",
    ),
    "Transcripts and context": (
        "show",
        "turns",
        "recall-query",
        "compile",
        "logs",
        "pin",
        "unpin",
    ),
    "Agents": ("install", "uninstall", "hook", "warm"),
    "Servers": ("serve", "mcp", "inspect", "keys"),
    "Maintenance": ("status", "doctor", "reindex", "migrate", "export", "import", "copy", "bench"),
}
"""How `lamina --help` groups the listed commands, in this order; a listed command no section
names is shown under "Other commands"."""


class _LazyGroup(LazyGroup):
    """Lamina's commands, with their summaries and the data options taken anywhere."""

    lazy_commands = COMMANDS
    sort_commands = True

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            return None
        if cmd_name in SUMMARIES and command.name == cmd_name:  # not under an alias's name
            command.short_help = SUMMARIES[cmd_name]
        _accept_data_options_anywhere(command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click resolves a command, with the nearest names suggested for a mistyped one
        (as click already does for options)."""
        name = args[0] if args else ""
        if name in COMMANDS or name.startswith("-"):
            return super().resolve_command(ctx, args)
        import difflib

        near = difflib.get_close_matches(name, [c for c in COMMANDS if c in SUMMARIES], n=3)
        if not near:
            return super().resolve_command(ctx, args)
        guesses = " or ".join(f"'{n}'" for n in near)
        raise click.UsageError(f"No such command '{name}'. Did you mean {guesses}?", ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listed commands from `SUMMARIES`, grouped by `SECTIONS`, each summary whole."""
        placed = [name for names in SECTIONS.values() for name in names if name in SUMMARIES]
        others = tuple(sorted(set(SUMMARIES) - set(placed)))
        for title, names in (*SECTIONS.items(), ("Other commands", others)):
            width = max(map(len, SUMMARIES))  # one column for every section
            rows = [(name.ljust(width), SUMMARIES[name]) for name in names if name in SUMMARIES]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows, col_max=width)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lamina")
@click.option(
    "--home",
    envvar="LAMINA_HOME",
    default=None,
    metavar="DIR",
    help="Data directory (default: $LAMINA_HOME, else the platform's user data folder).",
)
@click.option(
    "--database-url",
    envvar="LAMINA_DATABASE_URL",
    default=None,
    metavar="URL",
    help="Database: postgresql://... or a SQLite path (default: the data directory's lamina.db).",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None, database_url: str | None) -> None:
    """Lamina: memory for LLM agents.

    Reads agent transcripts (Claude Code sessions, Anthropic and OpenAI message lists, LoCoMo
    conversations), keeps what was said in a memory bank, and recalls what matters for the
    next prompt.
    """
    ctx.obj = {"home": home, "database_url": database_url}


def _data_option(name: str, metavar: str) -> click.Option:
    """`--home` or `--database-url` after a command's name, as before it: the value goes where
    the group's own option puts it (the root context's `obj`)."""
    key = name.removeprefix("--").replace("-", "_")

    def keep(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            root = ctx.find_root()
            root.obj = root.obj if root.obj is not None else {}
            root.obj[key] = value

    return click.Option(
        [name],
        metavar=metavar,
        default=None,
        expose_value=False,
        callback=keep,
        help=next(o.help for o in cli.params if isinstance(o, click.Option) and name in o.opts),
    )


def _accept_data_options_anywhere(command: click.Command) -> None:
    """`lamina banks --home DIR` works like `lamina --home DIR banks`. Adds nothing a command
    already has, so a command loaded twice is left as it is."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_data_options_anywhere(sub)
        return
    taken = {opt for param in command.params for opt in param.opts}
    for name, metavar in (("--home", "DIR"), ("--database-url", "URL")):
        if name not in taken:
            command.params.append(_data_option(name, metavar))


_SEE = {"bank": "lamina banks", "document": "lamina documents", "pin": "lamina pin {log}"}
"""The command that lists what a `NotFoundError` says is missing (by its `what`)."""


def error_type(exc: BaseException) -> str:
    """The one place the command line names its errors for `--json`: the HTTP API's error
    types where they mean the same (`lamina.integrations.api.errors`), a few of its own."""
    from ..errors import (
        AccessError,
        ConfigError,
        InputError,
        ReadError,
        StoreError,
        UnknownFormatError,
    )

    kinds: list[tuple[type[BaseException], str]] = [(NotFoundError, "not_found")]
    if isinstance(exc, LaminaError) and type(exc).__module__.startswith("lamina.context"):
        from ..context.frontier import OverBudgetError
        from ..context.pins import PinConflictError

        kinds += [(PinConflictError, "conflict"), (OverBudgetError, "over_budget")]
    kinds += [
        (UnknownFormatError, "unsupported_format"),
        (ReadError, "unreadable_input"),
        (InputError, "invalid_request"),
        (AccessError, "unauthorized"),
        (ConfigError, "config"),
        (StoreError, "store_unavailable"),
        (click.UsageError, "usage"),
        (click.ClickException, "invalid_request"),
        (ImportError, "missing_dependency"),
        (OSError, "os_error"),
        (click.exceptions.Abort, "aborted"),
        (KeyboardInterrupt, "interrupted"),
    ]
    return next((kind for cls, kind in kinds if isinstance(exc, cls)), "error")


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for `--json` (before a `--` that ends the options)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(message: str, code: int = 2, *, error: BaseException | None = None) -> NoReturn:
    """One line on stderr and exit `code`; with `--json` on the command line, also one JSON
    object on stdout, `{"error": {"type", "message"}}`, as the HTTP API answers."""
    click.echo(f"error: {message}", err=True)
    if error is not None and wants_json(sys.argv[1:] if _ARGS is None else _ARGS):
        from .common import emit_json

        emit_json({"error": {"type": error_type(error), "message": message}})
    sys.exit(code)


_ARGS: list[str] | None = None
"""The arguments `main` was given (None: the process's own)."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the CLI and turns Lamina's errors into one-line messages."""
    global _ARGS
    _ARGS = list(argv) if argv is not None else sys.argv[1:]
    try:
        code = cli.main(args=argv, prog_name="lamina", standalone_mode=False)
    except (click.ClickException, click.exceptions.Abort, LaminaError, OSError, ImportError,
            KeyboardInterrupt) as exc:  # fmt: skip
        exit_for(exc)
    if isinstance(code, int) and code:
        sys.exit(code)


def exit_for(exc: BaseException, args: list[str] | None = None) -> NoReturn:
    """Say what went wrong in one line (see `fail`) and exit with the error's code; re-raise
    what is not a user's error. `args`: the command line, when `main` did not parse it (the
    compile fast path, lamina.cli.compiling)."""
    global _ARGS
    if args is not None:
        _ARGS = list(args)
    if isinstance(exc, click.exceptions.Abort):
        fail("aborted", 130, error=exc)
    if isinstance(exc, click.ClickException):
        if wants_json(_ARGS or []):
            from .common import emit_json

            message = exc.format_message()
            emit_json({"error": {"type": error_type(exc), "message": message}})
        exc.show()
        sys.exit(exc.exit_code)
    if isinstance(exc, NotFoundError):
        see = _SEE.get(exc.what, "").format(log=exc.log)
        fail(f"{exc} (see `{see}`)" if see else str(exc), exc.exit_code, error=exc)
    if isinstance(exc, LaminaError):
        fail(str(exc), exc.exit_code, error=exc)
    if isinstance(exc, BrokenPipeError):
        sys.exit(0)
    if isinstance(exc, ImportError):
        fail(f"a dependency is missing or broken ({exc}); reinstall lamina", 1, error=exc)
    if isinstance(exc, KeyboardInterrupt):
        fail("interrupted", 130, error=exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}", 1, error=exc)
    raise exc
