"""Pieces every command module shares: the --json option and printing one JSON document."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
import orjson

__all__ = ["emit_json", "json_option"]


def emit_json(value: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode())
    sys.stdout.write("\n")


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(f)
