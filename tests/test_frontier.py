"""The frontier's cache behaviour: fold only when needed, then deep, with a stable prefix."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from lamina.bench.cache import CompactAtThreshold, Lamina
from lamina.bench.cache import replay as cache_replay
from lamina.context import (
    CompileOptions,
    Compiler,
    CompileResult,
    ContextLog,
    ExtractiveSummariser,
    validate_anthropic,
)
from lamina.context.chunks import cut_chunks, head_end
from lamina.context.compile import request_tokens
from lamina.context.frontier import choose_frontier
from lamina.context.render import render
from lamina.messages import (
    Kind,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from lamina.readers import read_transcript

from .conftest import CLAUDE_CODE, EXAMPLE, SHARED, needs_shared, shared_transcripts
from .test_compile import long_history, msg


def blocks(request: dict[str, Any]) -> list[bytes]:
    """The request's content blocks in order, cache markers left out."""
    return [
        orjson.dumps(
            [m["role"], {k: v for k, v in b.items() if k != "cache_control"}],
            option=orjson.OPT_SORT_KEYS,
        )
        for m in request["messages"]
        for b in m["content"]
    ]


def replay(history: list[Message], options: CompileOptions) -> list[CompileResult]:
    """One compile before every assistant message, as a live session would."""
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    results = []
    for message in history:
        if message.role is Role.ASSISTANT and len(log):
            results.append(compiler.compile(log, options))
        log.append(message)
    return results


@pytest.mark.parametrize(("budget", "reserve"), [(8_000, 1_000), (32_000, 4_000)])
def test_between_folds_every_request_starts_with_the_previous_one(
    budget: int, reserve: int
) -> None:
    options = CompileOptions(budget=budget, reserve=reserve)
    results = replay(long_history(120, words=500), options)
    folds = [r for r in results if r.report["folds"]]
    assert folds, "the history is many times the budget"
    for before, after in itertools.pairwise(results):
        assert validate_anthropic(after.request) == []
        assert after.tokens <= options.available
        if not after.report["folds"]:
            previous = blocks(before.request)
            assert blocks(after.request)[: len(previous)] == previous


@pytest.mark.parametrize(("budget", "reserve"), [(8_000, 1_000), (32_000, 4_000)])
def test_a_fold_goes_deep_so_the_next_one_is_far_away(budget: int, reserve: int) -> None:
    options = CompileOptions(budget=budget, reserve=reserve)
    results = replay(long_history(120, words=500), options)
    folds = [r for r in results if r.report["folds"]]
    # Each fold brings the request to about half the budget or less: the room left holds as
    # much new conversation as the request itself, so folds (prefix changes) stay rare.
    assert all(r.tokens <= 0.55 * options.available for r in folds)
    assert len(folds) * 6 < len(results)
    # Summaries stay a small part of the request: the oldest merge into deeper levels.
    cap = options.summary_share * options.available
    assert all(r.report["summary_tokens"] <= cap for r in results)
    assert max(int(level) for level in results[-1].report["summaries_by_level"]) >= 2


def test_a_fold_keeps_the_newest_messages_raw() -> None:
    options = CompileOptions(budget=8_000, reserve=1_000)
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    folds = 0
    for message in long_history(60, words=500):
        if message.role is Role.ASSISTANT and len(log):
            result = compiler.compile(log, options)
            if result.report["folds"]:
                folds += 1
                newest = log.messages[-1].blocks[0]
                text = newest.text if isinstance(newest, TextBlock | ToolResultBlock) else ""
                assert json.dumps(text)[1:-1] in json.dumps(result.request)
        log.append(message)
    assert folds


def test_a_fold_does_not_keep_an_older_large_result_raw_for_the_windows_edge() -> None:
    # The recent window (the newest 350 tokens here) starts in the chunk that holds a large
    # tool result, answered since and followed by a new request: the fold takes that chunk
    # too rather than keeping thousands of tokens raw for a few of the window's, so the next
    # fold is far away. The newest exchange stays raw.
    history = long_history(30)
    n = len(history)
    history += [
        msg(n, Role.ASSISTANT, TextBlock("reading the log"),
            ToolUseBlock("big", "Bash", {"command": "cat build.log"})),
        msg(n + 1, Role.USER, ToolResultBlock("big", (TextBlock("BUILDLOG line " * 1_500),)),
            kind=Kind.TOOL_ACTIVITY),
        msg(n + 2, Role.ASSISTANT, TextBlock("the build failed in the linker step")),
        msg(n + 3, Role.USER, TextBlock("then fix the linker flags")),
    ]  # fmt: skip
    options = CompileOptions(budget=8_000, reserve=1_000)
    result = Compiler(ExtractiveSummariser()).compile(ContextLog.from_messages(history), options)
    text = json.dumps(result.request)
    assert "BUILDLOG" not in text
    assert "the build failed in the linker step" in text
    assert "then fix the linker flags" in text
    assert result.tokens <= 0.3 * options.available


def test_the_head_ends_at_the_boundary_nearest_its_share_and_never_moves() -> None:
    def sized(tokens: list[int]) -> tuple[list[Message], list[int]]:
        messages = [msg(n, Role.USER if n % 2 == 0 else Role.ASSISTANT, TextBlock("x")) for n in
                    range(len(tokens))]  # fmt: skip
        return messages, tokens

    # 900 tokens within a 1000 target beats 5,900 past it; 1,200 past it beats 300 within.
    assert head_end(*sized([300, 300, 300, 5000, 200]), 1000) == 3
    assert head_end(*sized([300, 900, 200]), 1000) == 2
    # Until the log passes its target it is all head.
    assert head_end(*sized([300, 300]), 1000) == 2
    # A tool call and its result are never split.
    call = msg(0, Role.ASSISTANT, ToolUseBlock("t1", "Read", {"file_path": "a"}))
    result = msg(1, Role.USER, ToolResultBlock("t1", (TextBlock("x"),)))
    messages = [call, result, msg(2, Role.ASSISTANT, TextBlock("y"))]
    assert head_end(messages, [600, 600, 100], 1000) == 2
    # Appending never moves it.
    history = long_history(30)
    log = ContextLog.from_messages(history)
    found = {head_end(log.messages[:n], log.shown[:n], 2_000) for n in range(40, len(log))}
    assert len(found) == 1


def test_the_head_counts_an_opening_tool_result_as_it_is_sent() -> None:
    # A short task, then a tool result far larger than a message may be when sent (it is cut
    # to fit): counted whole it would push the head back to the task alone; counted as sent
    # it is the boundary nearest the head's share, so the first exchange stays raw.
    options = CompileOptions(budget=8_000, reserve=1_000)
    opening = [
        msg(0, Role.USER, TextBlock("port the parser to rust")),
        msg(1, Role.ASSISTANT, ToolUseBlock("t0", "Read", {"file_path": "parser.py"})),
        msg(2, Role.USER, ToolResultBlock("t0", (TextBlock("def parse(): pass\n" * 6_000),)),
            kind=Kind.TOOL_ACTIVITY),
    ]  # fmt: skip
    history = opening + long_history(40)[1:]
    result = Compiler(ExtractiveSummariser()).compile(ContextLog.from_messages(history), options)
    assert result.report["folds"], "the history is several times the budget"
    assert result.report["head"]["messages"] == 3
    first = result.request["messages"]
    assert first[0]["content"][0]["text"] == "port the parser to rust"
    assert first[2]["content"][0]["type"] == "tool_result"


def test_chunks_resumed_from_the_previous_compile_match_a_fresh_cut() -> None:
    options = CompileOptions(budget=8_000, reserve=1_000)
    history = long_history(60, words=300)
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    for message in history:
        log.append(message)
        if message.role is Role.USER:
            result = compiler.compile(log, options)
    frontier = result.frontier
    fresh = cut_chunks(log.messages, log.shown, frontier.head_end, frontier.chunk_target)
    assert list(frontier.chunks) == [c for c in fresh if c.complete]


def test_plans_with_what_a_request_costs_thinking_left_out() -> None:
    history = [
        msg(0, Role.USER, TextBlock("plan the release " * 20)),
        msg(1, Role.ASSISTANT, ThinkingBlock("weighing the options " * 2000), TextBlock("ok")),
    ] * 10
    log = ContextLog.from_messages(history)
    assert sum(log.shown) < sum(log.tokens) // 10
    result = Compiler(ExtractiveSummariser()).compile(log, CompileOptions(budget=8_000))
    # Thinking is never sent, so the whole conversation fits raw.
    assert result.report["summaries_by_level"] == {}


@needs_shared
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
def test_estimates_match_the_rendered_request(path: Path) -> None:
    log = ContextLog.from_messages(read_transcript(str(path)).messages)
    result = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(budget=10_000_000, reserve=0)
    )
    assert result.report["summaries_by_level"] == {}
    assert abs(result.tokens - sum(log.shown)) <= 0.02 * result.tokens


ENTIRE = SHARED / "claude-code-entire"


@pytest.mark.parametrize(
    ("name", "budget", "reserve"),
    [
        ("entire-abc0b1d7.jsonl", 8_000, 4_000),
        ("entire-60b38d1e.jsonl", 4_000, 1_000),
        ("spotter-258c7280.jsonl", 8_000, 4_000),
    ],
)
def test_no_fold_while_the_request_still_fits(name: str, budget: int, reserve: int) -> None:
    # A fold breaks the cached prefix: it is made only when the request, as rendered, would not
    # fit without it, whatever the per-message estimate says.
    path = ENTIRE / name if name.startswith("entire-") else CLAUDE_CODE / name
    if not path.is_file():
        pytest.skip(f"{path} is not beside the checkout")
    options = CompileOptions(budget=budget, reserve=reserve)
    compiler = Compiler(ExtractiveSummariser())
    log = ContextLog()
    for message in read_transcript(str(path)).messages:
        if message.role is Role.ASSISTANT and len(log):
            before = compiler.previous
            result = compiler.compile(log, options)
            if before is not None and result.frontier.folded:
                kept = choose_frontier(log, compiler.forest, options, before, 1 << 60)
                unfolded = render("anthropic", log, kept, options.largest_message, None)
                assert request_tokens(unfolded) > options.available, len(log)
        log.append(message)


def test_a_large_tool_call_is_planned_whole() -> None:
    # A tool call is never cut; a big one (a file written whole) counts in full.
    history: list[Message] = []
    for n in range(12):
        history.append(msg(len(history), Role.USER, TextBlock(f"step {n} " + "go on " * 50)))
        history.append(
            msg(
                len(history),
                Role.ASSISTANT,
                ToolUseBlock(f"w{n}", "Write", {"content": f"line {n}\n" * 1_500}),
            )
        )
        history.append(
            msg(len(history), Role.USER, ToolResultBlock(f"w{n}", (TextBlock("written"),)))
        )
        history.append(msg(len(history), Role.ASSISTANT, TextBlock(f"wrote {n}")))
    options = CompileOptions(budget=12_000, reserve=1_000)
    for result in replay(history, options):
        assert validate_anthropic(result.request) == []
        assert result.tokens <= options.available


def test_cache_bench_reports_shares_baselines_and_visible_history() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "bench", "cache", "--transcript", str(EXAMPLE),
         "--budget", "8000", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for name in ("lamina", "sliding_window", "compact_at_threshold"):
        run = data[name]
        assert {
            "cached_share",
            "ceiling",
            "input_cost",
            "compile_ms",
            "prefix_breaks",
            "visible",
            "never_raw",
        } <= set(run)
        assert set(run["compile_ms"]) == {"p50", "p95"}
        assert run["cached_share"] <= run["ceiling"] + 0.01
    assert data["lamina"]["visible"]["summary_tokens_mean"] > 0


def test_cache_bench_counts_messages_folded_before_any_request_showed_them() -> None:
    # A tool result larger than the newest quarter compacting keeps arrives as the request
    # goes over: compacting summarises it (and its call) before the model has seen it, which
    # keeps its cached share up; Lamina shows it raw first.
    history = long_history(12)
    n = len(history)
    history += [
        msg(n, Role.USER, TextBlock("now read the whole build log")),
        msg(n + 1, Role.ASSISTANT, TextBlock("reading it"),
            ToolUseBlock("big", "Bash", {"command": "cat build.log"})),
        msg(n + 2, Role.USER, ToolResultBlock("big", (TextBlock("BUILDLOG line " * 1_500),)),
            kind=Kind.TOOL_ACTIVITY),
        msg(n + 3, Role.ASSISTANT, TextBlock("the linker step failed")),
    ]  # fmt: skip
    options = CompileOptions(budget=8_000, reserve=1_000)
    compacting = cache_replay(history, CompactAtThreshold(options))
    assert compacting["summariser_calls"] == 1
    assert compacting["never_raw"]["messages"] == 2
    assert compacting["never_raw"]["tokens"] > options.largest_message
    assert cache_replay(history, Lamina(options))["never_raw"] == {"messages": 0, "tokens": 0}


def test_folds_are_undone_when_the_budget_grows_and_reused_when_it_shrinks_again() -> None:
    log = ContextLog.from_messages(long_history(60, words=300))
    compiler = Compiler(ExtractiveSummariser())
    small = compiler.compile(log, CompileOptions(budget=8_000, reserve=1_000))
    assert small.report["summaries_by_level"]
    large = compiler.compile(log, CompileOptions(budget=100_000, reserve=1_000))
    assert large.report["summaries_by_level"] == {}, "room again: everything raw"
    assert large.report["changed"]["summaries_hidden"]
    again = compiler.compile(log, CompileOptions(budget=8_000, reserve=1_000))
    assert again.request == small.request and again.report["summaries_written"] == 0


def test_head_and_recent_windows_can_be_given_in_tokens() -> None:
    log = ContextLog.from_messages(long_history(60, words=300))
    default = Compiler(ExtractiveSummariser()).compile(log, CompileOptions(8_000, 1_000))
    sized = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(8_000, 1_000, head_tokens=2_500, recent_tokens=1_500)
    )
    assert default.report["head"]["tokens"] < 1_800 < sized.report["head"]["tokens"] < 3_200
    assert sized.report["tail"]["tokens"] >= 1_500 > default.report["tail"]["tokens"]
    assert validate_anthropic(sized.request) == []
