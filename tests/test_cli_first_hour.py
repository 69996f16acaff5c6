"""What a new user meets in the first hour of the command line (issue #30), run as they run it:
wrong input fails before anything is written, output names files and fits a screen, and every
command speaks one grammar (`--json` errors, formats, suggestions)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CLAUDE_CODE, EXAMPLE, needs_shared

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")

SESSION = "7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17"
"""The session id of examples/session.jsonl: its document's id."""

SHARED = CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl"


def lamina(
    home: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "LAMINA_HOME": str(home), "COLUMNS": "100", **(env or {})}
    for key in ("LAMINA_BANK", "LAMINA_DATABASE_URL", "LAMINA_CONFIG"):
        environment.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=home.parent,
        timeout=300,
    )


def documents(home: Path, bank: str) -> list[dict[str, object]]:
    listed = lamina(home, "documents", "--bank", bank, "--json")
    if listed.returncode == 2:  # no such bank
        return []
    found: list[dict[str, object]] = json.loads(listed.stdout)["documents"]
    return found


# Errors before anything is written ----------------------------------------------------------


@pytest.mark.parametrize(
    "path", [EXAMPLE, pytest.param(SHARED, marks=needs_shared)], ids=["example", "shared"]
)
def test_retain_in_a_format_the_file_is_not_fails_and_stores_nothing(
    tmp_path: Path, path: Path
) -> None:
    home = tmp_path / "home"
    for _ in range(2):  # again: still no document
        wrong = lamina(home, "retain", str(path), "--format", "openai", "--bank", "b")
        assert wrong.returncode == 2
        assert wrong.stderr.splitlines() == [
            f"error: {path}: not in the openai format (it looks like claude-code; "
            "leave out --format to detect it)"
        ]
        assert wrong.stdout == ""
        assert documents(home, "b") == []
    as_json = lamina(home, "retain", str(path), "--format", "anthropic", "--bank", "b", "--json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)
    assert report["files"] == [] and report["error"]["type"] == "unsupported_format"
    assert "not in the anthropic format" in report["error"]["message"]
    right = lamina(home, "retain", str(path), "--bank", "b")
    assert right.returncode == 0, right.stderr
    assert len(documents(home, "b")) == 1  # the file's one document, nothing left before it


def test_show_and_turns_in_a_format_the_file_is_not_fail(tmp_path: Path) -> None:
    for command in ("show", "turns", "recall-query"):
        wrong = lamina(tmp_path, command, str(EXAMPLE), "--format", "openai")
        assert wrong.returncode == 2, command
        assert wrong.stderr.splitlines() == [
            f"error: {EXAMPLE}: not in the openai format (it looks like claude-code; "
            "leave out --format to detect it)"
        ]
        assert wrong.stdout == ""
    as_json = lamina(tmp_path, "show", str(EXAMPLE), "--format", "openai", "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["type"] == "unsupported_format"
    right = lamina(tmp_path, "show", str(EXAMPLE), "--format", "claude-code", "--json")
    assert right.returncode == 0 and json.loads(right.stdout)["turns"] > 0


def test_a_format_no_reader_recognises_is_still_the_users_to_name(tmp_path: Path) -> None:
    # A plain role/content list in a .json file: both message-list readers accept it.
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "We chose SQLite."}]))
    for fmt in ("openai", "anthropic"):
        shown = lamina(tmp_path / "home", "show", str(chat), "--format", fmt, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["messages"] == 1


def test_retain_of_a_directory_with_no_transcripts_says_so(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a transcript")
    said = lamina(home, "retain", str(empty), "--bank", "b")
    assert said.returncode == 2
    assert said.stderr.splitlines() == [
        f"error: {empty}: nothing to retain (no *.jsonl or *.json files in it)"
    ]
    assert said.stdout == ""
    as_json = lamina(home, "retain", str(empty), "--bank", "b", "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"] == {
        "type": "invalid_request",
        "message": f"{empty}: nothing to retain (no *.jsonl or *.json files in it)",
    }
    assert documents(home, "b") == []
    # Beside a file, an empty directory is a warning and the file is retained.
    both = lamina(home, "retain", str(empty), str(EXAMPLE), "--bank", "b")
    assert both.returncode == 0, both.stderr
    assert f"warning: {empty}: no *.jsonl or *.json files in it" in both.stderr
    assert [d["id"] for d in documents(home, "b")] == [SESSION]


def test_mcp_without_the_extra_fails_before_answering(tmp_path: Path) -> None:
    # The MCP SDK made unfindable, as in an install without the `mcp` extra.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoMCP:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp' or name.startswith('mcp.'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _NoMCP())\n"
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
    }
    env = {"PYTHONPATH": str(hide)}
    for args in (["mcp"], ["mcp", "--transport", "streamable-http"]):
        result = lamina(tmp_path / "home", *args, env=env, stdin=json.dumps(initialize) + "\n")
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""  # no initialize answer: the client is not told it started
        assert result.stderr.splitlines() == [
            "error: `lamina mcp` needs the `mcp` extra: pip install 'lamina[mcp]'"
        ]


# Output for people ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def retained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose bank `ex` holds the example session."""
    home = tmp_path_factory.mktemp("first-hour") / "home"
    done = lamina(home, "retain", str(EXAMPLE), "--bank", "ex")
    assert done.returncode == 0, done.stderr
    return home


def test_documents_are_named_by_their_file_with_the_id_beside_it(retained: Path) -> None:
    listed = lamina(retained, "documents", "--bank", "ex")
    assert listed.returncode == 0, listed.stderr
    assert re.fullmatch(
        rf"session\.jsonl \({SESSION}\)  retained \d{{4}}-\d\d-\d\d \d\d:\d\d  {EXAMPLE}\n",
        listed.stdout,
    )


def test_recall_shows_a_few_short_results_and_full_shows_all(retained: Path) -> None:
    query = "which database did we choose, and why?"
    every = json.loads(lamina(retained, "recall", query, "--bank", "ex", "--json").stdout)
    assert len(every["results"]) > 5
    compact = lamina(retained, "recall", query, "--bank", "ex")
    assert compact.returncode == 0, compact.stderr
    heads = [line for line in compact.stdout.splitlines() if not line.startswith("    ")]
    assert len(heads) == 5
    for rank, head in enumerate(heads, 1):
        assert head.startswith(f"[{rank}] session.jsonl ({SESSION[:8]})  2026-03-14 "), head
        assert "score " in head
    bodies = compact.stdout.split("\n[")
    assert all(len(body.splitlines()) <= 4 for body in bodies)  # the head and 3 lines
    assert max(len(line) for line in compact.stdout.splitlines()) <= 100
    shown = f"5 of {len(every['results'])} memories shown; --full shows them all, whole"
    assert shown in compact.stderr
    full = lamina(retained, "recall", query, "--bank", "ex", "--full")
    assert full.returncode == 0, full.stderr
    full_heads = [line for line in full.stdout.splitlines() if re.match(r"\[\d+\] ", line)]
    assert len(full_heads) == len(every["results"])
    assert f"session.jsonl ({SESSION})" in full_heads[0]
    for hit in every["results"]:  # every memory whole
        assert hit["text"].splitlines()[0] in full.stdout


def test_status_shows_times_for_people(retained: Path) -> None:
    status = lamina(retained, "status")
    assert status.returncode == 0, status.stderr
    line = next(x for x in status.stdout.splitlines() if "last retain" in x)
    assert re.fullmatch(
        rf" +session\.jsonl \({SESSION}\)  last retain \d{{4}}-\d\d-\d\d \d\d:\d\d, "
        r"(just now|\d+ minutes? ago)",
        line,
    )
    assert not re.search(r"\d\d:\d\d:\d\d\.\d+", status.stdout)  # no microseconds
    assert "none (no warm server)" not in status.stdout
    assert "warm server not running (optional: `lamina warm start`)" in status.stdout


def test_forget_says_what_it_did_in_words(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert lamina(home, "retain", str(EXAMPLE), "--bank", "ex").returncode == 0
    memories = json.loads(lamina(home, "banks", "--json").stdout)["banks"][0]["memories"]
    gone = lamina(home, "forget", str(EXAMPLE), "--bank", "ex")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout == f"forgot session.jsonl ({SESSION}) from bank ex: {memories} memories\n"
    old = lamina(home, "forget", "--older-than", "2026-01-01", "--bank", "ex")
    assert old.stdout == "forgot 0 memories of bank ex from before 2026-01-01 00:00\n"
    whole = lamina(home, "forget", "--all-of-bank", "ex", "--yes")
    assert whole.stdout == "deleted bank ex (0 documents, 0 memories)\n"


# One grammar ---------------------------------------------------------------------------------


PROTOCOLS = {"hook", "mcp", "serve", "inspect"}
"""Commands whose output is a protocol (or a browser page): no --json, their help says why."""


def test_every_command_that_prints_a_result_takes_json() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    try:
        from gen_docs import walk
    finally:
        sys.path.pop(0)
    import click

    checked = 0
    for entry in walk():
        if isinstance(entry.command, click.Group) or entry.alias_of:
            continue
        options = {o for p in entry.command.params for o in getattr(p, "opts", [])}
        name = " ".join(entry.path)
        if name in PROTOCOLS:
            assert "--json" not in options
            assert "No --json:" in (entry.command.help or ""), name
        else:
            assert "--json" in options, entry.name
        checked += 1
    assert checked > 40


def test_compile_names_its_output_format_to_and_keeps_the_old_spelling(tmp_path: Path) -> None:
    args = ["compile", str(EXAMPLE), "--budget", "8000"]
    new = lamina(tmp_path, *args, "--to", "openai", "--json")
    assert new.returncode == 0, new.stderr
    old = lamina(tmp_path, *args, "--format", "openai", "--json")
    assert old.returncode == 0, old.stderr
    assert "warning: compile --format is deprecated: use --to" in old.stderr
    assert "deprecated" not in new.stderr
    assert json.loads(old.stdout)["request"] == json.loads(new.stdout)["request"]
    both = lamina(tmp_path, *args, "--to", "anthropic", "--format", "openai")
    assert both.returncode == 2
    assert "--to anthropic and --format openai disagree" in both.stderr
    wrong_input = lamina(tmp_path, *args, "--from", "openai")
    assert wrong_input.returncode == 2
    assert "leave out --from to detect it" in wrong_input.stderr
    helped = lamina(tmp_path, "compile", "--help")
    assert "--to [anthropic|openai]" in helped.stdout
    assert "--format [" not in helped.stdout  # the old name works, unlisted


def test_recall_help_explains_limit_and_full(tmp_path: Path) -> None:
    helped = lamina(tmp_path, "recall", "--help")
    options = helped.stdout.split("Options:")[1]
    limit = options.split("--limit", 1)[1].split("\n  -", 1)[0]
    assert "Most memories to return" in limit
    assert "--full" in options


def on_a_terminal(home: Path, *args: str) -> str:
    """What `lamina ARGS` writes to a terminal, stdout and stderr both (progress is drawn only
    there)."""
    import pty

    main, secondary = pty.openpty()
    environment = {**os.environ, "LAMINA_HOME": str(home), "COLUMNS": "100"}
    environment.pop("LAMINA_BANK", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "lamina", *args],
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env=environment,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert process.wait(timeout=300) == 0
    return b"".join(chunks).decode("utf-8", errors="replace")


@needs_shared
def test_progress_never_runs_into_a_result_and_ends_at_its_total(tmp_path: Path) -> None:
    home = tmp_path / "home"
    big = CLAUDE_CODE / "spotter-258c7280.jsonl"
    shown = on_a_terminal(home, "retain", str(SHARED), str(big), "--bank", "b")
    # Every result line starts a line of its own, never after a progress line's text.
    for frame in re.split(r"[\r\n]", shown):
        text = frame.replace("\x1b[2K", "")
        if "new records" in text:
            assert text.startswith((str(SHARED), str(big))), text
    embedded = on_a_terminal(home, "reindex", "--force", "--bank", "b")
    lines = [f.replace("\x1b[2K", "") for f in re.split(r"[\r\n]", embedded)]
    drawn = [line for line in lines if line.startswith("embedding b:")]
    result = next(i for i, line in enumerate(lines) if "memories embedded with" in line)
    assert lines[result].startswith("b: ")
    if drawn:  # drawn only when the work outlasts the bar's delay: then it ends at 100%
        assert "(100%)" in drawn[-1]
        assert all("embedding b:" not in line for line in lines[result:])


def test_compile_report_is_words_not_python(tmp_path: Path) -> None:
    out = lamina(tmp_path, "compile", str(EXAMPLE), "--budget", "3000", "--report")
    assert out.returncode == 0, out.stderr
    report = out.stderr.splitlines()
    assert not any(c in out.stderr for c in "{}[]'")  # no dict, list or string literal
    assert any(re.fullmatch(r"budget +3,000", line) for line in report)
    assert any(re.fullmatch(r"summaries by level +level 1: \d+.*", line) for line in report)


def test_banks_and_import_count_in_words(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert lamina(home, "retain", str(EXAMPLE), "--bank", "ex").returncode == 0
    listed = json.loads(lamina(home, "banks", "--json").stdout)["banks"][0]
    line = lamina(home, "banks").stdout
    assert f": 1 document, {listed['memories']} memories, {listed['records']} records" in line
    exported = tmp_path / "ex.jsonl"
    assert lamina(home, "export", "--bank", "ex", "-o", str(exported)).returncode == 0
    again = lamina(tmp_path / "other", "import", str(exported), "--no-reindex")
    assert again.stdout == (
        f"imported into ex: 1 document, {listed['memories']} memories "
        f"({listed['records']} new records)\n"
    )
