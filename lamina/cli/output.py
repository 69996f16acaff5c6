"""Writing a command's output without click, for paths that do not import it (the compile
fast path): one JSON document, or a line, as `click.echo` would write it."""

from __future__ import annotations

import sys
from typing import Any

import orjson

__all__ = ["echo", "emit_json"]


def emit_json(value: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode())
    sys.stdout.write("\n")


def echo(text: str, *, err: bool = False) -> None:
    """A line on stdout (or stderr), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()
