"""The `anthropic` and `openai` message-list readers, and how detection tells them apart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from lamina.errors import ReadError
from lamina.messages import (
    ImageBlock,
    Kind,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)
from lamina.readers import detect_format, read_transcript, registered_readers
from lamina.readers.base import HEAD_BYTES
from lamina.turns import is_turn_start

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(
    not (SHARED / "claude-code").is_dir(),
    reason=f"shared test data not found at {SHARED / 'claude-code'}",
)


def write_json(path: Path, data: Any, *, indent: bool = True) -> str:
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 if indent else 0))
    return str(path)


def write_lines(path: Path, lines: Sequence[Any]) -> str:
    """Each item is a JSON value or, when bytes, a raw line written as is."""
    raw = [x if isinstance(x, bytes) else orjson.dumps(x) for x in lines]
    path.write_bytes(b"".join(r + b"\n" for r in raw))
    return str(path)


def starts(messages: Sequence[Message]) -> list[bool]:
    return [is_turn_start(m) for m in messages]


# -- anthropic ---------------------------------------------------------------------------------

ANTHROPIC_SESSION: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": "You are terse."}],
    "messages": [
        {"role": "user", "content": "Which files are here?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "List them.", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Just a.py."}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "b.py"}],
                    "is_error": True,
                },
                {"type": "text", "text": "Also, what is in b.py?"},
            ],
        },
    ],
}


def test_anthropic_request_with_system_and_tools(tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", ANTHROPIC_SESSION)
    assert detect_format(path).name == "anthropic"
    result = read_transcript(path)
    assert result.format == "anthropic"
    assert result.warnings == []
    messages = result.messages
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert [m.kind for m in messages] == [
        Kind.INSTRUCTIONS,
        Kind.PROMPT,
        Kind.REPLY,
        Kind.TOOL_ACTIVITY,
        Kind.REPLY,
        Kind.PROMPT,
    ]
    # Derived ids: the file stem and the record number (the system prompt is record 0).
    assert [m.id for m in messages] == [f"chat:{i}" for i in range(6)]
    assert [m.source.index for m in messages] == list(range(6))
    assert messages[0].text == "You are terse."
    assert messages[0].records == ({"system": ANTHROPIC_SESSION["system"]},)

    thinking, text, call = messages[2].blocks
    assert thinking == ThinkingBlock("List them.", "sig")
    assert text == TextBlock("Let me look.")
    assert call == ToolUseBlock("toolu_1", "ls", {"path": "."})
    (result_block,) = messages[3].tool_results
    assert result_block.tool_use_id == call.id
    assert result_block.text == "a.py"
    assert messages[5].tool_results[0].is_error
    # The tool-result-only record starts no turn; one with a result and real text does.
    assert starts(messages) == [False, True, False, False, False, True]
    assert messages[1].records == (ANTHROPIC_SESSION["messages"][0],)


def test_anthropic_images_and_unknown_blocks_are_kept(tmp_path: Path) -> None:
    image_source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
        "title": "notes.txt",
    }
    redacted = {"type": "redacted_thinking", "data": "EuYBCkQYAiJA"}
    novel = {"type": "hologram", "payload": [1, 2, 3]}
    path = write_json(
        tmp_path / "blocks.json",
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": image_source},
                    document,
                    {"type": "text", "text": "What is this?"},
                ],
            },
            {"role": "assistant", "content": [redacted, novel]},
        ],
    )
    result = read_transcript(path, format="anthropic")
    assert result.warnings == []
    user, assistant = result.messages
    image, doc, _text = user.blocks
    assert image == ImageBlock("image/png", image_source)
    assert doc == UnknownBlock("document", document)
    assert assistant.blocks == (
        UnknownBlock("redacted_thinking", redacted),
        UnknownBlock("hologram", novel),
    )
    assert user.kind is Kind.PROMPT
    assert assistant.kind is Kind.TOOL_ACTIVITY  # no conversational text


def test_anthropic_own_ids_timestamps_and_stable_derived_ids(tmp_path: Path) -> None:
    records = [
        {"role": "user", "content": "hi", "timestamp": "2024-03-01T10:00:00+02:00"},
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "hello"}],
            "model": "claude-x",
            "stop_reason": "end_turn",
            "created_at": 1709280000,
        },
        {"id": "msg_01", "role": "assistant", "content": "again"},
    ]
    path = write_json(tmp_path / "ids.json", records)
    first = read_transcript(path, format="anthropic").messages
    again = read_transcript(path, format="anthropic").messages
    assert [m.id for m in first] == ["ids:0", "msg_01", "msg_01#2"]
    assert [m.id for m in again] == [m.id for m in first]
    assert first[0].timestamp is not None
    assert first[0].timestamp.isoformat() == "2024-03-01T08:00:00+00:00"
    assert first[1].timestamp is not None
    assert first[1].timestamp.isoformat() == "2024-03-01T08:00:00+00:00"
    assert (first[1].model, first[1].stop_reason) == ("claude-x", "end_turn")
    assert first[2].timestamp is None


def test_anthropic_reader_rejects_openai_roles(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "mixed.json",
        [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ],
    )
    result = read_transcript(path, format="anthropic")
    assert [m.text for m in result.messages] == ["hi"]
    assert [(w.line, w.reason) for w in result.warnings] == [
        (None, "message 1: unknown role 'tool'; skipped")
    ]


# -- containers and damage (both readers) ------------------------------------------------------


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_jsonl_damaged_lines_warn_and_reading_goes_on(tmp_path: Path, fmt: str) -> None:
    path = write_lines(
        tmp_path / "damaged.jsonl",
        [
            {"role": "user", "content": "first"},
            b'{"role": "assistant", "content": "cut',
            {"role": "assistant", "content": "second"},
            [1, 2],
            {"role": "bot", "content": "who?"},
            {"role": "user", "content": "third"},
        ],
    )
    result = read_transcript(path, format=fmt)
    assert [m.text for m in result.messages] == ["first", "second", "third"]
    lines = [(w.path, w.line) for w in result.warnings]
    assert lines == [(path, 2), (path, 4), (path, 5)]
    reasons = [w.reason for w in result.warnings]
    assert reasons[0].startswith("invalid JSON")
    assert reasons[1] == "message 2: not a JSON object (list); skipped"
    assert reasons[2] == "message 3: unknown role 'bot'; skipped"
    # Sources point at the lines, with byte offsets into the file.
    data = Path(path).read_bytes()
    for message, line in zip(result.messages, [1, 3, 6], strict=True):
        assert message.source.line == message.source.end_line == line
        start, end = message.source.offset, message.source.end_offset
        assert start is not None and end is not None
        assert orjson.loads(data[start:end]) == message.records[0]
    assert [m.id for m in result.messages] == ["damaged:0", "damaged:1", "damaged:4"]


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_array_with_wrong_shapes_warns_and_continues(tmp_path: Path, fmt: str) -> None:
    path = write_json(
        tmp_path / "shapes.json",
        [
            {"role": "user", "content": "one"},
            42,
            {"content": "no role"},
            {"role": "bot", "content": "x"},
            {"role": "assistant", "content": "two"},
        ],
    )
    result = read_transcript(path, format=fmt)
    assert [(m.id, m.text) for m in result.messages] == [("shapes:0", "one"), ("shapes:4", "two")]
    assert [(w.line, w.reason) for w in result.warnings] == [
        (None, "message 1: not a JSON object (int); skipped"),
        (None, "message 2: no role; skipped"),
        (None, "message 3: unknown role 'bot'; skipped"),
    ]


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_first_line_damaged_jsonl_is_still_read(tmp_path: Path, fmt: str) -> None:
    path = write_lines(
        tmp_path / "head.jsonl",
        [b'{"role": "user", "content": ', {"role": "user", "content": "ok"}],
    )
    result = read_transcript(path, format=fmt)
    assert [m.text for m in result.messages] == ["ok"]
    assert [w.line for w in result.warnings] == [1]


@pytest.mark.parametrize("indent", [True, False])
def test_request_object_pretty_or_on_one_line(tmp_path: Path, indent: bool) -> None:
    path = write_json(tmp_path / "req.json", ANTHROPIC_SESSION, indent=indent)
    result = read_transcript(path, format="anthropic")
    assert result.warnings == []
    assert [m.id for m in result.messages] == [f"req:{i}" for i in range(6)]
    assert result.messages[0].kind is Kind.INSTRUCTIONS
    one_line = result.messages[1].source.line
    assert one_line == (None if indent else 1)


def test_unreadable_documents_raise(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"role": "user", "content": "hi"},')
    with pytest.raises(ReadError, match="invalid JSON"):
        list(registered_readers()["anthropic"].read(str(broken), lambda _w: None))
    other = write_json(tmp_path / "other.json", {"title": "not a chat"})
    with pytest.raises(ReadError, match="not a message list"):
        list(registered_readers()["openai"].read(other, lambda _w: None))
    pretty_broken = tmp_path / "pretty.json"
    pretty_broken.write_text('{\n  "messages": [\n    {"role": "user", "content": "hi"\n  ]\n}\n')
    with pytest.raises(ReadError, match="invalid JSON"):
        list(registered_readers()["anthropic"].read(str(pretty_broken), lambda _w: None))
    empty = tmp_path / "empty.json"
    empty.write_text("\n")
    assert list(registered_readers()["openai"].read(str(empty), lambda _w: None)) == []


# -- openai ------------------------------------------------------------------------------------

OPENAI_SESSION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "developer", "content": [{"type": "text", "text": "Prefer metric units."}]},
    {"role": "user", "name": "alice", "content": "Weather in Oslo and Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "weather", "arguments": "{city: Paris"},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "4 C, rain"},
    {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "12 C"}]},
    {"role": "assistant", "content": "Oslo 4 C and rainy; Paris 12 C."},
]


def test_openai_tool_calls_pair_with_tool_results(tmp_path: Path) -> None:
    path = write_json(tmp_path / "weather.json", OPENAI_SESSION)
    assert detect_format(path).name == "openai"
    result = read_transcript(path)
    assert result.format == "openai"
    assert result.warnings == []
    messages = result.messages
    assert len(messages) == 7  # the two tool messages stay separate
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert [m.kind for m in messages] == [
        Kind.INSTRUCTIONS,
        Kind.INSTRUCTIONS,
        Kind.PROMPT,
        Kind.TOOL_ACTIVITY,
        Kind.TOOL_ACTIVITY,
        Kind.TOOL_ACTIVITY,
        Kind.REPLY,
    ]
    assert [m.record_type for m in messages[:2]] == ["system", "developer"]
    assert messages[2].speaker == "alice"
    good, bad = messages[3].blocks
    assert good == ToolUseBlock("call_a", "weather", {"city": "Oslo"})
    assert bad == ToolUseBlock("call_b", "weather", {"_raw": "{city: Paris"})
    results = [m.tool_results for m in messages[4:6]]
    assert [r[0].tool_use_id for r in results] == ["call_a", "call_b"]
    assert [r[0].text for r in results] == ["4 C, rain", "12 C"]
    assert messages[4].blocks == (ToolResultBlock("call_a", (TextBlock("4 C, rain"),)),)
    assert len(messages[5].blocks) == 1
    assert starts(messages) == [False, False, True, False, False, False, False]
    assert [m.records[0] for m in messages] == OPENAI_SESSION


def test_openai_content_parts(tmp_path: Path) -> None:
    data_image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
    web_image = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    file_part = {"type": "file", "file": {"file_id": "file-1"}}
    refusal_part = {"type": "refusal", "refusal": "I can't help with that."}
    path = write_json(
        tmp_path / "parts.json",
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Look:"}, data_image, web_image, audio],
            },
            {"role": "user", "content": [file_part]},
            {"role": "assistant", "content": [refusal_part]},
            {"role": "assistant", "content": None, "refusal": "No."},
        ],
    )
    result = read_transcript(path, format="openai")
    assert result.warnings == []
    look, only_file, refused, refused_field = result.messages
    assert look.blocks == (
        TextBlock("Look:"),
        ImageBlock("image/jpeg", data_image),
        ImageBlock(None, web_image),
        UnknownBlock("input_audio", audio),
    )
    assert only_file.blocks == (UnknownBlock("file", file_part),)
    assert only_file.kind is Kind.META  # no words: starts no turn
    assert refused.blocks == (UnknownBlock("refusal", refusal_part),)
    assert refused_field.blocks == (UnknownBlock("refusal", {"type": "refusal", "refusal": "No."}),)
    assert starts(result.messages) == [True, False, False, False]


def test_openai_legacy_function_calls_and_unpaired_tool(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "legacy.jsonl",
        [
            {"role": "user", "content": "Time?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "clock", "arguments": "{}"},
            },
            {"role": "function", "name": "clock", "content": "10:00"},
            {"role": "tool", "content": "orphan"},
        ],
    )
    result = read_transcript(path, format="openai")
    _user, call_message, answer, orphan = result.messages
    (call,) = call_message.tool_uses
    assert call == ToolUseBlock(f"{call_message.id}:function_call", "clock", {})
    assert answer.role is Role.USER
    assert answer.tool_results[0].tool_use_id == call.id
    assert answer.tool_results[0].text == "10:00"
    assert orphan.tool_results[0].tool_use_id == ""
    assert [(w.line, w.reason) for w in result.warnings] == [
        (4, "message 3: tool message without a tool_call_id; kept unpaired")
    ]


def test_plain_list_reads_the_same_with_either_reader(tmp_path: Path) -> None:
    plain = [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
    ]
    path = write_json(tmp_path / "plain.json", plain)
    assert detect_format(path).name == "anthropic"
    head = Path(path).read_bytes()
    readers = registered_readers()
    assert readers["anthropic"].sniff(head, path) == 0.6
    assert readers["openai"].sniff(head, path) == 0.55

    def view(m: Message) -> tuple[Any, ...]:
        return (m.id, m.role, m.kind, m.blocks, m.source)

    by_anthropic = [view(m) for m in read_transcript(path, format="anthropic").messages]
    by_openai = [view(m) for m in read_transcript(path, format="openai").messages]
    assert by_anthropic == by_openai
    assert len(by_anthropic) == 3


# -- detection ---------------------------------------------------------------------------------


def _jsonl(tmp_path: Path, name: str, records: Sequence[Any]) -> str:
    return write_lines(tmp_path / name, records)


@pytest.mark.parametrize(
    ("name", "build", "expected"),
    [
        ("openai.json", lambda p: write_json(p, OPENAI_SESSION), "openai"),
        ("openai-req.json", lambda p: write_json(p, {"messages": OPENAI_SESSION}), "openai"),
        ("openai.jsonl", lambda p: write_lines(p, OPENAI_SESSION), "openai"),
        ("anthropic.json", lambda p: write_json(p, ANTHROPIC_SESSION), "anthropic"),
        (
            "anthropic.json",
            lambda p: write_json(p, ANTHROPIC_SESSION["messages"]),
            "anthropic",
        ),
        ("anthropic.jsonl", lambda p: write_lines(p, ANTHROPIC_SESSION["messages"]), "anthropic"),
        (
            "system-only-marker.json",
            lambda p: write_json(
                p, {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
            ),
            "anthropic",
        ),
        (
            "audio.jsonl",
            lambda p: write_lines(
                p,
                [
                    {
                        "role": "user",
                        "content": [{"type": "input_audio", "input_audio": {"data": ""}}],
                    }
                ],
            ),
            "openai",
        ),
    ],
)
def test_detect_format_picks_the_right_reader(
    tmp_path: Path, name: str, build: Any, expected: str
) -> None:
    path = build(tmp_path / name)
    assert detect_format(path).name == expected


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"role": "tool", "tool_call_id": "c", "content": "x"}, "openai"),
        ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}, "anthropic"),
        ({"role": "user", "content": "plain"}, "anthropic"),
    ],
)
def test_detection_on_a_truncated_head(tmp_path: Path, extra: Any, expected: str) -> None:
    """A document larger than the sniffed head cannot be parsed: the text is scanned instead."""
    filler = {"role": "user", "content": "x" * 200}
    records = [extra] + [filler] * (2 * HEAD_BYTES // 200)
    path = write_json(tmp_path / "big.json", records)
    assert Path(path).stat().st_size > HEAD_BYTES
    assert detect_format(path).name == expected
    result = read_transcript(path)
    assert len(result.messages) == len(records)


def test_claude_code_lines_are_not_message_lists(tmp_path: Path) -> None:
    line = {
        "type": "user",
        "message": {"role": "user", "content": "hi"},
        "uuid": "u1",
        "sessionId": "s1",
        "parentUuid": None,
        "timestamp": "2025-01-01T00:00:00Z",
    }
    path = write_lines(tmp_path / "session.jsonl", [line])
    head = Path(path).read_bytes()
    readers = registered_readers()
    assert readers["anthropic"].sniff(head, path) == 0.0
    assert readers["openai"].sniff(head, path) == 0.0
    assert detect_format(path).name == "claude-code"


@pytest.mark.shared_data
@needs_shared
def test_shared_claude_code_files_are_detected_as_claude_code() -> None:
    files = sorted((SHARED / "claude-code").glob("*.jsonl"))
    assert files
    readers = registered_readers()
    for file in files:
        head = file.read_bytes()[:HEAD_BYTES]
        assert readers["anthropic"].sniff(head, str(file)) == 0.0, file.name
        assert readers["openai"].sniff(head, str(file)) == 0.0, file.name
        assert detect_format(str(file)).name == "claude-code", file.name
