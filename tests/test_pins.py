"""Pins: parts of a log held raw, at an exact summary level, or at most a level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.context import (
    CompileOptions,
    Compiler,
    ContextLog,
    ExtractiveSummariser,
    OverBudgetError,
    StoredLog,
    validate_anthropic,
)
from lamina.context.forest import Summary
from lamina.context.pins import Pin, PinConflictError, check_pins, parse_range
from lamina.context.requests import SummaryFailure, SummaryRequest, SummaryResult
from lamina.messages import Message
from lamina.store import open_store

from .test_compile import long_history

OPTIONS = CompileOptions(budget=8_000, reserve=1_000)


def compile_with(
    history: list[Message], pins: list[Pin], options: CompileOptions = OPTIONS
) -> tuple[ContextLog, Any]:
    log = ContextLog.from_messages(history)
    result = Compiler(ExtractiveSummariser()).compile(log, options, pins=pins)
    assert validate_anthropic(result.request) == []
    assert result.tokens <= options.available
    return log, result


def shown_levels(result: Any, start: int, end: int) -> set[int]:
    """The levels at which `log[start:end]` is shown (0: raw)."""
    frontier = result.frontier
    levels = set()
    for item in frontier.items:
        lo, hi = (item.start, item.end) if isinstance(item, Summary) else item
        if lo < end and start < hi:
            levels.add(item.level if isinstance(item, Summary) else 0)
    if start < frontier.head_end or end > frontier.tail_start:
        levels.add(0)
    return levels


def test_a_raw_pin_keeps_its_messages_verbatim_while_everything_around_folds() -> None:
    history = long_history(60, words=300)
    _log, plain = compile_with(history, [])
    assert shown_levels(plain, 100, 104) != {0}, "unpinned, this stretch is folded"
    _log, pinned = compile_with(history, [Pin("spec", "raw", start=100, end=104)])
    assert shown_levels(pinned, 100, 104) == {0}
    text = json.dumps(pinned.request)
    for message in history[100:104]:
        for block in message.blocks:
            if hasattr(block, "text"):
                assert block.text in text
    assert pinned.report["summaries_by_level"], "the rest still folds"
    assert pinned.report["pins"][0]["shown_at_levels"] == [0]


def test_an_exact_pin_folds_at_once_and_stays_at_its_level() -> None:
    history = long_history(60, words=300)
    roomy = CompileOptions(budget=200_000, reserve=4_000)
    _log, plain = compile_with(history, [], roomy)
    assert plain.report["summaries_by_level"] == {}, "the budget needs no fold"
    for level in (1, 2):
        _log, result = compile_with(history, [Pin("old", "exact", level, 20, 60)], roomy)
        assert shown_levels(result, 20, 60) == {level}
        # ... and under pressure too: not folded deeper.
        _log, tight = compile_with(history, [Pin("old", "exact", level, 20, 60)])
        assert shown_levels(tight, 20, 60) == {level}


def test_a_maximum_level_pin_is_never_folded_deeper() -> None:
    history = long_history(150, words=300)
    _log, plain = compile_with(history, [])
    assert max(shown_levels(plain, 20, 120)) >= 2, "unpinned, this stretch merges deeper"
    _log, result = compile_with(
        history, [Pin("keep", "max", 1, 20, 120)], CompileOptions(budget=16_000, reserve=1_000)
    )
    assert max(shown_levels(result, 20, 120)) <= 1


def replay_breaks(history: list[Message], pins: list[Pin]) -> int:
    """Compiles, one before each assistant message, whose request does not start with the
    previous one; every request valid and holding the pins."""
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    previous: list[Any] = []
    breaks = 0
    for message in history:
        if message.role == "assistant" and len(log) > 50:
            result = compiler.compile(log, OPTIONS, pins=pins)
            assert validate_anthropic(result.request) == []
            for pin in pins:
                assert pin.start is not None and pin.end is not None
                assert max(shown_levels(result, pin.start, pin.end)) <= pin.allowed[1]
            messages = result.request["messages"]
            if previous and messages[: len(previous) - 1] != previous[:-1]:
                breaks += 1
            previous = messages
        log.append(message)
    return breaks


def test_pins_follow_a_live_log_and_folds_stay_far_apart() -> None:
    history = long_history(120, words=300)
    unpinned = replay_breaks(history, [])
    # Held raw, the pinned stretch leaves less room, so folds come a little more often.
    assert replay_breaks(history, [Pin("spec", "raw", start=40, end=48)]) <= 2 * unpinned
    assert replay_breaks(history, [Pin("cap", "max", 1, start=40, end=200)]) <= 2 * unpinned


def test_conflicting_pins_are_an_error_naming_both() -> None:
    raw = Pin("spec", "raw", start=10, end=20)
    folded = Pin("old", "exact", 1, start=15, end=40)
    with pytest.raises(PinConflictError, match=r"'spec'.*'old'.*messages 15-19"):
        check_pins([raw, folded])
    check_pins([raw, Pin("cap", "max", 2, start=0, end=100)])  # raw is within a maximum
    with pytest.raises(PinConflictError, match=r"level 3.*most level 2"):
        check_pins([Pin("a", "exact", 3, 0, 10), Pin("b", "max", 2, 5, 6)])
    # Apart in messages, but in one chunk at this budget: an error at compile time.
    history = long_history(60, words=300)
    near = [Pin("a", "raw", start=101, end=102), Pin("b", "exact", 1, start=102, end=103)]
    with pytest.raises(PinConflictError, match="same chunk"):
        compile_with(history, near)
    # An exact pin on the opening messages ends the head (kept raw) where it starts.
    _log, result = compile_with(history, [Pin("first", "exact", 1, start=0, end=2)])
    assert shown_levels(result, 0, 2) == {1}


def test_a_raw_pin_larger_than_the_budget_fails_saying_what_is_pinned() -> None:
    history = long_history(60, words=300)
    with pytest.raises(OverBudgetError, match=r"pinned: pin 'all'.*keeps \d+ tokens"):
        compile_with(history, [Pin("all", "raw", start=0, end=240)])


def test_a_document_pin_holds_every_read_of_the_file() -> None:
    history = long_history(60, words=300)
    # Turn n reads src/m{n}.py: its call is message 4n+1, its result 4n+2.
    _log, plain = compile_with(history, [])
    assert shown_levels(plain, 81, 83) != {0}
    _log, result = compile_with(history, [Pin("m20", "raw", document="m20.py")])
    assert shown_levels(result, 81, 83) == {0}
    assert result.report["pins"][0]["messages"] == [[81, 82]]
    assert "code " * 300 in json.dumps(result.request)


def test_ranges_parse_as_people_write_them() -> None:
    assert parse_range("120-180") == (120, 181)
    assert parse_range(" 7 ") == (7, 8)
    for bad in ("", "a-b", "9-3", "-4"):
        with pytest.raises(ValueError):
            parse_range(bad)


def test_pins_are_stored_with_the_log_and_used_by_its_next_compile(database: str) -> None:
    history = long_history(60, words=300)
    store = open_store(database)
    try:
        live = StoredLog.open(store, "proj", "sess", ExtractiveSummariser())
        live.append(history)
        assert shown_levels(live.compile(OPTIONS), 100, 104) != {0}
        live.pin(Pin("spec", "raw", start=100, end=104))
        with pytest.raises(PinConflictError):
            live.pin(Pin("other", "exact", 1, start=102, end=110))
        again = StoredLog.open(store, "proj", "sess", ExtractiveSummariser())
        assert [p.name for p in again.pins()] == ["spec"]
        assert shown_levels(again.compile(OPTIONS), 100, 104) == {0}
        assert again.unpin("spec") and not again.unpin("spec")
        assert again.pins() == [] and again.compile(OPTIONS).report["pins"] == []
    finally:
        store.close()


def lamina(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args], capture_output=True, text=True, env=env
    )


def test_pin_and_unpin_from_the_command_line(tmp_path: Path) -> None:
    from lamina.readers import read_transcript

    from .conftest import EXAMPLE

    compiled = lamina("compile", str(EXAMPLE), "--bank", "b", "--log", "s", "--json", home=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    done = lamina("pin", "s", "-b", "b", "--messages", "10-12", "--raw", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    pins = json.loads(done.stdout)["pins"]
    assert [(p["name"], p["mode"], p["messages"]) for p in pins] == [
        ("messages-10-12", "raw", [10, 12])
    ]
    clash = lamina("pin", "s", "-b", "b", "--messages", "11", "--level", "1", home=tmp_path)
    assert clash.returncode != 0
    assert clash.stderr.count("\n") == 1 and "messages-10-12" in clash.stderr
    listed = lamina("pin", "s", "-b", "b", home=tmp_path)
    assert "pin 'messages-10-12' (messages 10-12, raw)" in listed.stdout
    shown = json.loads(lamina("logs", "show", "s", "-b", "b", "--json", home=tmp_path).stdout)
    assert shown["pins"] == [
        {"name": "messages-10-12", "mode": "raw", "level": 0, "messages": [10, 12],
         "document": None}
    ]  # fmt: skip
    both = lamina("pin", "s", "-b", "b", "--messages", "1", "--raw", "--level", "2", home=tmp_path)
    assert both.returncode != 0 and "one of --raw" in both.stderr
    missing = lamina("pin", "nope", "-b", "b", "--messages", "1", "--raw", home=tmp_path)
    assert missing.returncode != 0 and "no log 'nope' in bank 'b'" in missing.stderr
    assert lamina("unpin", "s", "messages-10-12", "-b", "b", home=tmp_path).returncode == 0
    gone = lamina("unpin", "s", "messages-10-12", "-b", "b", home=tmp_path)
    assert gone.returncode == 2
    said = "error: no pin 'messages-10-12' on log 's' in bank 'b' (see `lamina pin s`)\n"
    assert gone.stderr == said, "one line, naming the command that lists the pins"
    assert read_transcript(str(EXAMPLE)).messages


def test_max_level_0_from_the_command_line_is_a_pin(tmp_path: Path) -> None:
    from .conftest import EXAMPLE

    compiled = lamina("compile", str(EXAMPLE), "--bank", "b", "--log", "s", home=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    done = lamina("pin", "s", "-b", "b", "--messages", "10-12", "--max-level", "0", "--json",
                  home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [(p["mode"], p["level"]) for p in json.loads(done.stdout)["pins"]] == [("max", 0)]
    exact = lamina("pin", "s", "-b", "b", "--messages", "30-31", "--level", "2", "--json",
                   home=tmp_path)  # fmt: skip
    assert exact.returncode == 0, exact.stderr
    assert [(p["mode"], p["level"]) for p in json.loads(exact.stdout)["pins"]] == [
        ("max", 0), ("exact", 2)
    ]  # fmt: skip


class RefusingSummariser(ExtractiveSummariser):
    """The offline summariser, but no summary of anything in `log[start:end]`."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__()
        self.refused = (start, end)

    def write(self, request: SummaryRequest) -> SummaryResult | SummaryFailure:  # type: ignore[override]
        if request.start < self.refused[1] and self.refused[0] < request.end:
            return SummaryFailure(request.task, request.level, request.start, request.end,
                                  self.name, 0, 0, "the model refused")  # fmt: skip
        return super().write(request)


def test_an_exact_pin_whose_summary_cannot_be_written_says_so() -> None:
    history = long_history(60, words=300)
    log = ContextLog.from_messages(history)
    pin = Pin("middle", "exact", 1, start=80, end=100)
    result = Compiler(RefusingSummariser(80, 100)).compile(log, OPTIONS, pins=[pin])
    assert validate_anthropic(result.request) == []
    entry = result.report["pins"][0]
    assert 0 in entry["shown_at_levels"]
    assert entry["not_held"] and all(
        why.startswith("shown raw: no level-1 summary of messages ") and "the model refused" in why
        for why in entry["not_held"]
    )
    assert result.report["warnings"] == [
        f"pin 'middle' (messages 80-99, at level 1) is not held: {why}" for why in entry["not_held"]
    ]
    held = Compiler(ExtractiveSummariser()).compile(log, OPTIONS, pins=[pin])
    assert "not_held" not in held.report["pins"][0] and held.report["warnings"] == []


def test_the_compile_command_warns_of_an_exact_pin_it_cannot_hold(tmp_path: Path) -> None:
    from lamina.config import resolve_settings
    from lamina.readers import read_transcript

    from .conftest import EXAMPLE

    messages = read_transcript(str(EXAMPLE)).messages
    log = ContextLog.from_messages(messages)
    options = CompileOptions(budget=8_000, reserve=1_000)  # as the command's --budget 8000
    chunk = Compiler(ExtractiveSummariser()).compile(log, options).frontier.chunks[1]
    first, last = chunk.start, chunk.end - 1
    store = open_store(resolve_settings({"LAMINA_HOME": str(tmp_path)}).database)
    try:
        stored = StoredLog.open(store, "b", "s", ExtractiveSummariser())
        stored.append(messages)
        stored.pin(Pin.given("spec", "exact", 1, first, last))
        # The offline summariser does not fail: record that it did, as a model's refusal is.
        failure = SummaryFailure("summarise", 1, chunk.start, chunk.end, "extractive@1", 0, 0,
                                 "refused")  # fmt: skip
        store.save_frontier("b", "s", {"failures": [failure.to_json()]})  # type: ignore[list-item]
    finally:
        store.close()
    compiled = lamina("compile", str(EXAMPLE), "--bank", "b", "--log", "s", "--budget", "8000",
                      home=tmp_path)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    assert (
        f"warning: pin 'spec' (messages {first}-{last}, at level 1) is not held: shown raw: "
        f"no level-1 summary of messages {first}-{last}: refused"
    ) in compiled.stderr
