"""Summaries written ahead of need, a model summariser inside real compiles, and stored logs
kept open by a server."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from lamina.context import (
    CompileOptions,
    Compiler,
    ContextLog,
    ExtractiveSummariser,
    StoredLog,
    validate_anthropic,
)
from lamina.context.ladder import ModelOptions, ModelSummariser
from lamina.context.logs import ContextLogs
from lamina.context.requests import SummaryRequest, SummaryResult
from lamina.llm import LLMRequest, LLMResponse, ScriptedLLM
from lamina.messages import Message, Role
from lamina.store import open_store

from .test_compile import long_history

OPTIONS = CompileOptions(budget=8_000, reserve=1_000)


class Recording(ExtractiveSummariser):
    """The offline summariser, noting which thread wrote each summary."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def write(self, request: SummaryRequest) -> SummaryResult:
        self.threads.append(threading.current_thread().name)
        return super().write(request)


def replay(history: Sequence[Message], compiler: Compiler, *, ahead: bool) -> list[dict[str, Any]]:
    log = ContextLog()
    reports = []
    previous: list[Any] = []
    for message in history:
        if message.role is Role.ASSISTANT and len(log):
            result = compiler.compile(log, OPTIONS)
            assert validate_anthropic(result.request) == []
            messages = result.request["messages"]
            result.report["prefix_broken"] = bool(
                previous and messages[: len(previous) - 1] != previous[:-1]
            )
            previous = messages
            reports.append(result.report)
            if ahead:
                compiler.prefetch(log, OPTIONS)
        log.append(message)
    return reports


def test_with_prefetch_no_compile_waits_for_a_summary_and_the_prefix_breaks_as_often() -> None:
    history = long_history(160, words=300)
    plain = replay(history, Compiler(ExtractiveSummariser()), ahead=False)
    ahead = replay(history, Compiler(ExtractiveSummariser()), ahead=True)
    assert sum(r["folds"] > 0 for r in plain) >= 10
    assert sum(r["summaries_written"] > 0 for r in plain) >= 10, "without it, folds wait"
    assert [r["summaries_written"] for r in ahead] == [0] * len(ahead)
    # A fold that uses what is ready may leave the newest chunk raw: about as many breaks.
    breaks = sum(r["prefix_broken"] for r in plain)
    assert sum(r["prefix_broken"] for r in ahead) <= breaks + max(1, breaks // 10)


def test_a_stored_log_prefetches_in_the_background_and_writes_each_span_once(
    database: str,
) -> None:
    history = long_history(120, words=300)
    summariser = Recording()
    store = open_store(database)
    try:
        live = StoredLog.open(store, "proj", "sess", summariser)
        waited = 0
        for message in history:
            if message.role is Role.ASSISTANT and len(live.log) > 4:
                waited += live.compile(OPTIONS, ahead=True).report["summaries_written"] > 0
                live.wait()  # while the model answers
            live.append([message])
        stored = store.load_summaries("proj", "sess")
        spans = [(s.level, s.start, s.end) for s in stored]
        assert len(spans) == len(set(spans)) == len(summariser.threads)
        assert any(name.startswith("lamina-prefetch") for name in summariser.threads)
        assert waited <= 1, "only a fold before the first prefetch may wait"
    finally:
        store.close()


def answer_unless(marker: str) -> Any:
    """A model that summarises every request except those holding `marker` in what it is
    asked to summarise (not in a stretch recalled raw before it), which it refuses (an empty
    answer with a normal stop)."""

    def step(request: LLMRequest) -> LLMResponse:
        sent = json.dumps(list(request.messages))
        if marker in sent.rsplit("[CM] End of messages ", 1)[-1]:
            return LLMResponse(text="", stop_reason="refusal", input_tokens=100)
        return LLMResponse(
            text=f"I went through {sent.count('question')} questions about caching.",
            stop_reason="end_turn",
            input_tokens=len(sent) // 4,
            output_tokens=12,
        )

    return step


def test_a_chunk_the_model_will_not_summarise_stays_raw_and_the_report_says_so() -> None:
    history = long_history(40, words=200)
    llm = ScriptedLLM([answer_unless("question 20 ")] * 500)
    summariser = ModelSummariser(llm, ModelOptions(window=16_000), sleep=lambda _s: None)
    log = ContextLog.from_messages(history)
    result = Compiler(summariser).compile(log, CompileOptions(budget=16_000, reserve=2_000))
    assert validate_anthropic(result.request) == []
    report = result.report["summariser"]
    assert report["name"] == summariser.name and report["summariser_calls"] == len(llm.requests)
    assert report["summariser_input_tokens"] > 0 and report["summaries_failed"] >= 1
    [failed] = [f for f in report["unsummarised"] if f["level"] == 1]
    first, last = failed["messages"]
    assert history[80].text.startswith("question 20 ") and first <= 80 <= last
    assert failed["reason"] and not failed["deferred"]
    # Shown raw, in place, while the chunks around it are summaries.
    assert "question 20 " in json.dumps(result.request)
    assert result.report["summaries_by_level"]
    assert "I went through" in json.dumps(result.request)


def test_a_server_keeps_logs_open_and_sees_what_another_server_did(database: str) -> None:
    history = long_history(60, words=300)
    store = open_store(database)
    try:
        one = ContextLogs(store, ExtractiveSummariser())
        other = ContextLogs(store, ExtractiveSummariser())
        with one.use("proj", "sess") as live:
            live.append(history[:150])
            first = live.compile(OPTIONS)
        with one.use("proj", "sess") as again:
            assert again is live, "kept open between calls"
        with other.use("proj", "sess") as elsewhere:
            elsewhere.append(history[150:])
            second = elsewhere.compile(OPTIONS)
        # The first server's open log is out of date: it is reopened, and compiles what the
        # second one would, writing nothing again.
        with one.use("proj", "sess") as live_again:
            assert live_again is not live and len(live_again.log) == len(history)
            third = live_again.compile(OPTIONS)
        assert third.request == second.request and third.report["summaries_written"] == 0
        assert first.report["log_messages"] == 150
        # A log deleted and created again is not served from the stale copy.
        store.delete_log("proj", "sess")
        with other.use("proj", "sess") as fresh:
            assert len(fresh.log) == 0
    finally:
        store.close()


class Gated(Recording):
    """The offline summariser, whose background writes wait for a gate to open, as a slow
    model's would: `in_flight` counts the writes begun and not finished."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.in_flight = 0

    def write(self, request: SummaryRequest) -> SummaryResult:
        if not threading.current_thread().name.startswith("lamina-prefetch"):
            return super().write(request)
        self.in_flight += 1
        self.entered.set()
        self.gate.wait(30)
        try:
            return super().write(request)
        finally:
            self.in_flight -= 1


def test_closing_the_logs_waits_for_their_prefetch_before_the_store_closes(
    database: str,
) -> None:
    history = long_history(160, words=300)
    summariser = Gated()
    store = open_store(database)
    try:
        with ContextLogs(store, summariser) as logs:
            for end in range(4, len(history), 4):
                logs.compile("proj", "sess", history[end - 4 : end], OPTIONS, ahead=True)
                if summariser.entered.wait(0.05):
                    break  # a prefetch is writing a summary now
            assert summariser.in_flight == 1
            threading.Timer(0.3, summariser.gate.set).start()
        # Closed only once the prefetch finished what it was writing, into the open store.
        assert summariser.in_flight == 0
        assert len(store.load_summaries("proj", "sess")) == len(summariser.threads)
    finally:
        summariser.gate.set()
        store.close()
