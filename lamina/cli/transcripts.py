"""Commands that read a transcript without a bank: `show`, `turns`, `recall-query`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from ..bank.query import QueryOptions, recall_query_for_file
from ..errors import ReadWarning
from ..messages import Message
from ..progress import Progress, clear_line
from ..readers import read_messages, reader_for
from ..stats import transcript_stats
from ..turns import iter_turns
from .common import count_option, emit_json, json_option

__all__ = ["recall_query", "show", "turns"]

MAX_SHOWN_WARNINGS = 20


class WarningPrinter:
    """Prints the first read warnings to stderr, then counts the rest."""

    def __init__(self, limit: int = MAX_SHOWN_WARNINGS) -> None:
        self.limit = limit
        self.count = 0

    def __call__(self, warning: ReadWarning) -> None:
        self.count += 1
        if self.count <= self.limit:
            clear_line()
            click.echo(f"warning: {warning}", err=True)

    def summary(self) -> None:
        if self.count > self.limit:
            click.echo(f"warning: … and {self.count - self.limit} more warnings", err=True)


def _format_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--format",
        "fmt",
        metavar="NAME",
        default=None,
        help="Transcript format (claude-code, anthropic, openai, locomo); detected when omitted.",
    )(f)


def _file_argument(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.argument("file", type=click.Path(dir_okay=False, path_type=str))(f)


def _messages_with_progress(
    path: str, fmt: str | None, warn: WarningPrinter, label: str
) -> Iterator[Message]:
    reader = reader_for(path, fmt)
    size = Path(path).stat().st_size
    with Progress(label, total=size, unit="B") as progress:
        for message in read_messages(path, format=reader.name, warn=warn):
            if message.source.end_offset is not None:
                progress.update(message.source.end_offset)
            yield message


@click.command()
@_file_argument
@_format_option
@json_option
def show(file: str, fmt: str | None, as_json: bool) -> None:
    """What a transcript holds: records by type and kind, turns, tokens, time span, tools.

    Example: lamina show examples/session.jsonl
    """
    warn = WarningPrinter()
    fmt_name = reader_for(file, fmt).name
    stats = transcript_stats(_messages_with_progress(file, fmt_name, warn, "reading"))
    warn.summary()
    data = {"file": file, "format": fmt_name, **stats.as_dict(), "warnings": warn.count}
    if as_json:
        emit_json(data)
        return
    span = ""
    if stats.first_time and stats.last_time:
        minutes = (stats.last_time - stats.first_time).total_seconds() / 60
        span = f"{stats.first_time:%Y-%m-%d %H:%M} → {stats.last_time:%Y-%m-%d %H:%M} UTC"
        span += f" ({minutes:,.0f} min)"
    out = [
        f"{file}",
        f"  format        {fmt_name}",
        f"  records       {stats.records:,}  "
        + ", ".join(f"{k} {v:,}" for k, v in stats.records_by_type.most_common()),
        f"  messages      {stats.messages:,}  "
        + ", ".join(f"{k} {v:,}" for k, v in stats.messages_by_kind.most_common()),
        f"  turns         {stats.turns:,}  (user-role records: {stats.user_records:,}, "
        f"tool-result only: {stats.tool_result_only_user_records:,})",
        f"  tokens        {stats.tokens:,}  (o200k, user and assistant messages)",
        f"  time          {span or 'no timestamps'}",
        f"  tool calls    {stats.tool_calls:,}  "
        + ", ".join(f"{k} {v}" for k, v in stats.tools.most_common(8)),
        f"  sidechains    {stats.sidechain_messages:,} messages",
        f"  compactions   {stats.compactions:,}",
    ]
    if warn.count:
        out.append(f"  warnings      {warn.count:,} (see stderr)")
    click.echo("\n".join(out))


@click.command()
@_file_argument
@count_option("--last", "last", at_least=1, help="Only the last N turns.")
@count_option(
    "--width",
    at_least=20,
    default=100,
    show_default=False,
    help="Text width per turn (text output).",
)
@_format_option
@json_option
def turns(file: str, last: int | None, width: int, fmt: str | None, as_json: bool) -> None:
    """The conversational turns of a transcript: where each starts and what was said.

    A turn starts at a user message with real conversational text; tool results, injected
    memory blocks and the host's synthetic records start none.

    Example: lamina turns examples/session.jsonl --last 3
    """
    warn = WarningPrinter()
    messages = list(_messages_with_progress(file, fmt, warn, "reading"))
    warn.summary()
    found = list(iter_turns(messages))
    if last is not None:
        found = found[-last:]
    if as_json:
        emit_json(
            [
                {
                    "turn": t.index,
                    "line": t.message.source.line,
                    "message_id": t.message.id,
                    "timestamp": t.message.timestamp.isoformat() if t.message.timestamp else None,
                    "records": sum(max(1, len(m.records)) for m in messages[t.start : t.end]),
                    "tool_calls": sum(len(m.tool_uses) for m in messages[t.start : t.end]),
                    "text": t.text,
                }
                for t in found
            ]
        )
        return
    if not found:
        click.echo("no conversational turns")
        return
    for t in found:
        when = f"{t.message.timestamp:%Y-%m-%d %H:%M}" if t.message.timestamp else "undated"
        where = f"line {t.message.source.line}" if t.message.source.line else f"#{t.start}"
        calls = sum(len(m.tool_uses) for m in messages[t.start : t.end])
        text = " ".join(t.text.split())
        if len(text) > width:
            text = text[: width - 1] + "…"
        click.echo(f"[{t.index}] {when}  {where}  ({t.end - t.start} msgs, {calls} tool calls)")
        click.echo(f"    {text}")


@click.command("recall-query")
@_file_argument
@click.option(
    "--prompt", default=None, help="The next prompt (default: the transcript's last turn)."
)
@count_option(
    "--context-turns",
    "--turns",
    "context_turns",
    at_least=0,
    default=3,
    help="Turns of context before the prompt; the prompt itself is not counted.",
)
@count_option(
    "--max-chars",
    at_least=1,
    default=800,
    help="Cap on the whole query, labels included; oldest context is dropped first.",
)
@_format_option
@json_option
def recall_query(
    file: str,
    prompt: str | None,
    context_turns: int,
    max_chars: int,
    fmt: str | None,
    as_json: bool,
) -> None:
    """The query recall would search memory with before the next prompt.

    Example: lamina recall-query examples/session.jsonl --prompt "what port do we use?"
    """
    warn = WarningPrinter()
    options = QueryOptions(context_turns=context_turns, max_chars=max_chars)
    fmt = reader_for(file, fmt).name
    result = recall_query_for_file(file, prompt, options, format=fmt, warn=warn)
    warn.summary()
    if as_json:
        emit_json(
            {
                "query": result.query,
                "prompt": result.prompt,
                "turns": result.turns,
                "chars": result.chars,
                "truncated": result.truncated,
                "context": [
                    {"role": e.role.value, "message_id": e.message_id, "text": e.text}
                    for e in result.context
                ],
            }
        )
        return
    if not result.query:
        click.echo("no prompt found (the transcript has no conversational turn)", err=True)
        return
    click.echo(result.query)
    note = f"{result.chars} chars, {result.turns} turns of context"
    click.echo(f"({note}{', truncated to fit' if result.truncated else ''})", err=True)
