"""Readers of Codex CLI rollouts, Gemini CLI chats and Copilot CLI events, on the real sample
files in ../shared/data (codex/, gemini/, copilot/, agent-clis-generated/)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from lamina.errors import ReadError, ReadWarning
from lamina.messages import Kind, Role, TextBlock, ToolResultBlock, ToolUseBlock, UnknownBlock
from lamina.readers import detect_format, read_transcript, registered_readers
from lamina.readers.base import read_head
from lamina.turns import conversational_text, iter_turns

from .conftest import CLAUDE_CODE, LOCOMO, SHARED

GENERATED = SHARED / "agent-clis-generated"
CODEX_171 = GENERATED / "codex-0.171.0"

# Expected turns per file, counted by hand against each file:
# - Codex: the prompts typed are the `event_msg` `user_message` events (0.39 to 0.142) or the
#   `item_completed` items of type UserMessage (0.171); every other user-role response item is
#   `<environment_context>`, AGENTS.md or IDE context. The 0.171 resume file holds "step3: list
#   the files" and "step4: after resume"; the copy of step3 in the `compacted` record's
#   replacement_history is not a new turn.
# - Gemini: the `type: "user"` records, less the `/init` expansion (displayContent "/init"), the
#   CLI's "System: Please continue." (displayContent a functionResponse), the older
#   "[Function Response: read_many_files]" record and tool-response records; in the JSONL form
#   each message id counted once, `$set` checkpoints not at all (the generated file's
#   `<session_context>` lives only in `$set`). The generated file: "step2: list the files" and
#   "step3: after resume", each behind a `<hook_context>` prefix.
# - Copilot: the `user.message` events with non-empty `content`. The real file has two
#   user.message events (SOURCES.md counts 2 prompts), but the second has empty content: its
#   transformedContent is autopilot's "You have not yet marked the task as complete" nudge,
#   which the person did not type.
SAMPLES: list[tuple[str, str, int, str]] = [
    ("codex/acidicsoil__rollout-2025-11-17T15-30-28-019a93b9.jsonl", "codex", 1,
     "finish up the users work by rigging up the chatbot-ui to use lmstudio"),
    ("codex/cryptosodi__battle-cities__codex-session.jsonl", "codex", 1,
     "help me apply for the agentic engineering grant by Superteam"),
    ("codex/kunalcode12__empire-of-bits__codex-session.jsonl", "codex", 1,
     "help me apply for the agentic engineering grant by Superteam"),
    ("codex/mai0313__rollout-2025-09-19-01996135_vscode.jsonl", "codex", 1,
     "幫我檢查一下 go.mod 裡面 為何 go版本是 1.24?"),
    ("agent-clis-generated/codex-0.171.0/"
     "rollout-2026-12-04T17-36-42-01a24221-3646-7513-861c-d6103e52f97b.jsonl", "codex", 1,
     "step1: hello"),
    ("agent-clis-generated/codex-0.171.0/"
     "rollout-2026-12-04T17-36-43-01a24221-38b7-7202-868e-0659a70eb601.jsonl", "codex", 2,
     "step3: list the files"),
    ("gemini/mai0313__session-0ab84937_2026-04-23.jsonl", "gemini", 1,
     "幫我做一個小修改 請幫我將上面確保執行時要透過 uv run 來執行 避免環境有問題"),
    ("gemini/mai0313__session-2d9ea14f_2025-10-11.json", "gemini", 1,
     '## 任務\uff1a將專案描述中的 "Vibe Coding Tracker"'),
    ("gemini/mai0313__session-8a20078e_2026-03-27.json", "gemini", 1,
     "請幫我依照專案實際狀況更新 README.md"),
    ("gemini/mai0313__session-d6f69999_2025-10-11.json", "gemini", 1,
     "專案經過了多輪跌代"),
    ("gemini/mai0313__session-eefc44a3_2025-10-05.json", "gemini", 1,
     "請幫我檢查一下所有代碼是否足夠簡潔"),
    ("agent-clis-generated/gemini-0.61.0/session-2026-12-04T17-36-b9dd6746.jsonl", "gemini", 2,
     "step2: list the files"),
    ("copilot/mai0313__copilot-96ef38f0_2026-04-23.jsonl", "copilot", 1,
     "請不要修改任何代碼 我希望你幫我調查一下"),
    ("agent-clis-generated/copilot-1.0.102/events.jsonl", "copilot", 1, "Say hello (copilot)"),
]  # fmt: skip

needs_agent_data = pytest.mark.skipif(
    not (SHARED / "codex").is_dir() or not GENERATED.is_dir(),
    reason="../shared/data/{codex,gemini,copilot,agent-clis-generated} are not beside the checkout",
)
pytestmark = needs_agent_data

INJECTED_MARKS = (
    "<environment_context>",
    "AGENTS.md instructions",
    "<user_instructions>",
    "<hook_context>",
    "LAMINA-MARKER",
    "# Context from my IDE setup",
    "<session_context>",
    "<current_datetime>",
    "You are an AI agent that brings the power of Gemini",
    "System: Please continue.",
    "[Function Response:",
)


@pytest.mark.parametrize(("name", "fmt", "turns", "first"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_reads_with_its_turns_and_no_warning(
    name: str, fmt: str, turns: int, first: str
) -> None:
    path = str(SHARED / name)
    transcript = read_transcript(path)
    assert transcript.format == fmt
    assert transcript.warnings == []
    found = list(iter_turns(transcript.messages))
    assert len(found) == turns, [t.text[:60] for t in found]
    assert found[0].text.startswith(first)
    for message in transcript.messages:
        if message.role is Role.USER:
            said = conversational_text(message)
            assert not any(mark in said for mark in INJECTED_MARKS), (message.id, said[:200])
        if message.role is not Role.SYSTEM and message.records:
            assert message.source.line is not None and message.timestamp is not None, message.id
        assert message.session_id is not None


def _all_samples() -> list[tuple[Path, str]]:
    out = [(SHARED / name, fmt) for name, fmt, _, _ in SAMPLES]
    out += [(path, "claude-code") for path in sorted(CLAUDE_CODE.glob("*.jsonl"))]
    if LOCOMO.exists():
        out.append((LOCOMO, "locomo"))
    return out


def test_every_sample_is_claimed_by_exactly_its_own_reader() -> None:
    readers = registered_readers()
    assert {"codex", "gemini", "copilot", "claude-code"} <= set(readers)
    samples = _all_samples()
    assert len(samples) > len(SAMPLES)  # the Claude Code files are there too
    for path, fmt in samples:
        head = read_head(str(path))
        claims = {name for name, r in readers.items() if r.sniff(head, str(path)) > 0}
        assert claims == {fmt}, (path.name, claims)
        assert detect_format(str(path)).name == fmt


def test_codex_tool_calls_pair_with_their_outputs_and_failures_are_errors() -> None:
    transcript = read_transcript(str(SHARED / SAMPLES[1][0]))  # cryptosodi, 13 calls, 8 outputs
    uses = [b for m in transcript.messages for b in m.blocks if isinstance(b, ToolUseBlock)]
    results = {
        b.tool_use_id: b
        for m in transcript.messages
        for b in m.blocks
        if isinstance(b, ToolResultBlock)
    }
    assert len(uses) == 13 and len(results) == 8
    assert uses[0].name == "shell_command" and "Get-Content" in uses[0].input["command"]
    assert results[uses[0].id].is_error  # "execution error: ... CreateProcessAsUserW failed"
    assert not results["call_48TnaX1pYFOnEqp4ivc9TBcV"].is_error  # "Exit code: 0"
    assert results["call_lkVdWpjiHWAJ91t8HvQMNCyR"].is_error  # "Exit code: 1"


def test_codex_039_outputs_are_unwrapped_and_ide_context_is_not_the_prompt() -> None:
    transcript = read_transcript(str(SHARED / SAMPLES[3][0]))
    prompt = next(m for m in transcript.messages if m.kind is Kind.PROMPT)
    assert not conversational_text(prompt).startswith("#")
    ide = [b for b in prompt.blocks if isinstance(b, UnknownBlock)]
    assert ide and ide[0].data["source"] == "ide_context"
    result = next(
        b for m in transcript.messages for b in m.blocks if isinstance(b, ToolResultBlock)
    )
    assert result.text == "Plan updated"
    outputs = [b for m in transcript.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert any(b.text.startswith("total 124") for b in outputs)  # {"output": ...} unwrapped


def test_codex_compaction_is_a_summary_and_its_history_no_new_turn() -> None:
    path = str(SHARED / SAMPLES[5][0])
    transcript = read_transcript(path)
    summaries = [m for m in transcript.messages if m.kind is Kind.COMPACT_SUMMARY]
    compacted = [m for m in summaries if m.record_type == "compacted"]
    assert len(compacted) == 1 and compacted[0].text.startswith("Another language model")
    assert compacted[0].source.line == 28
    hook = [m for m in transcript.messages if "LAMINA-MARKER" in m.text]
    assert hook and all(m.kind is Kind.INSTRUCTIONS for m in hook)  # developer messages
    ids = [m.id for m in transcript.messages]
    assert len(ids) == len(set(ids))


def test_gemini_last_copy_wins_at_the_place_of_the_first() -> None:
    transcript = read_transcript(str(SHARED / SAMPLES[6][0]))
    copies = [m for m in transcript.messages if m.id == "52e62e67-5d6b-4a2c-b12d-11b87fe3e4a4"]
    assert len(copies) == 1
    message = copies[0]
    assert (message.source.line, message.source.end_line) == (6, 8)
    assert [b.name for b in message.tool_uses] == ["update_topic"] + ["read_file"] * 4
    after = transcript.messages[transcript.messages.index(message) + 1]
    assert after.role is Role.USER and len(after.tool_results) == 5
    assert {r.tool_use_id for r in after.tool_results} == {b.id for b in message.tool_uses}


def test_gemini_hook_context_and_set_checkpoints_are_not_words() -> None:
    path = str(SHARED / SAMPLES[11][0])
    transcript = read_transcript(path)
    assert not any("<session_context>" in json.dumps(m.records) for m in transcript.messages)
    prompt = next(m for m in transcript.messages if m.kind is Kind.PROMPT)
    assert conversational_text(prompt) == "step2: list the files"
    sources = [b.data["source"] for b in prompt.blocks if isinstance(b, UnknownBlock)]
    assert sources == ["hook_context", "hook_context"]
    # The tool result came with its call; the user record repeating it is not a second result.
    results = [b for m in transcript.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert len(results) == 1 and "README.md" in results[0].text


def test_copilot_typed_words_are_content_not_the_transformed_prompt() -> None:
    transcript = read_transcript(str(SHARED / SAMPLES[13][0]))
    prompt = next(m for m in transcript.messages if m.kind is Kind.PROMPT)
    assert prompt.text == "Say hello (copilot)"
    context = [b.data["text"] for b in prompt.blocks if isinstance(b, UnknownBlock)]
    assert "<system_reminder>" in context[0]
    real = read_transcript(str(SHARED / SAMPLES[12][0]))
    uses = [b for m in real.messages for b in m.blocks if isinstance(b, ToolUseBlock)]
    results = [b for m in real.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert len(uses) == len(results) == 11  # 4 + 3 + 2 + 1 + 1 toolRequests
    assert {b.tool_use_id for b in results} == {b.id for b in uses}


@pytest.mark.parametrize(
    ("name", "agent", "session", "version"),
    [
        (SAMPLES[1][0], "codex", "019f15de-d815-7440-a6de-8068ba05b6b5", "0.142.4"),
        (SAMPLES[6][0], "gemini", "0ab84937-9fe7-4284-986a-33c832af0b6a", None),
        (SAMPLES[10][0], "gemini", "eefc44a3-0832-4bc0-ac33-fa668f038213", None),
        (SAMPLES[12][0], "copilot", "96ef38f0-9d09-45c3-8124-6448c36090ed", "1.0.34"),
    ],
)
def test_readers_say_which_agent_and_session(
    name: str, agent: str, session: str, version: str | None
) -> None:
    reader = detect_format(str(SHARED / name))
    meta = reader.document_metadata(str(SHARED / name))  # type: ignore[attr-defined]
    assert meta["agent"] == agent and meta["session_id"] == session
    assert meta.get("agent_version") == version


# -- damaged input --------------------------------------------------------------------------
CODEX_LINES = [
    {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
     "payload": {"id": "s-1", "cwd": "/w", "cli_version": "0.99.0"}},
    {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
     "payload": {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "the port is 8040"}]}},
    {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item",
     "payload": {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Noted."}]}},
]  # fmt: skip
COPILOT_LINES = [
    {"type": "session.start", "data": {"sessionId": "s-2"}, "id": "e1",
     "timestamp": "2026-01-01T00:00:00Z", "parentId": None},
    {"type": "user.message", "data": {"content": "the port is 8040"}, "id": "e2",
     "timestamp": "2026-01-01T00:00:01Z", "parentId": "e1"},
    {"type": "assistant.message", "data": {"content": "Noted.", "toolRequests": []}, "id": "e3",
     "timestamp": "2026-01-01T00:00:02Z", "parentId": "e2"},
]  # fmt: skip
GEMINI_LINES = [
    {"sessionId": "s-3", "projectHash": "ab" * 32, "startTime": "2026-01-01T00:00:00Z"},
    {"id": "m1", "timestamp": "2026-01-01T00:00:01Z", "type": "user",
     "content": [{"text": "the port is 8040"}]},
    {"id": "m2", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "content": "Noted."},
]  # fmt: skip
DAMAGE = [
    b"{not json\n",
    b"\xff\xfe broken utf-8\n",
    b"[1, 2, 3]\n",
    b'{"type": 7}\n',
    b'{"timestamp": "x", "type": "response_item", "payload": "not an object"}\n',
    b'{"type": "user.message", "data": [], "id": "e9", "parentId": null}\n',
    b'{"id": "m9", "type": "user", "content": [{"functionResponse": "odd"}, 5, {"x": 1}]}\n',
    b'{"id": "m8", "type": "gemini", "content": [], "toolCalls": [7, {"name": 3}]}\n',
]


@pytest.mark.parametrize(
    ("fmt", "lines"), [("codex", CODEX_LINES), ("gemini", GEMINI_LINES), ("copilot", COPILOT_LINES)]
)
def test_damaged_lines_give_warnings_not_tracebacks(
    tmp_path: Path, fmt: str, lines: list[Mapping[str, object]]
) -> None:
    good = b"".join(json.dumps(v).encode() + b"\n" for v in lines)
    path = tmp_path / f"{fmt}.jsonl"
    cut = good.index(b"\n") + 1
    path.write_bytes(good[:cut] + b"".join(DAMAGE) + good[cut:] + b'{"truncated": ')
    assert detect_format(str(path)).name == fmt
    warnings: list[ReadWarning] = []
    transcript = read_transcript(str(path), on_warning=warnings.append)
    assert warnings and all(w.line is not None for w in warnings)
    assert any("incomplete last line" in w.reason for w in warnings)
    found = list(iter_turns(transcript.messages))
    assert [t.text for t in found] == ["the port is 8040"]


def test_a_truncated_single_json_gemini_chat_is_one_clear_error(tmp_path: Path) -> None:
    source = SHARED / SAMPLES[10][0]
    path = tmp_path / "chat.json"
    path.write_bytes(source.read_bytes()[:3000])
    assert detect_format(str(path)).name == "gemini"
    with pytest.raises(ReadError, match="invalid JSON"):
        read_transcript(str(path))


def test_unknown_codex_line_types_warn_once_and_are_kept(tmp_path: Path) -> None:
    lines = [*CODEX_LINES, *[{"timestamp": "t", "type": "brand_new", "payload": {}}] * 3]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines))
    transcript = read_transcript(str(path))
    assert len(transcript.warnings) == 1 and "brand_new" in transcript.warnings[0].reason
    assert sum(m.kind is Kind.UNKNOWN for m in transcript.messages) == 3
    assert all(isinstance(b, TextBlock) for m in transcript.messages for b in m.blocks)


@pytest.mark.skipif(not (SHARED / "codex").is_dir(), reason="../shared/data/codex absent")
def test_codex_shell_calls_are_remembered_by_their_command() -> None:
    # Codex gives a shell call's command as an argument list (`["bash", "-lc", "ls"]`); the
    # activity a question finds names the command itself, not just the tool.
    from lamina.text.units import UnitOptions, build_units

    path = SHARED / "codex" / "acidicsoil__rollout-2025-11-17T15-30-28-019a93b9.jsonl"
    units, _segments = build_units(read_transcript(str(path)).messages, UnitOptions())
    text = "\n".join(u.text for u in units)
    assert "cat 'LM Studio configuration.md'" in text
    assert '["bash"' not in text and "-lc" not in text


@pytest.mark.skipif(not (SHARED / "codex").is_dir(), reason="../shared/data/codex absent")
def test_what_a_codex_session_said_while_paused_is_never_retained(tmp_path: Path) -> None:
    # A rollout is read whole at every retain: the stretch said while memory was paused is
    # noted at the pause, and a retain after `lamina resume` still leaves it out.
    from lamina.bank.bank import MemoryBank
    from lamina.embed import HashEmbedder
    from lamina.store.sqlite import SQLiteStore
    from lamina.turns import conversational_text

    source = SHARED / "codex" / "kunalcode12__empire-of-bits__codex-session.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    rollout = tmp_path / "rollout-2026-01-01T00-00-00-session.jsonl"
    half = len(lines) // 2
    rollout.write_bytes(b"".join(lines[:half]))
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), HashEmbedder())
    before = len(read_transcript(str(rollout)).messages)
    bank.retain_file(rollout, "p", document="s", format="codex")
    rollout.write_bytes(b"".join(lines))  # said while paused
    assert bank.skip_file(rollout, "p", "s", "codex").status == "skipped"
    paused = read_transcript(str(rollout)).messages[before:]
    said = [t for m in paused if len(t := conversational_text(m).strip()) >= 40]
    assert said, "the paused stretch says something"
    bank.retain_file(rollout, "p", document="s", format="codex")  # after resume
    kept = "\n".join(m.text for m in bank.memories("p"))
    assert not [t for t in said if t[:40] in kept]
    bank.close()
