"""`lamina compile` parsed without click (lamina.cli.compiling) says and does exactly what the
click command says and does: the same stdout, stderr and exit code, call after call, on a real
session, for stored and unstored logs, text and JSON, and for the errors a user makes; what it
does not parse goes to click. Its table of options agrees with the click command's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from lamina.cli.admin import compile_command
from lamina.cli.compiling import FAST_FLAGS, FAST_OPTIONS

from .conftest import CLAUDE_CODE, needs_shared

CLICK = "import sys; from lamina.cli.main import main; main(sys.argv[1:])"


def _run(home: Path, fast: bool, args: list[str]) -> tuple[int, str, str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_DATABASE_URL", None)
    head = ["-m", "lamina"] if fast else ["-c", CLICK]
    done = subprocess.run(
        [sys.executable, *head, "compile", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return done.returncode, _steady(done.stdout), _steady(done.stderr)


def _steady(text: str) -> str:
    """The output less the compile's own duration, the one thing two runs may not share."""
    if text.startswith("{"):
        data = json.loads(text)
        if isinstance(data.get("report"), dict):
            data["report"].pop("compile_ms", None)
        return json.dumps(data, sort_keys=True)
    return re.sub(r"(?m)^compile ms +\S+$", "compile ms", text)


@needs_shared
def test_the_short_path_says_and_does_what_click_does(tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    session.write_bytes((CLAUDE_CODE / "spotter-258c7280.jsonl").read_bytes())
    file = str(session)
    calls = [
        [file, "--bank", "p", "--json", "--budget", "6000", "--reserve", "600"],
        [file, "--bank", "p", "--json", "--budget", "6000", "--reserve", "600"],  # nothing new
        [file, "--bank=p", "--budget=6000", "--reserve=600", "--to", "openai", "--report"],
        [file, "--json", "--budget", "8000", "--head", "900", "--recent", "500"],  # no bank
        [file, "--bank", "p", "--log", "other", "--from", "claude-code", "--json"],
        [file, "--bank", "p", "--budget", "6000", "--reserve", "5800", "--json"],  # too little
        [str(tmp_path / "missing.jsonl"), "--bank", "p", "--json"],
        [file, "--log", "x"],  # --log needs --bank
        [file, "--bank", "p", "--budget", "999"],  # below the least: click says so
        [file, "--bank", "p", "--to", "xml"],
        [file, "--bank", "p", "--format", "openai", "--json"],  # the old name: click's
    ]
    for args in calls:
        fast = _run(tmp_path / "fast", True, args)
        slow = _run(tmp_path / "click", False, args)
        assert fast == slow, args
    codes = [_run(tmp_path / "fast", True, a)[0] for a in calls[5:10]]
    assert all(code != 0 for code in codes)


def test_the_short_path_knows_the_click_commands_options_as_click_declares_them() -> None:
    declared = {
        opt: param
        for param in compile_command.params
        if isinstance(param, click.Option)
        for opt in param.opts
    }
    for name, (key, least) in FAST_OPTIONS.items():
        if name in ("--home", "--database-url"):
            continue  # the group's options, accepted after the command's name too
        param = declared[name]
        assert param.name == key and not param.is_flag
        if least is None:
            assert not isinstance(param.type, click.IntRange)
        else:
            assert isinstance(param.type, click.IntRange) and param.type.min == least
    for name, key in FAST_FLAGS.items():
        assert declared[name].is_flag and declared[name].name == key
    # Every option is parsed by hand, but `--format` (deprecated, with a warning) and help.
    unparsed = set(declared) - set(FAST_OPTIONS) - set(FAST_FLAGS)
    assert unparsed == {"--format"}


@pytest.mark.parametrize("args", [["--help"], ["x.jsonl", "--format", "openai"], ["-h"]])
def test_what_the_short_path_does_not_parse_goes_to_click(args: list[str]) -> None:
    from lamina.cli.compiling import _parse

    assert _parse(args) is None
