"""`read_message_list`: a message list held in memory reads as the same list in a file does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import orjson
import pytest

import lamina
from lamina.errors import InputError, UnknownFormatError
from lamina.messages import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from lamina.readers.base import bound_depth
from lamina.readers.values import plain_values

from .conftest import EXAMPLE, LOCOMO, needs_shared
from .test_readers_messages import ANTHROPIC_SESSION, OPENAI_SESSION


def shape(messages: list[Message]) -> list[tuple[Any, ...]]:
    """What a message is, its place in a file aside."""
    return [(m.id, m.role, m.kind, m.blocks, m.timestamp, m.speaker, m.model) for m in messages]


def from_file(tmp_path: Path, data: Any, format: str | None = None) -> lamina.Transcript:
    path = tmp_path / "messages.json"
    path.write_bytes(orjson.dumps(data))
    return lamina.read_transcript(str(path), format=format)


@pytest.mark.parametrize(
    ("data", "fmt"),
    [(ANTHROPIC_SESSION, "anthropic"), (OPENAI_SESSION, "openai")],
    ids=["anthropic", "openai"],
)
def test_a_list_in_memory_reads_as_the_same_list_in_a_file(
    tmp_path: Path, data: Any, fmt: str
) -> None:
    before = copy.deepcopy(data)
    transcript = lamina.read_message_list(data)
    assert transcript.format == fmt  # detected as for a file
    assert transcript.path == "messages" and transcript.warnings == []
    assert shape(transcript.messages) == shape(from_file(tmp_path, data).messages)
    assert shape(lamina.read_message_list(data, format=fmt).messages) == shape(transcript.messages)
    assert data == before  # the caller's data is not changed


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_claude_code_records_in_memory_read_as_the_transcript_does() -> None:
    records = [orjson.loads(line) for line in EXAMPLE.read_bytes().splitlines() if line.strip()]
    transcript = lamina.read_message_list(records)
    assert transcript.format == "claude-code"
    assert shape(transcript.messages) == shape(lamina.read_transcript(str(EXAMPLE)).messages)


@needs_shared
def test_locomo_samples_in_memory_read_as_the_file_does(tmp_path: Path) -> None:
    """LoCoMo samples sent as a list (or one sample) read like the file, in memory: no
    temporary file, and a mistake names what was sent."""
    samples = orjson.loads(LOCOMO.read_bytes())[:2]
    whole = lamina.read_message_list(samples)
    assert whole.format == "locomo" and whole.path == "messages"
    assert shape(whole.messages) == shape(from_file(tmp_path, samples).messages)
    one = lamina.read_message_list(samples[0], format="locomo")
    assert shape(one.messages) == shape(from_file(tmp_path, samples[0]).messages)
    assert len(whole.messages) > len(one.messages) > 100
    warnings: list[Any] = []
    lamina.read_message_list([{"sample_id": "s", "conversation": {"speaker_a": "A",
        "session_1": [{"speaker": "A", "text": 5}]}}], format="locomo",
        on_warning=warnings.append)  # fmt: skip
    assert warnings and all(str(w).startswith("messages: ") for w in warnings)


def test_anthropic_sdk_objects_are_taken_as_they_are() -> None:
    response = at.Message.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
            ],
        }
    )
    prompt: at.MessageParam = {"role": "user", "content": "Which files are here?"}
    result: at.MessageParam = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
    }
    # The usual loop: the response's content blocks appended as they came back.
    history = [prompt, {"role": "assistant", "content": response.content}, result]
    transcript = lamina.read_message_list(history, format="anthropic")
    user, reply, tool = transcript.messages
    assert user.role is Role.USER and user.blocks == (TextBlock("Which files are here?"),)
    assert reply.role is Role.ASSISTANT
    assert reply.blocks[0] == TextBlock("Let me look.")
    assert reply.blocks[1] == ToolUseBlock("toolu_1", "ls", {"path": "."})
    assert isinstance(tool.blocks[0], ToolResultBlock) and tool.blocks[0].tool_use_id == "toolu_1"
    # A whole response object is a message too (its own id kept).
    (whole,) = lamina.read_message_list([response], format="anthropic").messages
    assert whole.id == "msg_01" and whole.stop_reason == "tool_use"


def test_openai_sdk_objects_are_taken_as_they_are() -> None:
    reply = oc.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        }
    )
    history: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        reply,
        {"role": "tool", "tool_call_id": "call_1", "content": "4 degrees, rain"},
        {"role": "assistant", "content": "4 degrees and rain."},
    ]
    transcript = lamina.read_message_list(history)
    assert transcript.format == "openai"
    roles = [m.role for m in transcript.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    call = transcript.messages[2].blocks[-1]
    assert call == ToolUseBlock("call_1", "get_weather", {"city": "Oslo"})
    assert transcript.messages[3].blocks[0] == ToolResultBlock(
        "call_1", (TextBlock("4 degrees, rain"),)
    )
    assert [m.id for m in transcript.messages] == [f"messages:{i}" for i in range(5)]


def test_a_bad_record_is_a_warning_and_the_rest_is_read() -> None:
    seen: list[lamina.ReadWarning] = []
    data = [{"role": "user", "content": "hi"}, 42, {"role": "robot", "content": "?"},
            {"role": "assistant", "content": "hello"}]  # fmt: skip
    transcript = lamina.read_message_list(data, format="anthropic", on_warning=seen.append)
    assert [m.role for m in transcript.messages] == [Role.USER, Role.ASSISTANT]
    assert [str(w) for w in transcript.warnings] == [str(w) for w in seen]
    assert len(seen) == 2 and all(w.path == "messages" for w in seen)
    assert "unknown role 'robot'" in str(seen[1])


@pytest.mark.parametrize("depth", [60, 100, 5000])
def test_deep_nesting_is_bounded_in_a_copy_only(depth: int) -> None:
    deep: Any = "bottom"
    for _ in range(depth):
        deep = {"d": [deep]}
    data = [{"role": "user", "content": [{"type": "text", "text": "x", "extra": deep}]}]
    before = copy.deepcopy(data) if depth < 500 else None
    (message,) = lamina.read_message_list(data, format="anthropic").messages
    assert message.blocks[0] == TextBlock("x")
    if before is not None:
        assert data == before
        # Bounded exactly as a file's line is.
        assert plain_values(data) == [bound_depth(copy.deepcopy(data[0]))]


def test_wrong_input_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="not a string"):
        lamina.read_message_list('[{"role": "user", "content": "hi"}]')
    with pytest.raises(UnknownFormatError, match="unknown format 'slack'"):
        lamina.read_message_list([{"role": "user", "content": "hi"}], format="slack")
    with pytest.raises(UnknownFormatError, match="not a message list"):
        lamina.read_message_list([{"name": "x"}, {"name": "y"}])
    assert lamina.read_message_list([]).messages == []
