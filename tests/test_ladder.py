"""The refusal ladder, transient errors and spend caps of the model summariser, every rung with
the scripted fake; failures kept by the forest so the chunk stays raw, never dropped."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from lamina.context import ContextLog
from lamina.context.chunks import Chunk
from lamina.context.forest import Forest
from lamina.context.ladder import PROSE_RETRY, ModelOptions, ModelSummariser
from lamina.context.requests import (
    RawStretch,
    Recalled,
    SummaryFailure,
    SummaryRequest,
    SummaryResult,
)
from lamina.llm import LLMError, LLMResponse, ScriptedLLM, TransientLLMError
from lamina.llm.spend import InMemorySpendLedger
from lamina.messages import Kind, Message, Role, TextBlock, ToolResultBlock, ToolUseBlock


def user(i: int, text: str) -> Message:
    return Message(id=f"m{i}", role=Role.USER, blocks=(TextBlock(text),), kind=Kind.PROMPT)


def agent(i: int, *blocks: Any) -> Message:
    return Message(id=f"m{i}", role=Role.ASSISTANT, blocks=tuple(blocks), kind=Kind.REPLY)


CHUNK = (
    user(2, "Read config.toml."),
    agent(3, ToolUseBlock("t1", "Read", {"path": "config.toml"})),
    Message(
        id="m4",
        role=Role.USER,
        kind=Kind.TOOL_ACTIVITY,
        blocks=(ToolResultBlock("t1", (TextBlock("port = 8080"),)),),
    ),
    agent(5, TextBlock("The port is 8080.")),
)
RECALLED = tuple(Recalled(f"L1-{i}", f"memory {i}") for i in range(4))


def request(**extra: Any) -> SummaryRequest:
    fields: dict[str, Any] = {
        "head": (user(0, "Set up the server."), agent(1, TextBlock("On it."))),
        "recalled": RECALLED,
        "messages": CHUNK,
    }
    fields.update(extra)
    return SummaryRequest("summarise", 1, 2, 6, 100, **fields)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def summariser(llm: ScriptedLLM, clock: Clock | None = None, **options: Any) -> ModelSummariser:
    clock = clock or Clock()
    return ModelSummariser(llm, ModelOptions(**options), sleep=clock.sleep, clock=clock)


TOOL_CALL = LLMResponse(text="", stop_reason="tool_use",
                        tool_calls=[{"id": "x", "name": "Read", "input": {}}])  # fmt: skip
THINKING = LLMResponse(text="", stop_reason="end_turn", thinking="Let me think about it...")
CUT_OFF = LLMResponse(text="The port is", stop_reason="max_tokens")
REFUSED = LLMResponse(text="", stop_reason="refusal")


def test_a_normal_answer_is_accepted_with_its_stop_reason_and_tokens() -> None:
    llm = ScriptedLLM([LLMResponse("I read the config: port 8080.", "end_turn",
                                   input_tokens=900, output_tokens=12)])  # fmt: skip
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult)
    assert answer.text == "I read the config: port 8080."
    assert (answer.stop_reason, answer.calls, answer.input_tokens, answer.output_tokens) == (
        "end_turn", 1, 900, 12)  # fmt: skip
    assert answer.summariser == "scripted" and len(answer.request_hash) == 64
    assert [t["name"] for t in llm.requests[0].tools] == ["Read"]  # the history's tool declared


def test_a_tool_call_is_asked_again_with_no_tools_declared() -> None:
    llm = ScriptedLLM([TOOL_CALL, "I read the config."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config."
    assert llm.requests[0].tools and llm.requests[1].tools == ()
    assert "tool_use" not in str(llm.requests[1].messages)  # tool activity as text
    assert "[tool call Read" in str(llm.requests[1].messages)


def test_thinking_only_is_asked_again_for_plain_prose() -> None:
    llm = ScriptedLLM([THINKING, "I read the config."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config."
    assert PROSE_RETRY not in str(llm.requests[0].messages)
    assert PROSE_RETRY in str(llm.requests[1].messages)


def test_then_a_smaller_request_with_fewer_recalled_summaries() -> None:
    llm = ScriptedLLM([TOOL_CALL, THINKING, CUT_OFF, "I read the config."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config."
    assert len(llm.requests) == 4
    assert str(llm.requests[2].messages).count("Recall memory") == 4
    smaller = str(llm.requests[3].messages)
    assert smaller.count("Recall memory") == 2 and "L1-3" in smaller and "L1-0" not in smaller
    # What was learnt on the way stays: no tools, the prose line.
    assert llm.requests[3].tools == () and PROSE_RETRY in smaller


def test_after_a_refusal_the_summary_before_the_chunk_is_expanded() -> None:
    # The summary recalled last (L1-3) stands for messages 0-1 (say): shown raw in its place.
    expansion = (RawStretch(0, 2, (user(0, "Set up the server."), agent(1, TextBlock("On it."))),
                            (8, 6)),)  # fmt: skip
    llm = ScriptedLLM([REFUSED, "I read the config: port 8080."])
    answer = summariser(llm).write(request(head=(), expansion=expansion, expands="L1-3"))
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config: port 8080."
    first, expanded = str(llm.requests[0].messages), str(llm.requests[1].messages)
    assert "memory 3" in first and "Set up the server." not in first
    assert "memory 3" not in expanded and "Recall memory L1-3." not in expanded
    assert "[CM] Recall messages 0-1 as they were." in expanded and "Set up the server." in expanded
    assert expanded.count("Recall memory") == 3 and "Read config.toml." in expanded
    assert "since the recalled messages 0-1, up to here" in expanded


def test_then_fewer_recall_pairs_then_none_before_the_chunk_is_split() -> None:
    llm = ScriptedLLM([REFUSED, REFUSED, "I read the config."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config."
    counts = [str(r.messages).count("Recall memory") for r in llm.requests]
    assert counts == [4, 2, 0]  # no expansion known: straight to fewer, then none
    assert "Read config.toml." in str(llm.requests[2].messages)
    assert "since the opening" in str(llm.requests[2].messages)


def test_then_the_chunk_in_halves_joined_and_recorded_as_split() -> None:
    llm = ScriptedLLM([CUT_OFF] * 3 + ["First: I was asked to read it.", "Then: port 8080."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult)
    assert answer.text == "First: I was asked to read it.\n\nThen: port 8080."
    assert answer.stop_reason == "split:end_turn,end_turn" and answer.calls == 5
    first, second = str(llm.requests[3].messages), str(llm.requests[4].messages)
    assert "Read config.toml." in first and "The port is 8080." not in first
    assert "The port is 8080." in second and "First: I was asked to read it." in second


def test_finally_a_failure_with_the_keys_that_make_a_retry_worth_it() -> None:
    llm = ScriptedLLM([CUT_OFF] * 40)
    answer = summariser(llm, window=20_000, split_depth=1).write(request())
    assert isinstance(answer, SummaryFailure) and not answer.deferred
    assert answer.keys == ("scripted", 20_000, 1)
    assert (answer.level, answer.start, answer.end) == (1, 2, 6)
    assert "max_tokens" in answer.reason and answer.calls == len(llm.requests)


def test_a_provider_error_that_is_not_transient_goes_down_the_ladder() -> None:
    llm = ScriptedLLM([LLMError("400 bad request"), "I read the config."])
    answer = summariser(llm).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "I read the config."


def test_transient_errors_back_off_without_using_a_rung() -> None:
    clock = Clock()
    llm = ScriptedLLM([TransientLLMError("429"), TransientLLMError("529"), TOOL_CALL, "done."])
    answer = summariser(llm, clock, backoff=2.0).write(request())
    assert isinstance(answer, SummaryResult) and answer.text == "done."
    assert clock.slept == [2.0, 4.0]
    # The same request was sent three times, then the no-tools rung once.
    assert [bool(r.tools) for r in llm.requests] == [True, True, True, False]
    assert answer.calls == 2  # only answered calls are counted and charged


def test_transient_errors_past_the_cap_are_a_deferred_failure() -> None:
    clock = Clock()
    llm = ScriptedLLM([TransientLLMError("timeout")] * 3)
    answer = summariser(llm, clock, transient_retries=2, backoff=1.0).write(request())
    assert isinstance(answer, SummaryFailure) and answer.deferred
    assert "transient" in answer.reason and clock.slept == [1.0, 2.0]


def test_a_call_over_the_spend_cap_is_not_sent() -> None:
    ledger = InMemorySpendLedger()
    clock = Clock()
    llm = ScriptedLLM(["one.", "two."])
    model = ModelSummariser(llm, ModelOptions(tokens_per_hour=5_000, max_tokens=1_000),
                            ledger=ledger, sleep=clock.sleep, clock=clock)  # fmt: skip
    first = model.write(request())
    assert isinstance(first, SummaryResult)
    spent = ledger.spent("scripted", clock() - 3600)
    assert spent == first.input_tokens + first.output_tokens > 0
    ledger.record("scripted", 5_000 - spent - 500, 0, clock())  # 500 left, the call needs more
    second = model.write(request())
    assert isinstance(second, SummaryFailure) and second.deferred
    assert "spend cap" in second.reason and "hour" in second.reason
    assert len(llm.requests) == 1  # never sent
    # An hour later the hourly spend is free again; a day cap still counts it.
    clock.now += 3_601
    assert isinstance(model.write(request()), SummaryResult)
    daily = ModelSummariser(ScriptedLLM(["x"]), ModelOptions(tokens_per_day=5_000),
                            ledger=ledger, clock=clock)  # fmt: skip
    refused = daily.write(request())
    assert isinstance(refused, SummaryFailure) and "day" in refused.reason


def log_of(n: int) -> ContextLog:
    return ContextLog.from_messages(
        user(i, f"question {i} " * 30) if i % 2 == 0 else agent(i, TextBlock(f"answer {i} " * 30))
        for i in range(n)
    )


def test_the_forest_keeps_a_failure_returns_none_and_does_not_ask_again() -> None:
    log = log_of(8)
    chunk = Chunk(2, 6, log.span_tokens(2, 6), True)
    llm = ScriptedLLM([CUT_OFF] * 40)
    forest = Forest(summariser(llm, split_depth=0))
    assert forest.level1(log, chunk, head_end=2) is None
    asked = len(llm.requests)
    assert forest.level1(log, chunk, head_end=2) is None
    assert len(llm.requests) == asked  # a permanent failure is not retried with the same keys
    assert forest.failures[(1, 2, 6)].reason
    assert forest.spend.failed == 1 and forest.spend.calls == asked
    assert forest.spend.as_report()["summaries_failed"] == 1
    # Another window is another key: worth a retry.
    retry = Forest(
        summariser(ScriptedLLM(["ok."]), window=20_000), failures=forest.failures.values()
    )
    node = retry.level1(log, chunk, head_end=2)
    assert node is not None and node.stop_reason == "end_turn" and node.summariser == "scripted"
    assert (1, 2, 6) not in retry.failures


def test_a_deferred_failure_is_retried_on_a_later_compile() -> None:
    log = log_of(8)
    chunk = Chunk(2, 6, log.span_tokens(2, 6), True)
    clock = Clock()
    llm = ScriptedLLM([TransientLLMError("503")] * 2 + ["back."])
    forest = Forest(summariser(llm, clock, transient_retries=1), clock=clock)
    assert forest.level1(log, chunk, head_end=2) is None
    assert forest.spend.deferred == 1 and forest.failures[(1, 2, 6)].deferred
    assert forest.level1(log, chunk, head_end=2) is None and len(llm.requests) == 2  # too soon
    clock.now += forest.retry_deferred_after
    node = forest.level1(log, chunk, head_end=2)
    assert node is not None and node.text == "back." and not forest.failures


def test_a_merge_that_fails_returns_none() -> None:
    log = log_of(10)
    llm = ScriptedLLM(["a.", "b.", *([CUT_OFF] * 10)])
    forest = Forest(summariser(llm, split_depth=0))
    nodes = [forest.level1(log, Chunk(s, s + 2, log.span_tokens(s, s + 2), True), head_end=2)
             for s in (2, 4)]  # fmt: skip
    assert all(n is not None for n in nodes)
    assert forest.merge([n for n in nodes if n is not None]) is None
    assert forest.failures[(2, 2, 6)].task == "merge"
    assert "question 0" in str(llm.requests[-1].messages)  # the head, from the last level1's log


def test_a_stored_log_keeps_permanent_failures_for_the_next_process(database: str) -> None:
    from lamina.context import CompileOptions, StoredLog
    from lamina.store import open_store

    messages = list(log_of(12))
    store = open_store(database)
    try:
        failing = ScriptedLLM([CUT_OFF] * 40)
        stored = StoredLog.open(store, "proj", "sess", summariser(failing, split_depth=0))
        stored.append(messages)
        chunk = Chunk(2, 6, stored.log.span_tokens(2, 6), True)
        assert stored.compiler.forest.level1(stored.log, chunk, head_end=2) is None
        stored.compile(CompileOptions(budget=100_000))  # saves the frontier and the failure

        again = ScriptedLLM(["never asked."])
        reopened = StoredLog.open(store, "proj", "sess", summariser(again, split_depth=0))
        assert reopened.compiler.forest.level1(reopened.log, chunk, head_end=2) is None
        assert again.requests == []  # same summariser, window and prompt: not asked again

        other = ScriptedLLM(["I answered questions 2 to 5."])
        bigger = StoredLog.open(store, "proj", "sess", summariser(other, window=64_000))
        node = bigger.compiler.forest.level1(bigger.log, chunk, head_end=2)
        assert node is not None and node.text == "I answered questions 2 to 5."
        bigger.compile(CompileOptions(budget=100_000))
        state = store.load_frontier("proj", "sess")
        assert state is not None and state["failures"] == []
    finally:
        store.close()


def test_a_request_that_cannot_fit_fails_with_its_price_broken_down(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The chunk is one short message; the head is what does not fit.
    head = tuple(user(i, f"spec part {i} " + "word " * 12_000) for i in range(4))
    llm = ScriptedLLM(["never asked."])
    model = summariser(llm)
    chunk_only = request(head=(), messages=CHUNK[:1], recalled=())
    wide = replace(request(head=head, messages=CHUNK[:1], recalled=RECALLED), end=3)
    with caplog.at_level(logging.WARNING, logger="lamina.context.ladder"):
        failure = model.write(wide)
    assert isinstance(failure, SummaryFailure) and llm.requests == []
    assert "a single message" not in failure.reason
    price = model.price_parts(replace(wide, recalled=()))
    assert price.total == model.price(replace(wide, recalled=())) > 32_000
    assert price.head > 32_000 - 2_000 > model.price(chunk_only)
    assert failure.reason == (
        "the summary request for messages 2-2 cannot fit the window of 32000 tokens (nor be "
        f"split further): admission priced it at {price.total} tokens: prompt {price.prompt} "
        f"(head {price.head}, the span and the instructions {price.prompt - price.head}), "
        f"recalled summaries 0, retry line {price.retry_line}, output allowance 2000"
    )
    assert failure.reason in caplog.text
    parts = model.price_parts(request())
    assert parts.recalled > 0 and parts.retry_line > 0 and parts.total == model.price(request())


def test_the_forest_gives_the_ladder_what_the_last_recalled_summary_stands_for() -> None:
    log = log_of(16)
    llm = ScriptedLLM(["a.", "b.", "c.", "d.", "ab.", REFUSED, "after."])
    forest = Forest(summariser(llm))
    chunks = [Chunk(s, s + 2, log.span_tokens(s, s + 2), True) for s in range(2, 14, 2)]
    nodes = [forest.level1(log, c, head_end=2) for c in chunks[:4]]
    assert all(n is not None for n in nodes)
    merged = forest.merge([n for n in nodes[:2] if n is not None], log, head_end=2)
    assert merged is not None and merged.text == "ab."
    # Recalled before 10-12: L1-6-8 ("c.") and L1-8-10 ("d.") after the merge: the last one
    # (a level-1 summary) expands to its messages 8-9.
    node = forest.level1(log, chunks[4], head_end=2)
    assert node is not None and node.text == "after."
    refused, expanded = str(llm.requests[-2].messages), str(llm.requests[-1].messages)
    assert "d." in refused and "question 8 " not in refused
    assert "[CM] Recall messages 8-9 as they were." in expanded and "question 8 " in expanded
    assert "ab." in expanded and "c." in expanded
    # A deeper summary expands to its children.
    request_ = forest._expansion(log, forest.recall_before(6, 2), 6)
    assert [i.id for i in request_["expansion"]] == [n.id for n in nodes[:2] if n is not None]
    assert request_["expands"] == merged.id
