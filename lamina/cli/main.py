"""The `lamina` command line: each command a thin call into the library.

With `--json`, stdout holds exactly one JSON document; warnings, progress and logs go to stderr.
Errors a user can fix print one line (`error: ...`) and exit non-zero, never a traceback.

Commands are loaded by name, when they run: `lamina recall` imports the recall command's module
and no other, and `lamina --help` lists every command from `SUMMARIES` without importing any.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..errors import LaminaError, NotFoundError

__all__ = ["COMMANDS", "SUMMARIES", "cli", "main"]

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
    "bench": "Benchmarks: JSON on stdout, a baseline measured in the same run.",
    "compile": (
        "Compile a transcript into a request that fits a token budget, old stretches "
        "folded into summaries shown as recall pairs, written by the configured "
        "summariser (`summariser` in the config file or LAMINA_SUMMARISER; the offline "
        "extractive one by default)."
    ),
    "copy": "Copy banks between databases (SQLite <-> PostgreSQL), without loss, resumable.",
    "doctor": "Where the data lives, installed hooks, banks, last retains, the hook log's tail.",
    "documents": "The documents retained in a bank.",
    "export": "Write a bank as JSON Lines: documents, cursors, records, memories (and vectors).",
    "forget": (
        "Forget a document (its memories and records), one memory, old memories, or a whole bank."
    ),
    "hook": "Serve a Claude Code hook: reads the event's JSON on stdin (any event).",
    "import": "Load a bank written by `lamina export` (merging by id; safe to repeat).",
    "injections": "What the prompt hook injected on each prompt, and why nothing when nothing was.",
    "inspect": (
        "Look inside the memory banks in a browser: banks, memories, recall, context logs, hooks."
    ),
    "install": "Add Lamina's hooks to Claude Code's settings, keeping everything else there.",
    "keys": "API keys for `lamina serve` (stored hashed, scoped to banks).",
    "logs": "Context logs kept in a bank: list them, show one, delete one.",
    "memory": "Correct a memory: mark it wrong, or superseded by a newer one; unmark to undo.",
    "mcp": "Serve the memory banks over MCP, on stdio or streamable HTTP (needs the `mcp` extra).",
    "migrate": "Bring the database's schema up to date (first use does this too).",
    "pause": (
        "Pause memory for this project (its bank) or one session: the hooks neither recall "
        "nor retain for it, and what is said meanwhile is never retained, not even after "
        "`lamina resume`."
    ),
    "pin": (
        "Pin a message range or a document of a context log: keep it raw (--raw), at an "
        "exact summary level (--level N) or at most a level (--max-level N)."
    ),
    "recall": "The memories that best answer QUERY, within a token budget.",
    "recall-query": "The query recall would search memory with before the next prompt.",
    "reindex": "Embed again the memories whose vectors are missing or from another model.",
    "resume": "Resume memory paused by `lamina pause` for this project (its bank) or one session.",
    "retain": "Add transcripts, or what is new in them, to a bank.",
    "serve": "Serve the memory banks over HTTP (needs the `server` extra).",
    "show": "What a transcript holds: records by type and kind, turns, tokens, time span, tools.",
    "status": "Where the data lives, installed hooks, banks, last retains, the hook log's tail.",
    "turns": "The conversational turns of a transcript: where each starts and what was said.",
    "uninstall": "Remove Lamina's hooks from Claude Code's settings (nothing else is touched).",
    "unpin": "Remove a pin from a context log, by name (see `lamina pin LOG` for the names).",
    "warm": "The warm server: holds the memory bank open and answers the prompt hook's recalls.",
}
"""The first sentence of each listed command's help, shown by `lamina --help` (a test keeps it
equal to the command's own). A command missing here is hidden (`hook-worker`)."""


class _LazyGroup(click.Group):
    """A group whose commands are imported when they are asked for by name."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        # __import__ rather than importlib.import_module: only the former is seen by
        # `python -X importtime`, which the tests and profiles read.
        command = getattr(__import__(f"lamina.{module}", fromlist=[attr]), attr)
        assert isinstance(command, click.Command)
        _accept_data_options_anywhere(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from `SUMMARIES`, shortened as click shortens a command's help."""
        if not SUMMARIES:
            return
        limit = formatter.width - 6 - max(map(len, SUMMARIES))
        rows = [
            (name, click.Command(name, help=text).get_short_help_str(limit))
            for name, text in sorted(SUMMARIES.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


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


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the CLI and turns Lamina's errors into one-line messages."""
    try:
        code = cli.main(args=argv, prog_name="lamina", standalone_mode=False)
    except click.exceptions.Abort:
        fail("aborted", 130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except NotFoundError as exc:
        see = _SEE.get(exc.what, "").format(log=exc.log)
        fail(f"{exc} (see `{see}`)" if see else str(exc), exc.exit_code)
    except LaminaError as exc:
        fail(str(exc), exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except ImportError as exc:
        fail(f"a dependency is missing or broken ({exc}); reinstall lamina", 1)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}", 1)
    if isinstance(code, int) and code:
        sys.exit(code)
