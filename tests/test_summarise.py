"""Summarisation requests: as-of, valid for the provider (separator turns, with controls that
stay byte-identical), admission at the exact boundary; the offline summariser unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from lamina.context import ContextLog, ExtractiveSummariser
from lamina.context.chunks import Chunk
from lamina.context.forest import Forest
from lamina.context.ladder import PROSE_RETRY, ModelOptions, ModelSummariser
from lamina.context.requests import Recalled, SummaryRequest
from lamina.context.validate import validate_anthropic
from lamina.llm import LLMRequest, ScriptedLLM
from lamina.messages import (
    Kind,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

SEP = "[CM] The conversation resumes."


def user(i: int, text: str) -> Message:
    return Message(id=f"m{i}", role=Role.USER, blocks=(TextBlock(text),), kind=Kind.PROMPT)


def agent(i: int, *blocks: Any) -> Message:
    return Message(id=f"m{i}", role=Role.ASSISTANT, blocks=tuple(blocks), kind=Kind.REPLY)


def result(i: int, call: str, text: str) -> Message:
    block = ToolResultBlock(call, (TextBlock(text),))
    return Message(id=f"m{i}", role=Role.USER, blocks=(block,), kind=Kind.TOOL_ACTIVITY)


HEAD = (user(0, "Build the parser."), agent(1, TextBlock("I will start with the lexer.")))
EARLIER = (Recalled("L1-2-6-aaaa", "I wrote the lexer and its tests."),)


def request(messages: tuple[Message, ...], **extra: Any) -> SummaryRequest:
    fields: dict[str, Any] = {"head": HEAD, "recalled": EARLIER, "messages": messages}
    fields.update(extra)
    return SummaryRequest("summarise", 1, 6, 6 + len(messages), 200, **fields)


def built(req: SummaryRequest, **options: Any) -> list[dict[str, Any]]:
    summariser = ModelSummariser(ScriptedLLM([]), ModelOptions(**options))
    return [dict(m) for m in summariser.build(req).messages]


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    return [(m["role"], [b.get("text", b["type"]) for b in m["content"]]) for m in messages]


def test_a_level1_request_is_head_then_recall_pairs_then_the_chunk_then_the_instruction() -> None:
    chunk = (user(6, "Now the grammar."), agent(7, TextBlock("Grammar done.")))
    messages = built(request(chunk))
    assert texts(messages)[:-1] == [
        ("user", ["Build the parser."]),
        ("assistant", ["I will start with the lexer."]),
        ("user", ["[CM] Recall memory L1-2-6-aaaa."]),
        ("assistant", ["I wrote the lexer and its tests."]),
        ("user", ["Now the grammar."]),
        ("assistant", ["Grammar done."]),
    ]
    last = messages[-1]
    assert last["role"] == "user" and "since memory L1-2-6-aaaa" in last["content"][0]["text"]
    assert validate_anthropic({"messages": messages}) == []


def test_a_recall_answer_followed_by_the_agents_turn_gets_a_separator_control_unchanged() -> None:
    control = built(request((user(6, "Go on."), agent(7, TextBlock("Done.")))))
    agent_first = built(
        request(
            (
                agent(
                    6,
                    TextBlock("Continuing."),
                ),
                user(7, "Go on."),
            )
        )
    )
    assert texts(agent_first)[3:6] == [
        ("assistant", ["I wrote the lexer and its tests."]),
        ("user", [SEP]),
        ("assistant", ["Continuing."]),
    ]
    assert validate_anthropic({"messages": agent_first}) == []
    # The control (the chunk opens with the user) has no separator, and its bytes are what the
    # parts give in order.
    assert SEP not in str(control)
    assert control[3:6] == [
        {"role": "assistant", "content": [{"type": "text", "text": EARLIER[0].text}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


def test_a_message_that_is_empty_once_cleaned_still_gets_the_separator() -> None:
    # Right after the recall answer: a user record holding only the result of a call that is
    # not in the request (removed), then thinking only (removed), then the agent's own turn.
    chunk = (
        result(6, "gone", "output of a call made before the chunk"),
        agent(7, ThinkingBlock("hmm")),
        agent(8, TextBlock("Here is the plan.")),
        user(9, "Good."),
    )
    messages = built(request(chunk))
    assert texts(messages)[3:6] == [
        ("assistant", ["I wrote the lexer and its tests."]),
        ("user", [SEP]),
        ("assistant", ["Here is the plan."]),
    ]
    assert "hmm" not in str(messages) and "gone" not in str(messages)
    assert validate_anthropic({"messages": messages}) == []
    # Control: with a user turn with real text after the answer, nothing is inserted.
    control = built(request((user(6, "Next?"), *chunk[1:])))
    assert SEP not in str(control)
    assert texts(control)[4:6] == [("user", ["Next?"]), ("assistant", ["Here is the plan."])]


def test_tool_calls_without_their_result_are_removed_and_same_roles_merge() -> None:
    chunk = (
        user(6, "Read the file."),
        agent(7, TextBlock("Reading."), ToolUseBlock("t1", "Read", {"path": "a.py"})),
        result(8, "t1", "print(1)"),
        user(9, "And?"),
        agent(10, ToolUseBlock("t2", "Bash", {"cmd": "ls"})),  # its result is after the chunk
    )
    req = request(chunk)
    summariser = ModelSummariser(ScriptedLLM([]))
    sent = summariser.build(req)
    messages = [dict(m) for m in sent.messages]
    assert validate_anthropic({"messages": messages}) == []
    assert "t2" not in str(messages) and "t1" in str(messages)
    # The tool result, "And?" and the instruction merge into one user turn, result first;
    # the agent's last turn held only the unanswered call, so it is gone.
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text", "text"]
    assert messages[-1]["content"][1]["text"] == "And?"
    assert messages[-2]["role"] == "assistant" and "Reading." in str(messages[-2])
    assert [t["name"] for t in sent.tools] == ["Read"]
    # Without tools declared, tool activity is spelled as text.
    bare = summariser.build(req, tools=False)
    assert bare.tools == () and "[tool call Read" in str(bare.messages)
    assert all(b["type"] == "text" for m in bare.messages for b in m["content"])


def test_a_merge_request_shows_the_summaries_to_merge_as_recall_pairs() -> None:
    merged = (Recalled("L1-6-9-b", "I built the grammar."), Recalled("L1-9-12-c", "I fixed it."))
    req = SummaryRequest("merge", 2, 6, 12, 150, head=HEAD, recalled=EARLIER, summaries=merged)
    messages = built(req)
    assert texts(messages)[2:8] == [
        ("user", ["[CM] Recall memory L1-2-6-aaaa."]),
        ("assistant", ["I wrote the lexer and its tests."]),
        ("user", ["[CM] Recall memory L1-6-9-b."]),
        ("assistant", ["I built the grammar."]),
        ("user", ["[CM] Recall memory L1-9-12-c."]),
        ("assistant", ["I fixed it."]),
    ]
    assert "L1-6-9-b, L1-9-12-c" in messages[-1]["content"][0]["text"]
    assert validate_anthropic({"messages": messages}) == []
    # A head that ends with the agent's turn and no recall before the merged summaries: the
    # recall prompt (user) follows it, so nothing is merged across roles.
    bare = built(SummaryRequest("merge", 2, 6, 12, 150, head=HEAD, summaries=merged))
    assert SEP not in str(bare) and validate_anthropic({"messages": bare}) == []


def first_sent(window: int, req: SummaryRequest) -> LLMRequest:
    llm = ScriptedLLM(["A summary."])
    options = ModelOptions(window=window, max_tokens=300, recall_share=1.0)
    ModelSummariser(llm, options).write(req)
    return llm.requests[0]


def test_admission_at_the_exact_boundary_counts_the_longest_retry_line() -> None:
    recalled = tuple(Recalled(f"L1-{i}-{i + 1}-x", f"Summary {i} " * 30) for i in range(4))
    req = request((user(6, "Go on."), agent(7, TextBlock("Done."))), recalled=recalled)
    probe = ModelSummariser(ScriptedLLM([]), ModelOptions(window=10_000, max_tokens=300))
    with_line = probe.price(req)
    without_line = probe.price(req, with_retry_line=False)
    assert with_line > without_line  # the retry line is priced in

    # Exactly at the boundary: everything is recalled.
    assert str(first_sent(with_line, req).messages).count("Recall memory") == 4
    # One token short, though it would fit without the retry line: the oldest recall goes.
    assert without_line <= with_line - 1
    sent = first_sent(with_line - 1, req).messages
    assert str(sent).count("Recall memory") == 3 and "L1-0-1-x" not in str(sent)
    # The priced request is what is sent: the first request plus the retry line fits.
    at_boundary = ModelSummariser(ScriptedLLM([]), ModelOptions(window=with_line, max_tokens=300))
    retried = at_boundary.build(req, retry_line=PROSE_RETRY)
    assert at_boundary.sent_tokens(retried) + 300 <= with_line


def test_admission_splits_the_chunk_when_no_recall_is_small_enough() -> None:
    chunk = tuple(user(6 + i, f"part {i} " + "word " * 300) for i in range(4))
    req = request(chunk, recalled=())
    llm = ScriptedLLM(["first half.", "second half."])
    window = ModelSummariser(llm, ModelOptions(max_tokens=300)).price(req) - 200
    answer = ModelSummariser(llm, ModelOptions(window=window, max_tokens=300)).write(req)
    assert answer.text == "first half.\n\nsecond half."  # type: ignore[union-attr]
    summariser = ModelSummariser(llm, ModelOptions(window=window, max_tokens=300))
    for sent in llm.requests:
        assert summariser.sent_tokens(sent) + 300 <= window
    assert "part 0" in str(llm.requests[0].messages) and "part 3" not in str(llm.requests[0])
    # The second half recalls the first half's summary, and never shows its raw messages.
    assert "first half." in str(llm.requests[1].messages)
    assert "part 0" not in str(llm.requests[1].messages)


def numbered_log(n: int) -> ContextLog:
    messages = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(user(i, f"question {i} " + "about parsing " * 20))
        else:
            messages.append(agent(i, TextBlock(f"answer {i} " + "with details " * 20)))
    return ContextLog.from_messages(messages)


def test_level1_requests_are_as_of_the_chunk() -> None:
    log = numbered_log(12)
    llm = ScriptedLLM([lambda r: f"memory {len(llm.requests)}"] * 10)
    forest = Forest(ModelSummariser(llm))
    chunks = [Chunk(2, 6, log.span_tokens(2, 6), True), Chunk(6, 10, log.span_tokens(6, 10), True)]
    later = forest.level1(log, chunks[1], head_end=2)  # written first, from a later chunk
    first = forest.level1(log, chunks[0], head_end=2)
    assert later is not None and first is not None
    sent_first = str(llm.requests[1].messages)
    assert "question 0" in sent_first and "answer 5" in sent_first  # head and the chunk
    assert "question 6" not in sent_first and later.text not in sent_first  # nothing after
    # A chunk after a written summary recalls it instead of its raw messages.
    third = forest.level1(log, Chunk(10, 12, log.span_tokens(10, 12), True), head_end=2)
    assert third is not None
    sent_third = str(llm.requests[2].messages)
    assert f"Recall memory {first.id}" in sent_third and f"Recall memory {later.id}" in sent_third
    assert "question 4" not in sent_third and "answer 11" in sent_third


def test_the_offline_summariser_writes_the_same_text_whatever_the_context() -> None:
    log = numbered_log(12)
    chunk = Chunk(6, 10, log.span_tokens(6, 10), True)
    plain = ExtractiveSummariser().summarise(log.slice(6, 10), max(80, chunk.tokens // 8))
    alone = Forest(ExtractiveSummariser()).level1(log, chunk, head_end=2)
    forest = Forest(ExtractiveSummariser())
    forest.level1(log, Chunk(2, 6, log.span_tokens(2, 6), True), head_end=2)
    with_recall = forest.level1(log, chunk, head_end=2)
    assert alone is not None and with_recall is not None
    assert alone.text == with_recall.text == plain
    assert alone.stop_reason == "complete" and alone.summariser == "extractive@1"
    assert alone.id == with_recall.id and alone.request_hash == with_recall.request_hash


@pytest.mark.parametrize("task", ["summarise", "merge"])
def test_recall_is_capped_by_its_budget_keeping_the_newest(task: str) -> None:
    recalled = tuple(Recalled(f"L1-{i}-x", f"memory {i} " + "detail " * 200) for i in range(6))
    merged = (Recalled("L1-a", "one"), Recalled("L1-b", "two"))
    req = SummaryRequest(task, 1 if task == "summarise" else 2, 6, 8, 100, head=HEAD,  # type: ignore[arg-type]
                         recalled=recalled, messages=(user(6, "hi"), agent(7, TextBlock("ok"))),
                         summaries=merged)  # fmt: skip
    llm = ScriptedLLM(["fine"])
    ModelSummariser(llm, ModelOptions(window=4_000, max_tokens=300)).write(req)
    sent = str(llm.requests[0].messages)
    assert "memory 5" in sent and "memory 0" not in sent


def test_summariser_settings_env_then_config_file_then_defaults(tmp_path: Any) -> None:
    from lamina.config import SummariserSettings, resolve_settings
    from lamina.errors import ConfigError

    config = tmp_path / "config.toml"
    config.write_text('summariser = "openai:gpt-4.1-mini"\ncompression_context_budget = 16000\n')
    env = {"LAMINA_CONFIG": str(config)}
    settings = resolve_settings(env).summariser
    assert settings == SummariserSettings("openai:gpt-4.1-mini", 16_000, 1_000_000, 5_000_000)
    env |= {"LAMINA_SUMMARISER": "anthropic:claude-haiku-4-5",
            "LAMINA_SUMMARISER_TOKENS_PER_HOUR": "20000"}  # fmt: skip
    assert resolve_settings(env).summariser == SummariserSettings(
        "anthropic:claude-haiku-4-5", 16_000, 20_000, 5_000_000
    )
    assert (
        resolve_settings({"LAMINA_CONFIG": str(tmp_path / "none.toml")}).summariser.summariser
        is None
    )
    with pytest.raises(ConfigError, match="LAMINA_SUMMARISER_TOKENS_PER_DAY must be a positive"):
        resolve_settings(env | {"LAMINA_SUMMARISER_TOKENS_PER_DAY": "lots"})


def test_summariser_from_config_is_offline_unless_a_model_is_configured() -> None:
    from lamina.config import SummariserSettings
    from lamina.context.configured import summariser_from_config

    assert isinstance(summariser_from_config(SummariserSettings()), ExtractiveSummariser)
    asked: list[str] = []

    def fake(spec: str, env: Any) -> ScriptedLLM:
        asked.append(spec)
        return ScriptedLLM([], name=spec)

    configured = SummariserSettings("anthropic:claude-haiku-4-5", 16_000, 20_000, 90_000)
    from lamina.llm.spend import InMemorySpendLedger

    ledger = InMemorySpendLedger()
    model = summariser_from_config(configured, get_llm=fake, ledger=ledger)
    assert isinstance(model, ModelSummariser) and asked == ["anthropic:claude-haiku-4-5"]
    assert model.ledger is ledger
    assert model.name == "anthropic:claude-haiku-4-5" and model.window == 16_000
    assert (model.options.tokens_per_hour, model.options.tokens_per_day) == (20_000, 90_000)


def test_lamina_compile_uses_the_configured_summariser(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    from .conftest import EXAMPLE

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env |= {"LAMINA_CONFIG": str(tmp_path / "none.toml"), "LAMINA_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--budget", "8000"]
    bad = subprocess.run(command, capture_output=True, text=True, timeout=120,
                         env=env | {"LAMINA_SUMMARISER": "nosuch:model"})  # fmt: skip
    assert bad.returncode != 0 and "unknown model provider 'nosuch'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_openai_spells_tool_blocks_its_own_way() -> None:
    from lamina.llm.providers import openai_messages

    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Read it."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"},
            {"type": "text", "text": "Summarise."}]},
    ]  # fmt: skip
    assert openai_messages("Be brief.", messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read it."},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "t1", "type": "function",
             "function": {"name": "Read", "arguments": '{"path":"a"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "x = 1"},
        {"role": "user", "content": "Summarise."},
    ]  # fmt: skip
    from lamina.context.validate import validate_openai

    assert validate_openai({"messages": openai_messages("Be brief.", messages)}) == []


# A stretch with no summary (pinned raw, or refused) is shown raw among the recall pairs, and the
# recall goes on past it.


def recalls(request: LLMRequest) -> list[str]:
    """The recall prompts of a request, in order: `L1-...` for a summary, `messages a-b` for a
    stretch shown raw."""
    out = []
    for message in request.messages:
        for block in message["content"]:
            text = str(block.get("text", ""))
            for line in text.split("\n"):
                if line.startswith("[CM] Recall memory "):
                    out.append(line.removeprefix("[CM] Recall memory ").rstrip("."))
                elif line.startswith("[CM] Recall messages "):
                    out.append("messages " + line.split()[3])
    return out


@pytest.mark.parametrize("gap", ["pinned raw", "refused"])
def test_a_stretch_with_no_summary_is_recalled_raw_and_the_recall_goes_on(gap: str) -> None:
    from lamina.context import CompileOptions, Compiler, Pin
    from lamina.llm import LLMResponse

    log = numbered_log(400)
    options = CompileOptions(budget=12_000, reserve=1_000, head_tokens=200, chunk_max=600)
    chunks = Compiler(ExtractiveSummariser()).compile(log, options).frontier.chunks
    hole = chunks[12]  # the stretch with no summary
    after = chunks[13]

    def last_words(chunk: Chunk) -> str:
        return log.messages[chunk.end - 1].text.split(" about")[0].split(" with")[0] + " "

    def asks_for(request: LLMRequest, chunk: Chunk) -> bool:
        """Whether the request is for the chunk: the chunk's last message comes right before
        the instruction."""
        return last_words(chunk) in str(request.messages[-2:])

    def asking(chunk: Chunk) -> LLMRequest:
        return next(r for r in llm.requests if asks_for(r, chunk))

    def answer(request: LLMRequest) -> LLMResponse:
        if gap == "refused" and asks_for(request, hole):
            return LLMResponse("", "max_tokens")
        return LLMResponse(f"memory {len(llm.requests)}", "end_turn")

    llm = ScriptedLLM([answer] * 400)
    pins = [Pin("spec", "raw", start=hole.start, end=hole.end)] if gap == "pinned raw" else []
    model = ModelSummariser(llm, ModelOptions(window=32_000, split_depth=0))
    result = Compiler(model).compile(log, options, pins=pins)
    assert validate_anthropic(result.request) == []

    request_after = asking(after)
    shown = recalls(request_after)
    # Every earlier chunk is recalled: 12 summaries, then the stretch as it was.
    assert shown[-1] == f"messages {hole.start}-{hole.end - 1}"
    assert [s.split("-")[1] for s in shown[:-1]] == [str(c.start) for c in chunks[:12]]
    sent = str(request_after.messages)
    for i in range(hole.start, hole.end):
        assert f"{'question' if i % 2 == 0 else 'answer'} {i} " in sent
    assert f"since the recalled messages {hole.start}-{hole.end - 1}, up to here" in sent
    assert sent.index(f"[CM] End of messages {hole.start}-{hole.end - 1}.") < sent.index(
        last_words(after)
    )
    assert validate_anthropic({"messages": list(request_after.messages)}) == []
    # Later requests still recall what came before the stretch.
    assert recalls(asking(chunks[15]))[0].split("-")[1] == str(chunks[0].start)


def test_admission_keeps_the_newest_messages_of_a_raw_stretch_it_cannot_hold_whole() -> None:
    from lamina.context.requests import RawStretch

    stretch_messages = tuple(user(6 + i, f"step {i} " + "word " * 200) for i in range(10))
    stretch = RawStretch(6, 16, stretch_messages, tuple(210 for _ in stretch_messages))
    req = SummaryRequest("summarise", 1, 16, 18, 100, head=HEAD, recalled=(*EARLIER, stretch),
                         messages=(user(16, "and now?"), agent(17, TextBlock("done"))))  # fmt: skip
    model = ModelSummariser(ScriptedLLM([]), ModelOptions(window=4_000, max_tokens=300))
    admitted = model.admit(req)
    assert admitted is not None
    assert len(admitted.recalled) == 1  # the older summary goes: the recall stops at the cut
    kept = admitted.recalled[0]
    assert isinstance(kept, RawStretch) and kept.end == 16 and 6 < kept.start < 16
    assert sum(kept.tokens) + 16 <= 1_000 < sum(kept.tokens) + 210 + 16
    assert model.price(admitted) <= 4_000
