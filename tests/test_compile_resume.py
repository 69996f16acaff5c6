"""A stored log's compile resumes where the last one read its transcript: it reads only what
was appended, and compiles exactly what a compile re-reading the whole file would, on real
Claude Code sessions, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from lamina.context import CompileOptions, ExtractiveSummariser, StoredLog
from lamina.readers import read_transcript
from lamina.store import Store, open_store

from .conftest import CLAUDE_CODE, needs_shared

OPTIONS = CompileOptions(budget=6_000, reserve=600)
SESSIONS = ["drmaciver-python-to-rust-port.jsonl", "spotter-258c7280.jsonl"]


@pytest.fixture
def store(database: str) -> Iterator[Store]:
    s = open_store(database)
    yield s
    s.close()


def _lines(name: str) -> list[bytes]:
    return (CLAUDE_CODE / name).read_bytes().splitlines(keepends=True)


def _cuts(lines: Sequence[bytes], parts: int) -> list[int]:
    """Where to cut the file into `parts`, each cut inside a streamed assistant response (two
    lines of one message id) when there is one near, else at an even share."""
    ids: list[str | None] = []
    for line in lines:
        try:
            body = json.loads(line).get("message")
        except (json.JSONDecodeError, AttributeError):
            body = None
        ids.append(body.get("id") if isinstance(body, dict) else None)
    cuts = []
    for k in range(1, parts):
        at = len(lines) * k // parts
        inside = next(
            (i for i in range(at, min(len(lines), at + 200)) if ids[i] and ids[i] == ids[i - 1]),
            at,
        )
        cuts.append(inside)
    return [*cuts, len(lines)]


def _said(store: Store, bank: str) -> list[tuple[object, ...]]:
    """What the log holds, less where each message was read (a resumed read counts records
    from its cursor)."""
    return [(m.id, m.role, m.kind, m.blocks, m.timestamp) for m in store.read_log(bank, "s")]


def _grow(path: Path, lines: Sequence[bytes], upto: int) -> None:
    with path.open("wb") as out:
        out.writelines(lines[:upto])


@needs_shared
@pytest.mark.parametrize("name", SESSIONS)
def test_a_resumed_compile_equals_one_that_rereads_the_whole_file(
    store: Store, tmp_path: Path, name: str
) -> None:
    lines = _lines(name)
    path = tmp_path / "session.jsonl"
    resumed = StoredLog.open(store, "resumed", "s", ExtractiveSummariser())
    whole = StoredLog.open(store, "whole", "s", ExtractiveSummariser())
    for upto in _cuts(lines, 4):
        _grow(path, lines, upto)
        read = resumed.append_file(str(path), "claude-code")
        whole.append(read_transcript(str(path)).messages)
        assert resumed.compile(OPTIONS).request == whole.compile(OPTIONS).request
    assert read.messages and not read.reread
    assert len(read.messages) < len(read_transcript(str(path)).messages)  # only the new part
    assert _said(store, "resumed") == _said(store, "whole")
    again = StoredLog.open(store, "resumed", "s", ExtractiveSummariser())
    assert again.append_file(str(path), "claude-code").messages == []  # nothing new to read
    assert again.compile(OPTIONS).request == whole.compile(OPTIONS).request


@needs_shared
def test_a_file_rewritten_before_the_cursor_is_read_again_and_stored_once(
    store: Store, tmp_path: Path
) -> None:
    lines = _lines(SESSIONS[0])
    path = tmp_path / "session.jsonl"
    _grow(path, lines, len(lines) // 2)
    log = StoredLog.open(store, "p", "s", ExtractiveSummariser())
    log.append_file(str(path), "claude-code")
    log.compile(OPTIONS)
    held = len(log.log)
    path.write_bytes(b"\n" + b"".join(lines))  # every byte moved: the cursor no longer fits
    read = StoredLog.open(store, "p", "s", ExtractiveSummariser()).append_file(
        str(path), "claude-code"
    )
    assert read.reread
    ids = [m.id for m in store.read_log("p", "s")]
    assert len(ids) == len(set(ids)) > held
    full = [m.id for m in StoredLog.open(store, "q", "s", ExtractiveSummariser()).log]
    assert full == []  # another log is untouched


@needs_shared
def test_a_process_killed_before_it_kept_the_cursor_loses_and_duplicates_nothing(
    store: Store, tmp_path: Path
) -> None:
    lines = _lines(SESSIONS[0])
    path = tmp_path / "session.jsonl"
    _grow(path, lines, len(lines) // 3)
    StoredLog.open(store, "p", "s", ExtractiveSummariser()).append_file(str(path), "claude-code")
    # ... killed here: the messages are stored, the cursor (kept by the compile) is not.
    _grow(path, lines, len(lines))
    log = StoredLog.open(store, "p", "s", ExtractiveSummariser())
    log.append_file(str(path), "claude-code")
    log.compile(OPTIONS)
    whole = StoredLog.open(store, "w", "s", ExtractiveSummariser())
    whole.append(read_transcript(str(path)).messages)
    assert _said(store, "p") == _said(store, "w")
    assert log.compile(OPTIONS).request == whole.compile(OPTIONS).request


# What only reading new messages, writing summaries or searching a bank needs.
UNNEEDED = ("lamina.readers", "lamina.text.redact", "lamina.context.requests",
            "lamina.store.sqlite_postings", "lamina.store.vectors", "lamina.text.lexical",
            "concurrent.futures", "logging", "click")  # fmt: skip

PROBE = f"""
import sys
from lamina.entry import main
from lamina.tokens import default_counter
try:
    main()  # as `lamina compile ...` runs: its arguments are this process's
finally:
    sys.stderr.write("tokenizer loaded: %s\\n" % (default_counter()._encoding is not None))
    sys.stderr.write("modules: %s\\n" % sorted(set({UNNEEDED!r}) & set(sys.modules)))
"""


@needs_shared
def test_a_compile_with_nothing_new_loads_no_tokenizer_reader_or_search(tmp_path: Path) -> None:
    env = {**os.environ, "LAMINA_HOME": str(tmp_path / "home")}
    env.pop("LAMINA_DATABASE_URL", None)
    path = tmp_path / "session.jsonl"
    lines = _lines(SESSIONS[1])
    _grow(path, lines, len(lines) // 2)

    def run() -> tuple[dict[str, object], str]:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, "compile", str(path), "--bank", "p", "--json",
             "--budget", "6000", "--reserve", "600"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), done.stderr

    first, said = run()
    assert "tokenizer loaded: True" in said
    second, said = run()
    assert "tokenizer loaded: False" in said
    assert "modules: []" in said  # the file is unchanged: not even its format is detected
    assert second["request"] == first["request"]
    _grow(path, lines, len(lines))
    third, said = run()
    assert "tokenizer loaded: True" in said  # new messages are counted
    assert third["report"]["log_messages"] > first["report"]["log_messages"]  # type: ignore[index]
