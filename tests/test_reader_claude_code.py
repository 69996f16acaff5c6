"""The Claude Code reader on real sessions and on damaged input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina import Kind, ReadWarning, Role, UnknownFormatError, detect_format, read_transcript
from lamina.errors import ReadError
from lamina.messages import ThinkingBlock, ToolUseBlock, UnknownBlock
from lamina.readers.claude_code import read_claude_code, read_session, read_tail

from .conftest import CC, CLAUDE_CODE, needs_shared, shared_transcripts


def raw_type_counts(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                counts[json.loads(line).get("type")] += 1
    return counts


@needs_shared
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
def test_every_shared_record_is_read_once(path: Path) -> None:
    transcript = read_transcript(str(path))
    assert transcript.format == "claude-code"
    assert transcript.warnings == []
    by_type: Counter[str] = Counter()
    for message in transcript.messages:
        by_type[message.record_type] += len(message.records)
    assert by_type == raw_type_counts(path)
    lines = sorted(
        r_line
        for m in transcript.messages
        for r_line in range(m.source.line or 0, (m.source.end_line or 0) + 1)
        if len(m.records) == 1
    )
    assert len(lines) == len(set(lines))
    ids = [m.id for m in transcript.messages]
    assert len(ids) == len(set(ids))


@needs_shared
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
def test_lines_of_one_api_response_become_one_message(path: Path) -> None:
    messages = read_transcript(str(path)).messages
    api_ids = Counter()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record.get("type") == "assistant":
                api_ids[record["message"]["id"]] += 1
    assistants = [m for m in messages if m.record_type == "assistant"]
    assert sorted(m.id for m in assistants) == sorted(api_ids)
    for message in assistants:
        assert len(message.records) == api_ids[message.id]
        assert message.source.line is not None and message.source.end_line is not None
    # Every tool call is followed (later in the stream) by its result.
    position = {}
    for i, message in enumerate(messages):
        for block in message.tool_results:
            position.setdefault(block.tool_use_id, i)
    for i, message in enumerate(messages):
        for use in message.tool_uses:
            if use.id in position:
                assert position[use.id] > i


@needs_shared
def test_interleaved_response_lines_merge_and_results_follow() -> None:
    messages = read_transcript(str(CLAUDE_CODE / "spotter-258c7280.jsonl")).messages
    merged = next(m for m in messages if m.id == "msg_01GGLGCJ9sN12iKQZvVorFAw")
    assert len(merged.records) == 10
    uses = [b.id for b in merged.tool_uses]
    at = messages.index(merged)
    following = [b.tool_use_id for m in messages[at + 1 : at + 40] for b in m.tool_results]
    assert following[: len(uses)] == uses


@needs_shared
def test_flags_and_kinds_of_real_records() -> None:
    spotter = read_transcript(str(CLAUDE_CODE / "spotter-258c7280.jsonl")).messages
    summary = [m for m in spotter if m.is_compact_summary]
    assert len(summary) == 1 and summary[0].kind is Kind.COMPACT_SUMMARY
    boundary = [m for m in spotter if m.subtype == "compact_boundary"]
    assert len(boundary) == 1 and boundary[0].kind is Kind.SYSTEM_NOTICE
    assert any(m.tool_use_result for m in spotter if m.role is Role.USER)
    obra = read_transcript(str(CLAUDE_CODE / "obra-long-conversation.jsonl")).messages
    assert sum(1 for m in obra if m.subtype == "api_error") == 5
    assert any(isinstance(b, ThinkingBlock) for m in obra for b in m.blocks)
    pdf = next(m for m in obra if m.is_meta)
    assert isinstance(pdf.blocks[0], UnknownBlock) and pdf.blocks[0].type == "document"
    ccviewer = read_transcript(str(CLAUDE_CODE / "ccviewer-fe5e1c67.jsonl")).messages
    assert ccviewer[0].kind is Kind.TITLE
    side = [m for m in ccviewer if m.kind is Kind.SIDECHAIN]
    assert len(side) > 100 and all(m.is_sidechain for m in side)


@needs_shared
def test_subagent_files_read_alone_and_linked_to_their_parent() -> None:
    alone = read_transcript(str(CLAUDE_CODE / "spotter-258c7280.subagent-a881341.jsonl"))
    prompts = [m for m in alone.messages if m.kind is Kind.PROMPT]
    assert len(prompts) == 1 and prompts[0].is_sidechain and prompts[0].agent_id == "a881341"
    warnings: list[ReadWarning] = []
    session = read_session(str(CLAUDE_CODE / "spotter-258c7280.jsonl"), warnings.append)
    by_agent = {s.agent_id: s for s in session.subagents}
    assert set(by_agent) == {"a881341", "acompact-fffbd0"}
    task = by_agent["a881341"]
    assert task.parent_tool_use_id == "toolu_01VmaERAwhb19LGUwu9GenaK"
    parent_call = [
        b for m in session.messages for b in m.tool_uses if b.id == task.parent_tool_use_id
    ]
    assert parent_call and parent_call[0].name == "Task"
    assert by_agent["acompact-fffbd0"].parent_tool_use_id is None
    assert warnings == []


def test_broken_lines_warn_with_file_and_line_and_reading_goes_on(cc: CC, write_jsonl: Any) -> None:
    cc.user("first")
    cc.assistant("reply one")
    cc.user("second")
    lines: list[Any] = cc.lines()
    lines.insert(1, '{"type": "user", "message": {"role": "user", "content": "cut')
    lines.insert(2, b'{"type": "user", "message": {"content": "caf\xe9"}}')
    lines.insert(3, "[1, 2, 3]")
    lines.insert(4, '{"type": "hologram", "uuid": "h1"}')
    lines.insert(5, '{"type": "user", "message": "not an object"}')
    lines.insert(6, '{"no_type": true}')
    path = write_jsonl("broken.jsonl", lines)
    transcript = read_transcript(str(path))
    reasons = {w.line: w.reason for w in transcript.warnings}
    assert all(w.path == str(path) for w in transcript.warnings)
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3].startswith("invalid UTF-8")
    assert reasons[4] == "not a JSON object; line skipped"
    assert "unknown record type 'hologram'" in reasons[5]
    assert "without a message object" in reasons[6]
    assert "record without a type" in reasons[7]
    texts = [m.text for m in transcript.messages if m.kind in (Kind.PROMPT, Kind.REPLY)]
    assert texts == ["first", "reply one", "second"]
    unknown = [m for m in transcript.messages if m.kind is Kind.UNKNOWN]
    assert len(unknown) == 3  # kept, never dropped


def test_incomplete_last_line_is_reported_as_still_being_written(cc: CC, write_jsonl: Any) -> None:
    cc.user("hello")
    lines = [*cc.lines(), '{"type": "assistant", "message": {"id": "m9", "content": [{"ty']
    path = write_jsonl("growing.jsonl", lines, newline_at_end=False)
    transcript = read_transcript(str(path))
    assert [w.reason for w in transcript.warnings] == [
        "incomplete last line (no newline; still being written?)"
    ]
    assert transcript.messages[-1].text == "hello"
    assert transcript.messages[-1].source.end_offset == len(cc.lines()[0]) + 1


def test_huge_tool_output_and_unknown_blocks_are_kept(cc: CC, write_jsonl: Any) -> None:
    big = "x" * 5_000_000
    cc.user("dump it")
    cc.tool_use("t1", "Bash", command="cat big.log")
    cc.tool_result("t1", big)
    cc.assistant([{"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}])
    messages = read_transcript(str(write_jsonl("big.jsonl", cc.lines()))).messages
    assert messages[2].tool_results[0].text == big
    assert isinstance(messages[3].blocks[0], UnknownBlock)
    assert messages[3].blocks[0].data["name"] == "web_search"


def test_unreadable_sources_raise_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReadError, match="no such file"):
        read_transcript(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ReadError, match="is a directory"):
        read_transcript(str(tmp_path))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(UnknownFormatError, match="empty"):
        detect_format(str(empty))
    binary = tmp_path / "photo.jsonl"
    binary.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(UnknownFormatError, match="binary"):
        detect_format(str(binary))


@needs_shared
@pytest.mark.parametrize("window", [2_000, 50_000, 10**9])
def test_tail_window_reads_the_same_messages_as_the_whole_file(window: int) -> None:
    path = str(CLAUDE_CODE / "spotter-8463c716.jsonl")
    whole = read_transcript(path).messages
    tail, complete = read_tail(path, window, lambda _w: None)
    assert complete == (window >= Path(path).stat().st_size)
    # Past the first (possibly partial) message, the window agrees with a full read.
    inner = tail[1:]
    assert inner
    expected = {m.id: m for m in whole}
    for message in inner:
        full = expected[message.id]
        assert message.blocks == full.blocks and message.kind is full.kind


def test_streaming_reader_yields_before_reaching_the_end(cc: CC, write_jsonl: Any) -> None:
    for n in range(50):
        cc.user(f"prompt {n}")
        cc.assistant(f"reply {n}")
    path = write_jsonl("s.jsonl", cc.lines())
    stream = read_claude_code(str(path), lambda _w: None)
    first = next(stream)
    assert first.text == "prompt 0" and first.source.line == 1
    assert first.source.offset == 0


record_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "message",
                    "content",
                    "role",
                    "id",
                    "uuid",
                    "text",
                    "isMeta",
                    "timestamp",
                    "tool_use_id",
                    "input",
                    "name",
                    "isSidechain",
                    "toolUseResult",
                    "subtype",
                    "source",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=6,
        )
    ),
    max_leaves=25,
)
record_types = st.sampled_from(
    ["user", "assistant", "system", "summary", "progress", "file-history-snapshot", "zzz", 7]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.tuples(record_types, record_values, record_values), min_size=1, max_size=8),
    junk=st.lists(st.binary(max_size=40), max_size=3),
)
def test_no_input_line_crashes_the_reader(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[Any, Any, Any]],
    junk: list[bytes],
) -> None:
    lines: list[bytes] = []
    for rtype, message, extra in records:
        record: dict[str, Any] = {"type": rtype, "message": message, "uuid": "u", "sessionId": "s"}
        if isinstance(extra, dict):
            record.update(extra)
        lines.append(json.dumps(record).encode())
    lines.extend(j.replace(b"\n", b" ") for j in junk)
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    warnings: list[ReadWarning] = []
    messages = list(read_claude_code(str(path), warnings.append))
    # Every line is accounted for: read into a message, or named in a warning.
    nonblank = [ln for ln in lines if ln.strip()]
    assert sum(len(m.records) for m in messages) + len(warnings) >= len(nonblank)
    for message in messages:
        assert isinstance(message.role, Role) and isinstance(message.kind, Kind)
        assert all(not isinstance(b, ToolUseBlock) or isinstance(b.id, str) for b in message.blocks)


@needs_shared
def test_a_compaction_agent_transcript_holds_a_summary_and_starts_no_turn() -> None:
    """Claude Code runs compaction as a subagent (`acompact-...`): its request for a summary
    is the host's, and its answer restates the conversation."""
    path = CLAUDE_CODE / "spotter-258c7280.subagent-acompact-fffbd0.jsonl"
    messages = read_transcript(str(path)).messages
    assert all(m.kind is Kind.META for m in messages if m.role is Role.USER)
    summary = [m for m in messages if m.kind is Kind.COMPACT_SUMMARY]
    assert len(summary) == 1 and summary[0].role is Role.ASSISTANT
    assert "Let me chronologically analyze" in summary[0].text
