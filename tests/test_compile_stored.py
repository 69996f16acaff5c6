"""Context logs kept in a store: a compile in a new process reuses the stored summaries and the
last frontier, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import pytest

from lamina.context import (
    CompileOptions,
    Compiler,
    CompileResult,
    ContextLog,
    ExtractiveSummariser,
    StoredLog,
    validate_anthropic,
)
from lamina.context.forest import Summary
from lamina.context.log import enters_log
from lamina.messages import Message, Role
from lamina.readers import read_transcript
from lamina.store import Store, open_store
from lamina.store.base import StoredSummary

from .conftest import EXAMPLE

OPTIONS = CompileOptions(budget=4_000, reserve=500)


@dataclass
class CountingSummariser:
    """The offline summariser, counting what it is asked."""

    inner: ExtractiveSummariser = field(default_factory=ExtractiveSummariser)
    calls: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def summarise(self, messages: Sequence[Message], target_tokens: int) -> str:
        self.calls += 1
        return self.inner.summarise(messages, target_tokens)

    def merge(self, summaries: Sequence[str], target_tokens: int) -> str:
        self.calls += 1
        return self.inner.merge(summaries, target_tokens)


@pytest.fixture
def store(database: str) -> Iterator[Store]:
    s = open_store(database)
    yield s
    s.close()


def example() -> list[Message]:
    return [m for m in read_transcript(str(EXAMPLE)).messages if enters_log(m)]


def live_session(log: StoredLog, messages: Sequence[Message]) -> CompileResult:
    """Append the messages one by one, compiling before every model call (after each
    assistant message, as a live agent would); the last compile's result."""
    result = None
    for message in messages:
        log.append([message])
        if message.role is Role.ASSISTANT:
            result = log.compile(OPTIONS)
            assert validate_anthropic(result.request) == []
    assert result is not None
    return result


def test_a_reopened_log_compiles_the_same_request_without_summarising(store: Store) -> None:
    messages = example()
    first = CountingSummariser()
    last = live_session(StoredLog.open(store, "proj", "sess", first), messages)
    assert first.calls > 0 and last.report["summaries_by_level"]

    # A new process: the log, its summaries and its last frontier come from the store.
    again = CountingSummariser()
    reopened = StoredLog.open(store, "proj", "sess", again)
    # Stored and held without the source records no request shows (their text is in the
    # blocks: redaction passes over it once).
    held = [replace(m, records=(), tool_use_result=None) for m in messages]
    assert store.read_log("proj", "sess") == held
    assert list(reopened.log.messages) == held
    result = reopened.compile(OPTIONS)
    assert again.calls == 0 and result.report["summaries_written"] == 0
    assert result.request == last.request
    # Compiled from scratch, the same log folds differently: the stored frontier is what
    # kept the prefix.
    scratch = Compiler(ExtractiveSummariser()).compile(ContextLog.from_messages(messages), OPTIONS)
    assert scratch.request != last.request


def test_appending_what_the_log_holds_stores_nothing_new(store: Store) -> None:
    messages = example()
    log = StoredLog.open(store, "proj", "sess", ExtractiveSummariser())
    assert log.append(messages[:30]) == 30
    assert log.append(messages) == len(messages) - 30
    assert log.append(messages) == 0
    assert len(store.read_log("proj", "sess")) == len(messages)


def test_a_log_sees_what_another_process_appended(store: Store) -> None:
    messages = example()
    mine = StoredLog.open(store, "proj", "sess", ExtractiveSummariser())
    mine.append(messages[:20])
    theirs = StoredLog.open(store, "proj", "sess", ExtractiveSummariser())
    theirs.append(messages[20:40])
    mine.append(messages[40:])
    assert [m.id for m in mine.log.messages] == [m.id for m in messages]
    assert store.read_log("proj", "sess") == [
        replace(m, records=(), tool_use_result=None) for m in messages
    ]


def test_summaries_are_stored_with_their_provenance(store: Store) -> None:
    live_session(StoredLog.open(store, "proj", "sess", ExtractiveSummariser()), example())
    summaries = store.load_summaries("proj", "sess")
    assert summaries and {s.level for s in summaries} >= {1, 2}
    assert len({s.id for s in summaries}) == len(summaries)
    for summary in summaries:
        assert summary.summariser == "extractive@1" and summary.stop_reason == "complete"
        assert len(summary.request_hash) == 64 and summary.text and summary.tokens > 0
        assert (summary.level == 1) == (summary.children == ())
    [info] = store.list_logs("proj")
    assert (info.id, info.messages, info.summaries) == ("sess", len(example()), len(summaries))


def test_the_cli_keeps_a_log_in_a_bank_and_reuses_it(tmp_path: Path) -> None:
    env = {**os.environ, "LAMINA_HOME": str(tmp_path)}
    env.pop("LAMINA_DATABASE_URL", None)

    def run(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--budget", "4000",
             "--reserve", "500", "--json", *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out: dict[str, object] = json.loads(done.stdout)
        return out

    first = run("--bank", "proj")
    assert first["report"]["summaries_written"] > 0  # type: ignore[index]
    second = run("--bank", "proj")
    assert second["report"]["summaries_written"] == 0  # type: ignore[index]
    assert second["request"] == first["request"]
    store = open_store(tmp_path / "lamina.db")
    assert [i.id for i in store.list_logs("proj")] == ["session"]
    store.close()


class CountingCounter:
    """The default tokenizer, noting how many texts it was asked to count."""

    def __init__(self) -> None:
        from lamina.tokens import default_counter

        self.inner = default_counter()
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self, text: str) -> int:
        self.calls += 1
        return self.inner.count(text)


def test_a_reopened_log_reads_its_token_counts_instead_of_counting(store: Store) -> None:
    messages = example()
    first = CountingCounter()
    live = StoredLog.open(store, "proj", "sess", ExtractiveSummariser(), first)
    live.append(messages)
    assert first.calls > 0
    again = CountingCounter()
    reopened = StoredLog.open(store, "proj", "sess", ExtractiveSummariser(), again)
    assert again.calls == 0
    assert (reopened.log.tokens, reopened.log.shown, reopened.log.uncut) == (
        live.log.tokens, live.log.shown, live.log.uncut
    )  # fmt: skip
    assert reopened.compile(OPTIONS).request == live.compile(OPTIONS).request


def _plain(messages: list[dict[str, object]]) -> list[str]:
    """A request's messages without cache marks, comparable across compiles."""
    out = []
    for message in messages:
        text = json.dumps(message, sort_keys=True)
        out.append(text.replace(', "cache_control": {"type": "ephemeral"}', ""))
    return out


def test_each_compile_records_where_it_broke_the_cached_prefix(store: Store) -> None:
    """A stored log remembers its last compiles and, for each, where its request stopped
    repeating the previous one (the provider's cached prefix); that survives a reopen."""
    log = StoredLog.open(store, "proj", "live", ExtractiveSummariser())
    requests = []
    for message in example():
        log.append([message])
        if message.role is Role.ASSISTANT:
            requests.append(_plain(log.compile(OPTIONS).request["messages"]))
    history = StoredLog.open(store, "proj", "live", ExtractiveSummariser()).compiles
    assert len(history) == len(requests) > 3
    assert history[0]["first"] is True and history[0]["prefix_break"] is None
    kept = broke = 0
    for entry, before, after in zip(history[1:], requests[:-1], requests[1:], strict=True):
        assert entry["first"] is False
        # Kept: the earlier request, bar its last message (the turn being answered, which the
        # next request extends), is where the next one starts.
        repeats = after[: len(before) - 1] == before[:-1]
        if entry["prefix_break"] is None:
            kept += 1
            assert repeats, entry
        else:
            broke += 1
            assert isinstance(entry["prefix_break"], int) and not repeats, entry
    assert kept and broke  # this session at 4,000 tokens both extends and folds


@pytest.mark.parametrize("name", ["../..", "a/b", " padded"])
def test_a_log_cannot_create_a_bank_with_a_name_no_bank_may_have(tmp_path: Path, name: str) -> None:
    env = {**os.environ, "LAMINA_HOME": str(tmp_path)}
    env.pop("LAMINA_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--budget", "4000",
         "--bank", name],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "bank name" in done.stderr and "Traceback" not in done.stderr
    store = open_store(tmp_path / "lamina.db")
    assert store.list_banks() == []
    store.close()


def test_a_forest_summary_and_a_stored_summary_hold_the_same_fields() -> None:
    # StoredLog converts one into the other by field name.
    assert {f.name for f in fields(Summary)} == {f.name for f in fields(StoredSummary)}
