"""The system prompt survives every compile path: kept, counted in the budget, and placed where
each provider expects it (Anthropic's `system` field with a breakpoint, OpenAI's leading
`system` message)."""

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
    request_tokens,
    validate_anthropic,
    validate_openai,
)
from lamina.context.logs import read_message_list
from lamina.readers import read_transcript
from lamina.store import open_store

SYSTEM = "You are Spotter, a careful code reviewer. Answer in British English."


def chat(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(turns):
        out.append({"role": "user", "content": f"question {n} " + "about caching " * 25})
        out.append({"role": "assistant", "content": f"answer {n} " + "cache it " * 40})
    return out


def openai_file(tmp_path: Path, turns: int = 30, system: str = SYSTEM) -> Path:
    path = tmp_path / "openai.json"
    path.write_text(json.dumps([{"role": "system", "content": system}, *chat(turns)]))
    return path


def anthropic_file(tmp_path: Path, turns: int = 30, system: str = SYSTEM) -> Path:
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps({"system": system, "messages": chat(turns)}))
    return path


def assert_system_kept(request: dict[str, Any], request_format: str, system: str) -> None:
    if request_format == "anthropic":
        assert validate_anthropic(request) == []
        assert request["system"] == [
            {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        ]
    else:
        assert validate_openai(request) == []
        assert request["messages"][0] == {"role": "system", "content": system}
        assert all(m["role"] != "system" for m in request["messages"][1:])


@pytest.mark.parametrize("request_format", ["anthropic", "openai"])
@pytest.mark.parametrize("source", [openai_file, anthropic_file], ids=["openai", "anthropic"])
def test_the_system_prompt_is_kept_in_both_formats(
    tmp_path: Path, source: Any, request_format: str
) -> None:
    log = ContextLog.from_messages(read_transcript(str(source(tmp_path))).messages)
    assert log.system == SYSTEM
    assert len(log) == 60  # not a log position: message numbers stay as they were
    options = CompileOptions(budget=4_000, reserve=500)
    result = Compiler(ExtractiveSummariser()).compile(log, options, request_format)  # type: ignore[arg-type]
    assert_system_kept(result.request, request_format, SYSTEM)
    assert result.report["summaries_by_level"], "the budget folds the conversation"
    assert result.report["system"]["tokens"] > 0
    assert result.tokens == request_tokens(result.request) <= options.available


@pytest.mark.parametrize("request_format", ["anthropic", "openai"])
def test_a_large_system_prompt_is_counted_in_the_budget(
    tmp_path: Path, request_format: str
) -> None:
    large = "Follow the house rules. " * 300  # about 1,500 tokens
    log = ContextLog.from_messages(
        read_transcript(str(openai_file(tmp_path, system=large))).messages
    )
    options = CompileOptions(budget=4_000, reserve=500)
    without = ContextLog.from_messages(m for m in log.messages)
    plain = Compiler(ExtractiveSummariser()).compile(without, options, request_format)  # type: ignore[arg-type]
    result = Compiler(ExtractiveSummariser()).compile(log, options, request_format)  # type: ignore[arg-type]
    assert_system_kept(result.request, request_format, large.strip())
    assert result.tokens == request_tokens(result.request) <= options.available
    # The frontier is planned with the prompt's tokens in it.
    assert result.frontier.tokens >= plain.frontier.tokens + result.report["system"]["tokens"]
    assert result.report["system"]["tokens"] > 1_000
    with pytest.raises(OverBudgetError, match="the system prompt, the head"):
        huge = ContextLog.from_messages(
            read_transcript(str(openai_file(tmp_path, system=large * 4))).messages
        )
        Compiler(ExtractiveSummariser()).compile(huge, options, request_format)  # type: ignore[arg-type]


def test_several_system_messages_are_joined_in_order_each_text_once() -> None:
    first = {"role": "system", "content": "Rules:\n\nbe brief."}
    second = {"role": "developer", "content": "Use British English."}
    messages = read_message_list([first, *chat(1), second, first])
    log = ContextLog.from_messages(messages)
    assert log.system == "Rules:\n\nbe brief.\n\nUse British English." and len(log) == 2


def test_messages_sent_over_the_wire_keep_their_system_prompt() -> None:
    # What the HTTP API and the MCP server read a message list with.
    anthropic = read_message_list([{"role": "system", "content": SYSTEM}, *chat(2)])
    assert ContextLog.from_messages(anthropic).system == SYSTEM


def test_a_stored_log_keeps_its_system_prompt_across_processes(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "db" / "lamina.db"))
    try:
        messages = read_transcript(str(openai_file(tmp_path))).messages
        stored = StoredLog.open(store, "b", "s", ExtractiveSummariser())
        stored.append(messages[:11])
        again = StoredLog.open(store, "b", "s", ExtractiveSummariser())
        assert again.log.system == SYSTEM and len(again.log) == 10
        again.append(messages[11:])  # no system message: the stored one stays
        result = again.compile(CompileOptions(budget=4_000, reserve=500), "openai")
        assert_system_kept(result.request, "openai", SYSTEM)
        reopened = StoredLog.open(store, "b", "s", ExtractiveSummariser())
        assert reopened.log.system == SYSTEM
        assert reopened.compiler.previous is not None  # the frontier was read back too
        reopened.append(read_message_list([{"role": "system", "content": "Be brief."}]))
        result = reopened.compile(CompileOptions(budget=4_000, reserve=500))
        assert_system_kept(result.request, "anthropic", "Be brief.")
        assert StoredLog.open(store, "b", "s", ExtractiveSummariser()).log.system == "Be brief."
    finally:
        store.close()


def test_the_compile_command_keeps_the_system_prompt(tmp_path: Path) -> None:
    env = {**os.environ, "LAMINA_HOME": str(tmp_path / "home")}
    env.pop("LAMINA_DATABASE_URL", None)
    path = anthropic_file(tmp_path)
    for extra in ([], ["--bank", "b"]):
        for request_format in ("anthropic", "openai"):
            out = subprocess.run(
                [sys.executable, "-m", "lamina", "compile", str(path), "--budget", "4000",
                 "--format", request_format, "--json", *extra],
                capture_output=True, text=True, env=env, timeout=120,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert_system_kept(json.loads(out.stdout)["request"], request_format, SYSTEM)
