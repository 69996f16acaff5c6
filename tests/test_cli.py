"""The command line, run as a user runs it: a subprocess, stdout and stderr apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CC, CLAUDE_CODE, EXAMPLE, needs_shared


def lamina(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def build(cc: CC, tmp_path: Path) -> Path:
    cc.user("set up the project")
    cc.assistant("Creating files.", msg_id="m1")
    cc.tool_use("t1", "Write", msg_id="m1", file_path="a.py")
    cc.tool_result("t1", "written")
    cc.assistant("Done.")
    cc.user("<lamina_memories>\n- [2026-01-01] old fact\n</lamina_memories>\nnow add tests")
    cc.tool_use("t2", "Bash", command="pytest")
    cc.tool_result("t2", "1 passed")
    cc.assistant("Tests pass.")
    return cc.write(tmp_path / "s.jsonl")


def test_show_json_is_one_document_with_the_counts(cc: CC, tmp_path: Path) -> None:
    path = build(cc, tmp_path)
    result = lamina("show", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["format"] == "claude-code"
    assert data["records"] == 9 and data["messages"] == 8
    assert data["turns"] == 2 and data["user_records"] == 4
    assert data["tool_result_only_user_records"] == 2
    assert data["tool_calls"] == 2 and data["tools"] == {"Write": 1, "Bash": 1}
    assert data["tokens"] > 0 and data["warnings"] == 0


def test_turns_json_gives_lines_ids_and_conversational_text(cc: CC, tmp_path: Path) -> None:
    path = build(cc, tmp_path)
    result = lamina("turns", str(path), "--json")
    assert result.returncode == 0, result.stderr
    turns = json.loads(result.stdout)
    assert [(t["turn"], t["line"], t["text"]) for t in turns] == [
        (0, 1, "set up the project"),
        (1, 6, "now add tests"),
    ]
    assert turns[0]["message_id"] == "u-1" and turns[0]["timestamp"].startswith("2026-03-01")
    last = json.loads(lamina("turns", str(path), "--last", "1", "--json").stdout)
    assert [t["turn"] for t in last] == [1]


def test_recall_query_json(cc: CC, tmp_path: Path) -> None:
    path = build(cc, tmp_path)
    result = lamina("recall-query", str(path), "--json", "--turns", "1", "--max-chars", "200")
    data = json.loads(result.stdout)
    assert data["query"] == (
        "user: set up the project\nassistant: Creating files.\n"
        "assistant: Done.\nuser: now add tests"
    )
    assert data["chars"] == len(data["query"]) and data["turns"] == 1
    prompted = json.loads(
        lamina("recall-query", str(path), "--prompt", "and docs?", "--json").stdout
    )
    assert prompted["query"].endswith("user: and docs?")
    assert "now add tests" in prompted["query"]


def test_warnings_go_to_stderr_and_json_stays_clean(cc: CC, tmp_path: Path) -> None:
    path = build(cc, tmp_path)
    with path.open("a") as handle:
        handle.write("{not json}\n")
    result = lamina("turns", str(path), "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)) == 2
    assert result.stderr.startswith(f"warning: {path}:10: invalid JSON")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["show", "/nonexistent/x.jsonl"], 2, "error: /nonexistent/x.jsonl: no such file"),
        (["show", "{tmp}"], 2, "is a directory"),
        (["show", "{tmp}/bin.dat"], 2, "binary data, not a transcript"),
        (["show", "{tmp}/s.jsonl", "--format", "nope"], 2, "unknown format 'nope'"),
        (["turns", "{tmp}/s.jsonl", "--last", "0"], 2, "Invalid value for '--last'"),
    ],
)
def test_user_mistakes_get_one_line_and_no_traceback(
    cc: CC, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    build(cc, tmp_path)
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02" * 1000)
    result = lamina(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_example_session_runs_through_every_command() -> None:
    if not EXAMPLE.exists():
        pytest.skip("examples/session.jsonl not present")
    for command in (["show"], ["turns"], ["recall-query"]):
        result = lamina(*command, str(EXAMPLE), "--json")
        assert result.returncode == 0, result.stderr
        json.loads(result.stdout)
        assert "warning" not in result.stderr


@needs_shared
def test_bench_turns_reports_naive_against_lamina() -> None:
    result = lamina(
        "bench", "turns", "--data", str(CLAUDE_CODE / "spotter-258c7280.jsonl"), "--json"
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)["files"]["spotter-258c7280.jsonl"]
    naive, ours = figures["n=3"]["naive"], figures["n=3"]["lamina"]
    assert ours["turns"] == 2 and naive["turns"] <= ours["turns"]
    assert ours["context_chars"] > naive["context_chars"]


def test_help_groups_every_command_with_its_whole_summary() -> None:
    """`lamina --help` lists commands from a table, without importing them, grouped in
    sections; each summary is whole (never cut by "...") on one line at 80 columns, and it is
    the command's own short help, so the docs' table says the same."""
    import os
    import re

    import click

    from lamina.cli.main import COMMANDS, SECTIONS, SUMMARIES, cli

    ctx = click.Context(cli)
    loaded = {name: cli.get_command(ctx, name) for name in COMMANDS}
    assert all(command is not None for command in loaded.values())
    visible = {n for n, c in loaded.items() if c is not None and not c.hidden}
    assert set(SUMMARIES) == visible and "hook-worker" not in visible
    sectioned = [name for names in SECTIONS.values() for name in names]
    assert sorted(sectioned) == sorted(visible)  # every command in exactly one section
    for name, command in loaded.items():
        if name in SUMMARIES and command is not None and command.name == name:
            assert command.get_short_help_str(limit=200) == SUMMARIES[name]
    listed = subprocess.run(
        [sys.executable, "-m", "lamina", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=120,
    )
    assert listed.returncode == 0
    for title, names in SECTIONS.items():
        section = listed.stdout.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in section.splitlines()] == list(names)
    for name, summary in SUMMARIES.items():
        assert re.search(rf"\n  {re.escape(name)} +{re.escape(summary)}\n", listed.stdout), name
    commands = listed.stdout.split("\nMemory:\n", 1)[1]
    assert "…" not in commands and "..." not in commands
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80


@pytest.mark.parametrize("name", ["doctor", "keys", "bench", "recall-query", "hook-worker"])
def test_every_kind_of_command_answers_its_help(name: str) -> None:
    result = lamina(name, "--help")
    assert result.returncode == 0, result.stderr
    assert f"Usage: lamina {name}" in result.stdout


def test_an_unknown_command_is_one_line_with_the_nearest_names() -> None:
    result = lamina("recal", "x")
    assert result.returncode == 2
    assert "No such command 'recal'. Did you mean 'recall'" in result.stderr
    assert "Traceback" not in result.stderr
    far = lamina("zzzzqqq")
    assert far.returncode == 2
    assert "No such command 'zzzzqqq'." in far.stderr and "Did you mean" not in far.stderr
