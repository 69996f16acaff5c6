"""`lamina logs`: list, show and delete the context logs kept in a bank, run as a user runs it
(a subprocess), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from lamina.context import CompileOptions, ExtractiveSummariser, StoredLog
from lamina.readers import read_transcript
from lamina.store import open_store

from .conftest import CLAUDE_CODE, needs_shared

SESSION = CLAUDE_CODE / "spotter-8463c716.jsonl"


def lamina(database: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LAMINA_DATABASE_URL", "LAMINA_BANK")}
    return subprocess.run(
        [sys.executable, "-m", "lamina", "--database-url", database, "logs", *args],
        capture_output=True, text=True, env=env, input=stdin, timeout=120,
    )  # fmt: skip


def as_json(out: subprocess.CompletedProcess[str]) -> Any:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # exactly one document, or this fails


@pytest.fixture
def kept(database: str) -> dict[str, Any]:
    """A log of a real session compiled twice at 16k (its summaries and last frontier stored),
    and a second, empty log."""
    store = open_store(database)
    try:
        log = StoredLog.open(store, "proj", "spotter", ExtractiveSummariser())
        messages = read_transcript(str(SESSION)).messages
        log.append(messages[: len(messages) // 2])
        log.compile(CompileOptions(budget=16_000, reserve=2_000))
        log.append(messages)
        result = log.compile(CompileOptions(budget=16_000, reserve=2_000))
        StoredLog.open(store, "proj", "empty", ExtractiveSummariser())
        summaries = store.load_summaries("proj", "spotter")
    finally:
        store.close()
    return {"report": result.report, "summaries": summaries, "messages": len(log.log)}


@needs_shared
def test_list_and_show_describe_the_stored_logs(database: str, kept: dict[str, Any]) -> None:
    listed = as_json(lamina(database, "list", "--bank", "proj", "--json"))
    assert listed["bank"] == "proj"
    rows = {row["id"]: row for row in listed["logs"]}
    assert set(rows) == {"spotter", "empty"}
    spotter = rows["spotter"]
    assert spotter["messages"] == kept["messages"] == kept["report"]["log_messages"]
    assert spotter["tokens"] == kept["report"]["log_tokens"]
    assert spotter["summaries"] == len(kept["summaries"]) > 0
    assert rows["empty"]["messages"] == rows["empty"]["summaries"] == 0

    shown = as_json(lamina(database, "show", "spotter", "--bank", "proj", "--json"))
    by_level: dict[str, int] = {}
    for summary in kept["summaries"]:
        by_level[str(summary.level)] = by_level.get(str(summary.level), 0) + 1
    assert {k: v["count"] for k, v in shown["summaries_by_level"].items()} == by_level
    frontier = shown["last_frontier"]
    report = kept["report"]
    assert frontier["raw_messages"] + frontier["folded_messages"] == spotter["messages"]
    assert frontier["head_messages"] == report["head"]["messages"]
    assert frontier["tail_from_message"] == report["tail"]["from_message"]
    assert frontier["summaries_shown_by_level"] == report["summaries_by_level"]
    assert (
        as_json(lamina(database, "show", "empty", "--bank", "proj", "--json"))["last_frontier"]
        is None
    )

    text = lamina(database, "show", "spotter", "--bank", "proj")
    assert text.returncode == 0 and "folded" in text.stdout and "level 1:" in text.stdout
    table = lamina(database, "list", "--bank", "proj")
    assert table.returncode == 0 and "spotter" in table.stdout and "empty" in table.stdout
    other = lamina(database, "list", "--bank", "elsewhere")  # a typo is an error, not "none"
    assert other.returncode == 2 and "no bank named 'elsewhere'" in other.stderr


def test_unknown_logs_are_one_line_errors(database: str) -> None:
    for args in (["show", "nope", "--bank", "proj"], ["delete", "nope", "--bank", "proj", "--yes"]):
        out = lamina(database, *args)  # no bank of that name: that is what is wrong
        assert out.returncode == 2, out
        assert out.stderr == "error: no bank named 'proj' (see `lamina banks`)\n"
        assert out.stdout == ""
    store = open_store(database)
    try:
        StoredLog.open(store, "proj", "other", ExtractiveSummariser())  # the bank now has a log
    finally:
        store.close()
    for args in (["show", "nope", "--bank", "proj"], ["delete", "nope", "--bank", "proj", "--yes"]):
        out = lamina(database, *args)
        assert out.returncode == 2, out
        assert out.stderr == "error: no log 'nope' in bank 'proj'\n" and out.stdout == ""


@needs_shared
def test_delete_asks_first_unless_yes(database: str, kept: dict[str, Any]) -> None:
    declined = lamina(database, "delete", "spotter", "--bank", "proj", stdin="n\n")
    assert declined.returncode != 0 and "Traceback" not in declined.stderr
    assert "delete log 'spotter'" in declined.stderr
    names = [r["id"] for r in as_json(lamina(database, "list", "-b", "proj", "--json"))["logs"]]
    assert "spotter" in names
    confirmed = lamina(database, "delete", "spotter", "--bank", "proj", stdin="y\n")
    assert confirmed.returncode == 0 and "deleted log 'spotter'" in confirmed.stdout
    no_prompt = lamina(database, "delete", "empty", "-b", "proj", "--json")
    assert no_prompt.returncode == 2 and "--yes" in no_prompt.stderr
    assert as_json(lamina(database, "delete", "empty", "-b", "proj", "--yes", "--json")) == {
        "bank": "proj", "log": "empty", "deleted": True
    }  # fmt: skip
    assert as_json(lamina(database, "list", "-b", "proj", "--json"))["logs"] == []
    store = open_store(database)
    try:
        assert store.load_summaries("proj", "spotter") == []
        assert store.load_frontier("proj", "spotter") is None
    finally:
        store.close()


@needs_shared
def test_listed_tokens_come_from_kept_counts_and_are_counted_where_none_are(
    database: str, kept: dict[str, Any]
) -> None:
    """A listing reads the per-message counts a log keeps; messages stored without counts
    (written straight to the store, as a copy from an older version may) are counted."""
    from lamina.context.log import ContextLog
    from lamina.context.logs import ContextLogs

    store = open_store(database)
    logs = ContextLogs(store, ExtractiveSummariser())
    try:
        listed = logs.summary(logs.find("proj", "spotter"))
        assert listed["tokens"] == kept["report"]["log_tokens"]
        messages = store.read_log("proj", "spotter")
        store.append_log_messages("proj", "bare", messages)  # no counts kept
        expected = sum(ContextLog.from_messages(messages).tokens)
        assert logs.summary(logs.find("proj", "bare"))["tokens"] == expected
        StoredLog.open(store, "proj", "bare", ExtractiveSummariser())  # keeps its counts
        assert store.load_log_counts("proj", "bare", ContextLog().counts_key)
        assert logs.summary(logs.find("proj", "bare"))["tokens"] == expected
    finally:
        store.close()
