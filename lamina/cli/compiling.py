"""`lamina compile`'s work, apart from its click command, and a short path to it.

`lamina compile FILE --bank B ...` is run again and again by the processes that keep a
conversation's context (one compile before every model call). Parsing its options with click
costs such a call about as much as the compile of an unchanged log itself, so `lamina.entry`
hands a command line that is plainly a compile (`FAST_OPTIONS` only, each given once, whole
numbers as digits) to `fast_compile`, which parses it by hand and runs the same `run_compile`
as the click command (`lamina.cli.admin`); anything else (`--help`, the deprecated `--format`,
a value click would refuse, an option this table does not know) goes to click, which
says what is wrong. Errors are reported as every command reports them (`lamina.cli.main`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .output import echo, emit_json

if TYPE_CHECKING:
    from ..config import Settings
    from ..context.compile import CompileResult
    from ..context.forest import Forest
    from ..context.render import RequestFormat
    from ..store.base import Store

__all__ = ["FAST_OPTIONS", "fast_compile", "run_compile"]

FAST_OPTIONS: dict[str, tuple[str, int | None]] = {
    "--budget": ("budget", 1000),
    "--reserve": ("reserve", 0),
    "--head": ("head_tokens", 0),
    "--recent": ("recent_tokens", 0),
    "--from": ("from_fmt", None),
    "--to": ("fmt", None),
    "--bank": ("bank", None),
    "--log": ("log_id", None),
    "--home": ("home", None),
    "--database-url": ("database_url", None),
}
"""Options with a value the short path parses: its parameter, and the least whole number it
takes (None: text). The click command's own declarations must agree (a test checks)."""

FAST_FLAGS = {"--json": "as_json", "--report": "show_report", "--ahead": "ahead"}
REQUEST_FORMATS = ("anthropic", "openai")


def _parse(args: Sequence[str]) -> dict[str, Any] | None:
    """The compile's parameters from its arguments, or None when click should parse them."""
    found: dict[str, Any] = {}
    files: list[str] = []
    at = 0
    while at < len(args):
        arg = args[at]
        at += 1
        if not arg.startswith("-"):
            files.append(arg)
            continue
        name, given, value = arg.partition("=")
        if name in FAST_FLAGS and not given:
            key = FAST_FLAGS[name]
            if key in found:
                return None
            found[key] = True
            continue
        if name not in FAST_OPTIONS:
            return None  # --help, --format, `-`, `--` and anything unknown
        if not given:
            if at >= len(args):
                return None
            value = args[at]
            at += 1
        key, least = FAST_OPTIONS[name]
        if key in found or not value or value.startswith("-"):
            return None
        if least is not None:
            if not (value.isascii() and value.isdigit()) or int(value) < least:
                return None
            found[key] = int(value)
        elif key == "fmt" and value not in REQUEST_FORMATS:
            return None
        else:
            found[key] = value
    if len(files) != 1 or Path(files[0]).is_dir():
        return None
    found["file"] = files[0]
    return found


def fast_compile(args: Sequence[str]) -> bool:
    """Run `lamina compile` with these arguments (those after `compile`) without click, when
    they are plainly a compile's; False (nothing done) when click should take them."""
    found = _parse(args)
    if found is None:
        return False
    try:
        from ..config import resolve_settings

        settings = resolve_settings(
            home=found.pop("home", None), database_url=found.pop("database_url", None)
        )
        run_compile(settings, **found)
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        from .main import exit_for  # click, only on the way out

        exit_for(exc, ["compile", *args])
    return True


def run_compile(
    settings: Settings,
    file: str,
    *,
    budget: int = 32_000,
    reserve: int | None = None,
    head_tokens: int | None = None,
    recent_tokens: int | None = None,
    from_fmt: str | None = None,
    fmt: RequestFormat | None = None,
    show_report: bool = False,
    bank: str | None = None,
    log_id: str | None = None,
    ahead: bool = False,
    as_json: bool = False,
) -> None:
    """`lamina compile` (see its help in lamina.cli.admin), its options parsed."""
    from ..context.frontier import CompileOptions
    from ..errors import InputError

    request_format: RequestFormat = fmt or "anthropic"
    if (log_id is not None or ahead) and bank is None:
        raise InputError("--log and --ahead need --bank")
    # A stored log's unchanged file is not detected again (see `_stored_format`).
    reader = _reader_name(file, from_fmt) if bank is None or from_fmt is not None else None
    options = CompileOptions(
        budget=budget,
        reserve=min(4000, budget // 8) if reserve is None else reserve,
        head_tokens=head_tokens,
        recent_tokens=recent_tokens,
    )
    if options.available < 500:
        raise InputError(f"--reserve {options.reserve} leaves too little of --budget {budget}")
    if bank is None:
        from ..context.compile import Compiler
        from ..context.configured import summariser_from_config
        from ..context.log import ContextLog
        from ..readers import read_transcript

        transcript = read_transcript(file, format=cast(str, reader))
        _print_warnings(transcript.warnings)
        log = ContextLog.from_messages(transcript.messages)
        compiler = Compiler(summariser_from_config(settings.summariser))
        result = compiler.compile(log, options, request_format=request_format)
        _print_compile(result, compiler.forest, as_json, show_report)
        return
    from ..context.configured import log_summariser
    from ..context.stored import StoredLog
    from ..store import open_store

    log_name = log_id or Path(file).stem
    store = open_store(settings.database)
    try:
        if reader is None:
            reader = _stored_format(store, bank, log_name, file) or _reader_name(file, None)
        stored = StoredLog.open(store, bank, log_name, log_summariser(store, settings.summariser))
        _print_warnings(stored.append_file(file, reader).warnings)
        result = stored.compile(options, request_format=request_format, ahead=ahead)
        _print_compile(result, stored.compiler.forest, as_json, show_report)
        sys.stdout.flush()
        if ahead:
            written = stored.wait()
            echo(f"wrote {written} summaries ahead of the next fold", err=True)
    finally:
        store.close()


def _reader_name(file: str, from_fmt: str | None) -> str:
    """The transcript format `--from` names, checked against the file, else the detected one."""
    from ..readers import reader_for

    return reader_for(file, from_fmt, option="--from").name


def _stored_format(store: Store, bank: str, log: str, file: str) -> str | None:
    """The format the stored log last read `file` in, when the file is unchanged since: a
    second compile of the same file detects nothing again (nor loads any reader)."""
    from ..context.source import FileCursor, unchanged_format

    state = store.load_frontier(bank, log) or {}
    return unchanged_format(file, FileCursor.of(state.get("source")))


def _print_warnings(warnings: Sequence[object]) -> None:
    for warning in warnings[:20]:
        echo(f"warning: {warning}", err=True)


def _print_compile(result: CompileResult, forest: Forest, as_json: bool, report: bool) -> None:
    for failure in forest.failures.values():
        state = "deferred to a later compile" if failure.deferred else "left raw"
        echo(
            f"warning: no summary for messages {failure.start}-{failure.end - 1} ({state}): "
            f"{failure.reason}",
            err=True,
        )
    for warning in result.report.get("warnings", []):
        echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json({"request": result.request, "report": result.report})
        return
    import orjson

    echo(orjson.dumps(result.request, option=orjson.OPT_INDENT_2).decode())
    if report:
        width = max(map(len, result.report), default=0)
        for key, value in result.report.items():
            echo(f"{key.replace('_', ' '):<{width}}  {_plain(value)}", err=True)


def _plain(value: object) -> str:
    """A report value in words: `a 1, b 2` for a mapping, a comma list for a list, yes/no for
    a flag; never a Python literal."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        parts = [
            f"level {k}: {_plain(v)}" if str(k).isdigit() else f"{k.replace('_', ' ')} {_plain(v)}"
            for k, v in ((str(k), v) for k, v in value.items())
        ]
        return ", ".join(parts) if parts else "none"
    if isinstance(value, list | tuple):
        return "; ".join(_plain(v) for v in value) if value else "none"
    return str(value)
