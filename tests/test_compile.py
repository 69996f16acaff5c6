"""The context compiler: every request valid, within budget, covering the log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.context import (
    CompileOptions,
    Compiler,
    ContextLog,
    ExtractiveSummariser,
    OverBudgetError,
    validate_anthropic,
)
from lamina.context.render import SEPARATOR
from lamina.messages import Kind, Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from lamina.readers import read_transcript

from .conftest import CC, EXAMPLE, needs_shared, shared_transcripts


def compile_file(path: Path, budget: int) -> tuple[ContextLog, object]:
    log = ContextLog.from_messages(read_transcript(str(path)).messages)
    options = CompileOptions(budget=budget, reserve=min(4000, budget // 8))
    return log, Compiler(ExtractiveSummariser()).compile(log, options)


@needs_shared
@pytest.mark.parametrize("budget", [8_000, 32_000, 100_000])
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
def test_no_invariant_is_broken_on_any_shared_transcript(path: Path, budget: int) -> None:
    _log, result = compile_file(path, budget)
    assert validate_anthropic(result.request) == []  # type: ignore[attr-defined]
    assert result.tokens <= budget - min(4000, budget // 8)  # type: ignore[attr-defined]
    text = json.dumps(result.request)  # type: ignore[attr-defined]
    assert '"thinking"' not in text


def test_small_budgets_fold_old_stretches_into_recall_pairs() -> None:
    log, result = compile_file(EXAMPLE, 8_000)
    messages = result.request["messages"]  # type: ignore[attr-defined]
    recalls = [
        m
        for m in messages
        if m["role"] == "user"
        and any(b.get("text", "").startswith("[CM] Recall memory ") for b in m["content"])
    ]
    assert recalls, "an 8k budget folds the example"
    assert result.report["summaries_by_level"]  # type: ignore[attr-defined]
    # The newest turn is still there, raw.
    last_prompt = [m for m in log.messages if m.kind is Kind.PROMPT][-1]
    assert "do we need rate limiting now" in last_prompt.text
    assert "do we need rate limiting now" in json.dumps(messages[-8:])
    big = compile_file(EXAMPLE, 100_000)[1]
    assert big.report["summaries_by_level"] == {}  # type: ignore[attr-defined]


def msg(i: int, role: Role, *blocks: object, kind: Kind | None = None) -> Message:
    default = Kind.PROMPT if role is Role.USER else Kind.REPLY
    return Message(id=str(i), role=role, blocks=tuple(blocks), kind=kind or default)  # type: ignore[arg-type]


def long_history(turns: int, words: int = 300) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out.append(msg(len(out), Role.USER, TextBlock(f"question {n} " + "about caching " * 20)))
        out.append(
            msg(
                len(out),
                Role.ASSISTANT,
                TextBlock(f"let me look {n}"),
                ToolUseBlock(f"t{n}", "Read", {"file_path": f"src/m{n}.py"}),
                kind=Kind.REPLY,
            )
        )
        out.append(
            msg(
                len(out),
                Role.USER,
                ToolResultBlock(f"t{n}", (TextBlock("code " * words),)),
                kind=Kind.TOOL_ACTIVITY,
            )
        )
        out.append(msg(len(out), Role.ASSISTANT, TextBlock(f"answer {n}: " + "cache it " * 30)))
    return out


def test_long_saturation_every_turn_compiles_valid_and_within_budget() -> None:
    history = long_history(240, words=700)
    compiler = Compiler(ExtractiveSummariser())
    options = CompileOptions(budget=8_000, reserve=1_000)
    log = ContextLog()
    for n, message in enumerate(history):
        log.append(message)
        if message.role is Role.ASSISTANT and n % 8 == 3:
            result = compiler.compile(log, options)
            assert validate_anthropic(result.request) == [], n
            assert result.tokens <= options.available
    assert sum(log.tokens) > 10 * options.budget
    assert "2" in result.report["summaries_by_level"] or "3" in result.report["summaries_by_level"]


def test_a_recall_answer_never_merges_with_the_agents_own_turn() -> None:
    history = long_history(40)
    log = ContextLog.from_messages(history)
    result = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(budget=8_000, reserve=1_000)
    )
    messages = result.request["messages"]
    for index, message in enumerate(messages):
        texts = [b.get("text", "") for b in message["content"]]
        if message["role"] == "assistant" and index > 0:
            prev = messages[index - 1]["content"]
            if any(b.get("text", "").startswith("[CM] Recall memory") for b in prev):
                # The answer stands alone: nothing of the agent's own turn merged into it.
                assert len(texts) == 1
    separators = [m for m in messages if m["content"][0].get("text") == SEPARATOR]
    assert all(m["role"] == "user" for m in separators)


def test_a_huge_tool_result_is_cut_with_a_marker_and_stays_paired(tmp_path: Path) -> None:
    cc = CC()
    cc.user("dump the log")
    cc.tool_use("t1", "Bash", command="cat huge.log")
    cc.tool_result("t1", "line of output\n" * 40_000)
    cc.assistant("It is long.")
    log = ContextLog.from_messages(read_transcript(str(cc.write(tmp_path / "s.jsonl"))).messages)
    result = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(budget=8_000, reserve=1_000)
    )
    assert validate_anthropic(result.request) == []
    dumped = json.dumps(result.request)
    assert "tokens cut by Lamina to fit the budget" in dumped
    assert result.tokens <= 7_000


def test_parallel_calls_answered_one_record_each_are_all_shown() -> None:
    # Claude Code writes the results of parallel tool calls one record each; every call stays,
    # answered by its result, not just the one the first record answers.
    log = ContextLog.from_messages(read_transcript(str(EXAMPLE)).messages)
    assert any(sum(isinstance(b, ToolUseBlock) for b in m.blocks) > 1 for m in log.messages)
    result = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(budget=100_000, reserve=4_000)
    )
    assert result.report["summaries_by_level"] == {}
    assert validate_anthropic(result.request) == []
    calls = [b.id for m in log.messages for b in m.blocks if isinstance(b, ToolUseBlock)]
    shown = [b for m in result.request["messages"] for b in m["content"]]
    assert [b["id"] for b in shown if b["type"] == "tool_use"] == calls
    assert sorted(b["tool_use_id"] for b in shown if b["type"] == "tool_result") == sorted(calls)


def test_over_budget_says_by_how_much() -> None:
    # Huge messages: each is cut to its largest size, but the opening message alone, kept raw,
    # with the rest folded, still needs more than the 200 tokens available.
    history = [
        msg(n, Role.USER if n % 2 == 0 else Role.ASSISTANT, TextBlock("word " * 3000))
        for n in range(3)
    ]
    log = ContextLog.from_messages(history)
    with pytest.raises(OverBudgetError, match=r"over the 200 available") as caught:
        Compiler(ExtractiveSummariser()).compile(log, CompileOptions(budget=1_000, reserve=800))
    assert "kept raw, alone take" in str(caught.value)


def test_compile_command_prints_one_json_document() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--budget", "8000", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"request", "report"}
    assert validate_anthropic(data["request"]) == []
    assert data["report"]["tokens"] <= 7_000


@needs_shared
@pytest.mark.parametrize("budget", [8_000, 32_000])
def test_replaying_a_real_session_every_call_compiles_valid_and_within_budget(budget: int) -> None:
    from .conftest import CLAUDE_CODE

    messages = read_transcript(str(CLAUDE_CODE / "spotter-8463c716.jsonl")).messages
    options = CompileOptions(budget=budget, reserve=budget // 8)
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    compiles = 0
    for message in messages:
        if message.role is Role.ASSISTANT and len(log):
            result = compiler.compile(log, options)
            assert validate_anthropic(result.request) == []
            assert result.tokens <= options.available
            compiles += 1
        log.append(message)
    assert compiles > 100
