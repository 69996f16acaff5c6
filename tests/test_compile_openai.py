"""The context compiler's OpenAI Chat Completions output: valid, within budget, the same turns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.context import (
    REQUEST_FORMATS,
    CompileOptions,
    Compiler,
    ContextLog,
    ExtractiveSummariser,
    RequestFormat,
    request_tokens,
    validate_anthropic,
    validate_openai,
)
from lamina.context.forest import Summary
from lamina.context.frontier import Frontier
from lamina.context.render import SEPARATOR, render, render_anthropic, render_openai
from lamina.errors import InputError
from lamina.messages import (
    ImageBlock,
    Kind,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from lamina.readers import read_transcript

from .conftest import CLAUDE_CODE, EXAMPLE, needs_shared, shared_transcripts
from .test_compile import long_history, msg

RECALL = "[CM] Recall memory "


def compile_openai(path: Path, budget: int) -> tuple[ContextLog, Any, CompileOptions]:
    log = ContextLog.from_messages(read_transcript(str(path)).messages)
    options = CompileOptions(budget=budget, reserve=min(4000, budget // 8))
    return log, Compiler(ExtractiveSummariser()).compile(log, options, "openai"), options


def tool_runs(messages: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """For each assistant message with tool calls: its call ids, and the ids of the tool
    messages right after it."""
    runs = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        answers = []
        for following in messages[index + 1 :]:
            if following["role"] != "tool":
                break
            answers.append(following["tool_call_id"])
        runs.append(([c["id"] for c in message["tool_calls"]], answers))
    return runs


def frontier(head_end: int, summaries: list[tuple[int, int]], tail_start: int) -> Frontier:
    """A hand-made frontier: the head raw, these spans as summaries, then the tail raw."""
    items: list[tuple[int, int] | Summary] = [
        Summary(f"L1-{s}-{e}", 1, s, e, f"summary of {s}-{e}", 4, (), "test") for s, e in summaries
    ]
    return Frontier(head_end, items, tail_start, 0)


# Every shared transcript, at three budgets.


@needs_shared
@pytest.mark.parametrize("budget", [8_000, 32_000, 100_000])
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
def test_every_shared_transcript_compiles_to_a_valid_openai_request(
    path: Path, budget: int
) -> None:
    log, result, options = compile_openai(path, budget)
    messages = result.request["messages"]
    assert validate_openai(result.request) == []
    assert result.tokens <= options.available
    assert result.tokens == request_tokens(result.request)
    text = json.dumps(result.request)
    for anthropic_only in ('"thinking"', '"tool_use"', '"tool_result"', '"cache_control"'):
        assert anthropic_only not in text
    for calls, answers in tool_runs(messages):
        assert answers == calls  # every result right after its call, in call order
    assert all(isinstance(m["content"], str) for m in messages if m["role"] != "assistant")
    # The same turns as the Anthropic rendering of the same frontier: the same tool calls in the
    # same order, the same recall pairs.
    anthropic = render_anthropic(log, result.frontier, options.largest_message)
    assert validate_anthropic(anthropic) == []
    blocks = [b for m in anthropic["messages"] for b in m["content"]]
    calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    assert calls == [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(results) == sorted(b["tool_use_id"] for b in blocks if b["type"] == "tool_result")
    recalls = [m["content"] for m in messages if m["role"] == "user" and RECALL in m["content"]]
    assert len(recalls) == sum(RECALL in b.get("text", "") for b in blocks)
    assert len(recalls) == sum(result.report["summaries_by_level"].values())


@needs_shared
def test_an_openai_replay_breaks_the_prefix_as_often_as_anthropic() -> None:
    """No cache breakpoints for OpenAI, which caches prefixes by itself: the prefix is as
    stable as Anthropic's because both come from the same turns. OpenAI's separate tool
    messages cost a little more framing, so near the budget a fold may come a compile apart."""
    messages = read_transcript(str(CLAUDE_CODE / "spotter-8463c716.jsonl")).messages

    def breaks(request_format: RequestFormat) -> tuple[list[int], int]:
        """The compiles whose request does not start with the previous one (its last message
        aside: the newest turn may still grow), and the number of compiles."""
        compiler = Compiler(ExtractiveSummariser())
        options = CompileOptions(budget=8_000, reserve=1_000)
        log = ContextLog()
        previous: list[dict[str, Any]] = []
        out: list[int] = []
        compiles = 0
        for message in messages:
            if message.role is Role.ASSISTANT and len(log):
                request = compiler.compile(log, options, request_format).request
                if request_format == "openai":
                    assert validate_openai(request) == []
                current = request["messages"]
                if previous and current[: len(previous) - 1] != previous[:-1]:
                    out.append(compiles)
                previous = current
                compiles += 1
            log.append(message)
        return out, compiles

    openai, compiles = breaks("openai")
    anthropic, _ = breaks("anthropic")
    assert 5 < len(openai) < compiles // 3  # folds happen, and most compiles keep the prefix
    assert len(openai) == len(anthropic)
    assert all(abs(o - a) <= 2 for o, a in zip(openai, anthropic, strict=True))


def test_long_saturation_every_openai_compile_is_valid_and_within_budget() -> None:
    history = long_history(240, words=700)
    compiler = Compiler(ExtractiveSummariser())
    options = CompileOptions(budget=8_000, reserve=1_000)
    log = ContextLog()
    for n, message in enumerate(history):
        log.append(message)
        if message.role is Role.ASSISTANT and n % 8 == 3:
            result = compiler.compile(log, options, request_format="openai")
            assert validate_openai(result.request) == [], n
            assert result.tokens <= options.available
    assert sum(log.tokens) > 10 * options.budget
    assert "2" in result.report["summaries_by_level"] or "3" in result.report["summaries_by_level"]


def test_the_report_is_the_same_in_both_formats() -> None:
    log = ContextLog.from_messages(long_history(40))
    options = CompileOptions(budget=8_000, reserve=1_000)
    anthropic = Compiler(ExtractiveSummariser()).compile(log, options)
    openai = Compiler(ExtractiveSummariser()).compile(log, options, request_format="openai")
    assert anthropic.report["summaries_by_level"]
    ignore = {"tokens", "compile_ms"}
    assert {k: v for k, v in openai.report.items() if k not in ignore} == {
        k: v for k, v in anthropic.report.items() if k not in ignore
    }
    assert openai.report["tokens"] == openai.tokens <= options.available


def test_an_unknown_request_format_is_refused() -> None:
    log = ContextLog.from_messages(long_history(2))
    with pytest.raises(InputError, match=r"unknown request format 'gemini'"):
        Compiler(ExtractiveSummariser()).compile(log, CompileOptions(), "gemini")  # type: ignore[arg-type]
    assert set(REQUEST_FORMATS) == {"anthropic", "openai"}


# The separator between a recall answer and the agent's own turn.


def separator_log() -> ContextLog:
    return ContextLog.from_messages(
        [
            msg(0, Role.USER, TextBlock("fix the parser")),
            msg(1, Role.ASSISTANT, TextBlock("looking"), ToolUseBlock("t1", "Read", {"p": "a"})),
            msg(2, Role.USER, ToolResultBlock("t1", (TextBlock("code"),)), kind=Kind.TOOL_ACTIVITY),
            msg(3, Role.ASSISTANT, TextBlock("the bug is on line 3")),
            msg(4, Role.USER, TextBlock("go on then")),
            msg(5, Role.ASSISTANT, TextBlock("fixed")),
        ]
    )


def shape(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"] or "") for m in request["messages"]]


def test_a_recall_answer_followed_by_the_agents_turn_gets_a_separator() -> None:
    log = separator_log()
    request = render_openai(log, frontier(1, [(1, 3)], 3), 1_000)
    assert validate_openai(request) == []
    assert shape(request) == [
        ("user", "fix the parser\n\n[CM] Recall memory L1-1-3."),
        ("assistant", "summary of 1-3"),
        ("user", SEPARATOR),
        ("assistant", "the bug is on line 3"),
        ("user", "go on then"),
        ("assistant", "fixed"),
    ]


def test_an_orphan_result_after_a_summary_is_dropped_and_the_separator_still_comes() -> None:
    # The summary covers the call; its result, shown raw, answers nothing and goes, which makes
    # the recall answer and the agent's next turn neighbours.
    log = separator_log()
    request = render_openai(log, frontier(1, [(1, 2)], 2), 1_000)
    assert validate_openai(request) == []
    assert all(m["role"] != "tool" for m in request["messages"])
    assert shape(request)[1:4] == [
        ("assistant", "summary of 1-2"),
        ("user", SEPARATOR),
        ("assistant", "the bug is on line 3"),
    ]


def test_no_separator_when_the_user_speaks_next_or_summaries_follow_each_other() -> None:
    log = separator_log()
    request = render_openai(log, frontier(0, [(0, 2), (2, 4)], 4), 1_000)
    assert validate_openai(request) == []
    assert shape(request) == [
        ("user", "[CM] Recall memory L1-0-2."),
        ("assistant", "summary of 0-2"),
        ("user", "[CM] Recall memory L1-2-4."),
        ("assistant", "summary of 2-4"),
        ("user", "go on then"),
        ("assistant", "fixed"),
    ]
    assert SEPARATOR not in json.dumps(request)


def test_the_compiler_puts_separators_where_anthropic_does() -> None:
    log = ContextLog.from_messages(long_history(40))
    options = CompileOptions(budget=8_000, reserve=1_000)
    result = Compiler(ExtractiveSummariser()).compile(log, options, request_format="openai")
    messages = result.request["messages"]
    for index, message in enumerate(messages[:-1]):
        if message["role"] == "user" and message["content"].startswith(RECALL):
            # A recall answer stands alone, and the user speaks after it.
            assert messages[index + 1]["role"] == "assistant"
            assert "tool_calls" not in messages[index + 1]
            if index + 2 < len(messages):
                assert messages[index + 2]["role"] == "user"
    anthropic = render_anthropic(log, result.frontier, options.largest_message)
    separators = sum(m["content"] == SEPARATOR for m in messages)
    assert separators == sum(
        m["content"][0].get("text") == SEPARATOR for m in anthropic["messages"]
    )


# Tool calls and results.


@pytest.mark.parametrize("one_record_each", [False, True], ids=["together", "one record each"])
def test_tool_results_follow_their_call_in_call_order_before_the_users_words(
    one_record_each: bool,
) -> None:
    # The results come back out of order, one an error, with the user's words after: in one
    # record, or (as Claude Code writes parallel calls) one record each.
    after: list[Any] = [
        ToolResultBlock("c", (TextBlock("a.py b.py"),)),
        ToolResultBlock("a", (TextBlock("import b"),)),
        ToolResultBlock("b", (TextBlock("no such file"),), is_error=True),
        TextBlock("and tell me what b does"),
    ]
    users = (
        [msg(2 + n, Role.USER, block, kind=Kind.TOOL_ACTIVITY) for n, block in enumerate(after)]
        if one_record_each
        else [msg(2, Role.USER, *after)]
    )
    log = ContextLog.from_messages(
        [
            msg(0, Role.USER, TextBlock("check three files")),
            msg(
                1,
                Role.ASSISTANT,
                ThinkingBlock("which first?"),
                TextBlock("reading them"),
                ToolUseBlock("a", "Read", {"file_path": "a.py"}),
                ToolUseBlock("b", "Read", {"file_path": "b.py"}),
                ToolUseBlock("c", "Bash", {"command": "ls"}),
            ),
            *users,
            msg(9, Role.ASSISTANT, TextBlock("b is missing")),
        ]
    )
    request = render_openai(log, frontier(len(log), [], len(log)), 1_000, system="Be brief.")
    assert validate_openai(request) == []
    assert request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "check three files"},
        {
            "role": "assistant",
            "content": "reading them",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"file_path":"a.py"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"file_path":"b.py"}'},
                },
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command":"ls"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "import b"},
        {"role": "tool", "tool_call_id": "b", "content": "[error] no such file"},
        {"role": "tool", "tool_call_id": "c", "content": "a.py b.py"},
        {"role": "user", "content": "and tell me what b does"},
        {"role": "assistant", "content": "b is missing"},
    ]
    # The system prompt counts, once.
    without = render_openai(log, frontier(len(log), [], len(log)), 1_000)
    assert request_tokens(request) > request_tokens(without)


def test_unanswered_calls_go_and_an_assistant_with_nothing_left_goes_with_them() -> None:
    log = ContextLog.from_messages(
        [
            msg(0, Role.USER, TextBlock("run it")),
            msg(1, Role.ASSISTANT, ToolUseBlock("lost", "Bash", {"command": "make"})),
            msg(2, Role.ASSISTANT, TextBlock("it built"), ToolUseBlock("x", "Bash", {})),
            msg(3, Role.USER, ToolResultBlock("x", ()), kind=Kind.TOOL_ACTIVITY),
            msg(4, Role.ASSISTANT, TextBlock("done")),
            msg(5, Role.ASSISTANT, TextBlock("anything else?")),
        ]
    )
    request = render_openai(log, frontier(len(log), [], len(log)), 1_000)
    assert validate_openai(request) == []
    assert [c["id"] for m in request["messages"] for c in m.get("tool_calls", [])] == ["x"]
    assert shape(request) == [
        ("user", "run it"),
        ("assistant", "it built"),
        ("tool", "(no output)"),
        ("assistant", "done\n\nanything else?"),  # same roles merged
    ]


def test_a_call_with_no_words_has_null_content_and_images_become_image_parts() -> None:
    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    log = ContextLog.from_messages(
        [
            msg(0, Role.USER, TextBlock("what is on this screen?"), ImageBlock("image/png", png)),
            msg(1, Role.ASSISTANT, ToolUseBlock("s", "Screenshot", {})),
            msg(
                2,
                Role.USER,
                ToolResultBlock("s", (TextBlock("a login form"),)),
                kind=Kind.TOOL_ACTIVITY,
            ),
            msg(3, Role.ASSISTANT, TextBlock("a login form")),
        ]
    )
    request = render_openai(log, frontier(len(log), [], len(log)), 1_000)
    assert validate_openai(request) == []
    first, call = request["messages"][0], request["messages"][1]
    assert first["content"] == [
        {"type": "text", "text": "what is on this screen?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    assert call["content"] is None and call["tool_calls"][0]["function"]["arguments"] == "{}"
    assert request_tokens(request) > 1_600  # the image is priced


def test_a_huge_tool_result_is_cut_with_a_marker_in_its_tool_message(tmp_path: Path) -> None:
    from .conftest import CC

    cc = CC()
    cc.user("dump the log")
    cc.tool_use("t1", "Bash", command="cat huge.log")
    cc.tool_result("t1", "line of output\n" * 40_000)
    cc.assistant("It is long.")
    log = ContextLog.from_messages(read_transcript(str(cc.write(tmp_path / "s.jsonl"))).messages)
    result = Compiler(ExtractiveSummariser()).compile(
        log, CompileOptions(budget=8_000, reserve=1_000), request_format="openai"
    )
    assert validate_openai(result.request) == []
    tool = next(m for m in result.request["messages"] if m["role"] == "tool")
    assert tool["tool_call_id"] == "t1"
    assert "tokens cut by Lamina to fit the budget" in tool["content"]
    assert result.tokens <= 7_000


def test_render_picks_the_renderer_by_name() -> None:
    log = separator_log()
    shown = frontier(len(log), [], len(log))
    assert render("openai", log, shown, 1_000) == render_openai(log, shown, 1_000)
    assert render("anthropic", log, shown, 1_000) == render_anthropic(log, shown, 1_000)


# The validator: each rule can fail.

CALL = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
VALID: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "assistant", "content": "done"},
    {"role": "user", "content": [{"type": "text", "text": "and?"}]},
]


def with_messages(*changes: tuple[int, dict[str, Any] | None]) -> dict[str, Any]:
    """VALID with message i replaced (or removed when None), later indices first."""
    messages = list(VALID)
    for index, message in sorted(changes, key=lambda c: -c[0]):
        if message is None:
            del messages[index]
        else:
            messages[index] = message
    return {"messages": messages}


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ({"messages": []}, "no messages"),
        ({"messages": VALID[:1]}, "no messages beyond the system prompt"),
        (with_messages((1, None)), "the first message is not the user's"),
        (with_messages((3, None)), "call c1 not answered before it"),
        ({"messages": VALID[:3]}, "call c1 is never answered"),
        (
            {"messages": [*VALID[:4], VALID[3], *VALID[4:]]},
            "call 'c1' answered twice",
        ),
        (
            with_messages((3, {"role": "tool", "tool_call_id": "c9", "content": "ok"})),
            "tool message 'c9' answers no open call",
        ),
        (
            {"messages": [*VALID, {"role": "tool", "tool_call_id": "c1", "content": "again"}]},
            "tool message 'c1' answers no open call",
        ),
        (
            {"messages": [*VALID[:2], {"role": "assistant", "content": "hm"}, *VALID[2:]]},
            "two assistant messages in a row",
        ),
        ({"messages": [*VALID, {"role": "user", "content": "hello?"}]}, "two user messages"),
        (with_messages((4, {"role": "assistant", "content": " "})), "empty content"),
        (with_messages((4, {"role": "assistant", "content": None})), "empty content"),
        (with_messages((3, {"role": "tool", "tool_call_id": "c1", "content": ""})), "empty"),
        (
            with_messages((5, {"role": "user", "content": [{"type": "text", "text": ""}]})),
            "empty text part",
        ),
        (
            with_messages(
                (1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]})
            ),
            "a 'tool_result' part",
        ),
        (
            with_messages(
                (
                    5,
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
                        ],
                    },
                )
            ),
            "cache_control is not OpenAI's",
        ),
        (
            with_messages(
                (
                    2,
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {**CALL, "function": {"name": "Read", "arguments": "{oops"}}
                        ],
                    },
                )
            ),
            "arguments are not a JSON object",
        ),
        (
            with_messages(
                (
                    2,
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{**CALL, "type": "code"}],
                    },
                )
            ),
            "of a type other than function",
        ),
        (
            with_messages((2, {"role": "assistant", "content": None, "tool_calls": [CALL, CALL]})),
            "call id 'c1' used twice",
        ),
        ({"messages": [*VALID, {"role": "system", "content": "late"}]}, "after the conversation"),
        (with_messages((4, {"role": "model", "content": "done"})), "role 'model'"),
    ],
)
def test_the_openai_validator_catches_each_broken_rule(
    request_: dict[str, Any], problem: str
) -> None:
    assert validate_openai({"messages": VALID}) == []
    problems = validate_openai(request_)
    assert any(problem in p for p in problems), problems


# The command line.


def test_compile_command_prints_one_openai_json_document() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--budget", "8000",
         "--to", "openai", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"request", "report"}
    assert validate_openai(data["request"]) == []
    assert validate_anthropic(data["request"]) != []  # really the OpenAI shape
    assert any(m["role"] == "tool" for m in data["request"]["messages"])
    assert data["report"]["tokens"] == request_tokens(data["request"]) <= 7_000
    assert data["report"]["summaries_by_level"]


def test_compile_command_refuses_an_unknown_format() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "compile", str(EXAMPLE), "--to", "gemini"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "'gemini' is not one of 'anthropic', 'openai'" in out.stderr
