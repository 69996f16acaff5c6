"""The LoCoMo reader: dialog turns as messages, session dates, questions and their evidence."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from lamina.errors import ReadWarning
from lamina.messages import Kind, Role, TextBlock
from lamina.readers import detect_format, read_transcript, registered_readers
from lamina.readers.locomo import (
    LocomoSample,
    parse_evidence,
    parse_locomo_datetime,
    read_locomo_samples,
)
from lamina.turns import is_turn_start

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEV = SHARED / "locomo" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV}")


# -- the date parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 Jan, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("9 PM on 3 Sept 2022", datetime(2022, 9, 3, 21, 0, tzinfo=UTC)),
        ("  4:04 p.m. on 20 January, 2023 ", datetime(2023, 1, 20, 16, 4, tzinfo=UTC)),
        ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_parse_locomo_datetime(text: str, expected: datetime) -> None:
    assert parse_locomo_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "1:56 pm on 31 February, 2023",
        "13:00 pm on 1 May, 2023",
        "1:56 pm on 8 Maybe, 2023",
        "2023-05-08",
    ],
)
def test_parse_locomo_datetime_rejects(text: str) -> None:
    assert parse_locomo_datetime(text) is None


def test_parse_evidence_splits_and_filters() -> None:
    known = {"D1:3", "D8:6", "D9:17", "D11:26"}
    entries: list[Any] = ["D8:6; D9:17", "D", "D:11:26", "D1:3", "D1:3", "D10:19", None, ""]
    assert parse_evidence(entries, known) == ("D8:6", "D9:17", "D1:3")


# -- a hand-built sample -----------------------------------------------------------------------


def _sample() -> dict[str, Any]:
    return {
        "sample_id": "mini",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_10_date_time": "9:00 am on 2 March, 2023",
            "session_10": [{"speaker": "Ann", "dia_id": "D10:1", "text": "Back again."}],
            "session_2_date_time": "sometime in spring",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Hi Bob!"},
                "not a turn",
                {
                    "speaker": "Bob",
                    "dia_id": "D2:3",
                    "text": "Look at this.",
                    "img_url": ["https://example.org/dog.jpg"],
                    "blip_caption": "a photo of a dog",
                },
            ],
            "session_3_date_time": "1:00 pm on 5 March, 2023",
        },
        "qa": [
            {"question": "Who has a dog?", "answer": "Bob", "evidence": ["D2:3"], "category": 4},
            {
                "question": "What did Ann show?",
                "adversarial_answer": "a dog",
                "evidence": ["D2:3; D2:9"],
                "category": 5,
            },
            {"question": "How many?", "answer": 2, "evidence": [], "category": 1},
            {"question": "Broken", "answer": "x", "evidence": []},
        ],
        "observation": {"session_2_observation": "OBSERVATION TEXT"},
        "session_summary": {"session_2_summary": "SUMMARY TEXT"},
        "event_summary": {"events_session_2": "EVENT TEXT"},
    }


def test_hand_built_sample(tmp_path: Path) -> None:
    path = tmp_path / "mini.json"
    path.write_bytes(orjson.dumps(_sample()))  # one sample object, not a list
    assert detect_format(str(path)).name == "locomo"
    warnings: list[ReadWarning] = []
    (sample,) = read_locomo_samples(str(path), warnings.append)
    assert (sample.sample_id, sample.speaker_a, sample.speaker_b) == ("mini", "Ann", "Bob")
    # Sessions in number order (2 before 10); a date without a session is ignored.
    assert [(s.number, s.date_time) for s in sample.sessions] == [
        (2, None),
        (10, datetime(2023, 3, 2, 9, 0, tzinfo=UTC)),
    ]
    messages = sample.messages
    assert [m.id for m in messages] == ["mini:D2:1", "mini:D2:3", "mini:D10:1"]
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert [m.speaker for m in messages] == ["Ann", "Bob", "Ann"]
    assert [m.session_id for m in messages] == [
        "mini:session_2",
        "mini:session_2",
        "mini:session_10",
    ]
    assert [m.source.index for m in messages] == [0, 1, 2]
    assert messages[1].blocks == (
        TextBlock("Look at this."),
        TextBlock("[shares an image: a photo of a dog]"),
    )
    assert messages[1].records[0]["img_url"] == ["https://example.org/dog.jpg"]
    assert [m.kind for m in messages] == [Kind.PROMPT, Kind.REPLY, Kind.PROMPT]
    assert [is_turn_start(m) for m in messages] == [True, False, True]
    everything = " ".join(m.text for m in messages)
    assert "TEXT" not in everything  # observations and summaries are never used
    assert sorted(w.reason for w in warnings) == [
        "mini question 3: category None; skipped",
        "mini session 2 turn 2: not a dialog turn with text; skipped",
        "mini session 2: date 'sometime in spring' not understood; its messages have no timestamp",
    ]
    assert all(w.path == str(path) and w.line is None for w in warnings)
    assert [(q.answer, q.category, q.evidence) for q in sample.questions] == [
        ("Bob", 4, ("D2:3",)),
        ("a dog", 5, ("D2:3",)),
        ("2", 1, ()),
    ]


# -- the shared dev file -----------------------------------------------------------------------


def _raw_turns(sample: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    conversation = sample["conversation"]
    numbers = sorted(
        int(m.group(1)) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key))
    )
    return [(n, turn) for n in numbers for turn in conversation[f"session_{n}"]]


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    if not DEV.is_file():
        pytest.skip(f"LoCoMo dev file not found at {DEV}")
    data: list[dict[str, Any]] = orjson.loads(DEV.read_bytes())
    return data


@pytest.fixture(scope="module")
def samples() -> list[LocomoSample]:
    if not DEV.is_file():
        pytest.skip(f"LoCoMo dev file not found at {DEV}")
    warnings: list[ReadWarning] = []
    result = read_locomo_samples(str(DEV), warnings.append)
    assert warnings == []
    return result


@pytest.mark.shared_data
@needs_dev
def test_dev_file_is_detected_and_read() -> None:
    assert detect_format(str(DEV)).name == "locomo"
    head = DEV.read_bytes()[:65536]
    readers = registered_readers()
    assert readers["anthropic"].sniff(head, str(DEV)) == 0.0
    assert readers["openai"].sniff(head, str(DEV)) == 0.0
    assert readers["claude-code"].sniff(head, str(DEV)) == 0.0
    result = read_transcript(str(DEV))
    assert result.format == "locomo"
    assert result.warnings == []
    assert len(result.messages) == 2760
    assert len({m.id for m in result.messages}) == len(result.messages)
    assert [m.source.index for m in result.messages] == list(range(len(result.messages)))


@pytest.mark.shared_data
@needs_dev
def test_dev_messages_follow_the_dialog(
    raw: list[dict[str, Any]], samples: list[LocomoSample]
) -> None:
    assert [s.sample_id for s in samples] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    for sample, source in zip(samples, raw, strict=True):
        turns = _raw_turns(source)
        messages = sample.messages
        assert len(messages) == len(turns)
        conversation = source["conversation"]
        for message, (number, turn) in zip(messages, turns, strict=True):
            assert message.id == f"{sample.sample_id}:{turn['dia_id']}"
            assert message.session_id == f"{sample.sample_id}:session_{number}"
            assert message.records == (turn,)
            assert message.record_type == "dialog"
            assert message.speaker == turn["speaker"]
            expected_role = Role.USER if turn["speaker"] == sample.speaker_a else Role.ASSISTANT
            assert message.role is expected_role
            assert message.blocks[0] == TextBlock(turn["text"])
            if turn.get("blip_caption"):
                assert message.blocks[1] == TextBlock(f"[shares an image: {turn['blip_caption']}]")
            else:
                assert len(message.blocks) == 1
        assert (sample.speaker_a, sample.speaker_b) == (
            conversation["speaker_a"],
            conversation["speaker_b"],
        )


@pytest.mark.shared_data
@needs_dev
def test_dev_sessions_are_dated(samples: list[LocomoSample]) -> None:
    for sample in samples:
        numbers = [s.number for s in sample.sessions]
        assert numbers == sorted(numbers) == list(range(1, len(numbers) + 1))
        for session in sample.sessions:
            assert session.date_time is not None
            assert all(m.timestamp == session.date_time for m in session.messages)
        dates = [s.date_time for s in sample.sessions]
        assert dates == sorted(dates)  # type: ignore[type-var]
    first = samples[0].sessions[0]
    assert first.date_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert samples[0].sessions[3].date_time == datetime(2023, 6, 27, 10, 37, tzinfo=UTC)


@pytest.mark.shared_data
@needs_dev
def test_dev_images_and_turn_starts(samples: list[LocomoSample]) -> None:
    captioned = [m for s in samples for m in s.messages if len(m.blocks) == 2]
    assert len(captioned) == 602
    for message in captioned:
        caption = message.blocks[1]
        assert isinstance(caption, TextBlock)
        assert caption.text.startswith("[shares an image: ") and caption.text.endswith("]")
    conv26 = {m.id: m for m in samples[0].messages}
    assert conv26["conv-26:D1:5"].text.endswith(
        "[shares an image: a photo of a dog walking past a wall with a painting of a woman]"
    )
    for sample in samples:
        starts = [m for m in sample.messages if is_turn_start(m)]
        assert starts and all(m.speaker == sample.speaker_a for m in starts)


@pytest.mark.shared_data
@needs_dev
def test_dev_questions(raw: list[dict[str, Any]], samples: list[LocomoSample]) -> None:
    assert sum(len(s.questions) for s in samples) == 999
    for sample, source in zip(samples, raw, strict=True):
        assert len(sample.questions) == len(source["qa"])
        dia_ids = {m.id.removeprefix(f"{sample.sample_id}:") for m in sample.messages}
        for question, item in zip(sample.questions, source["qa"], strict=True):
            assert question.question == item["question"]
            assert question.category == item["category"] in (1, 2, 3, 4, 5)
            assert set(question.evidence) <= dia_ids
            if question.category == 5:
                assert question.answer == item["adversarial_answer"]
            else:
                assert question.answer == str(item["answer"])
    conv26 = {q.question: q for q in samples[0].questions}
    assert conv26["What did Melanie paint recently?"].evidence == ("D8:6", "D9:17")
    assert conv26["When did Melanie paint a sunrise?"].answer == "2022"
    with_evidence = sum(1 for s in samples for q in s.questions if q.evidence)
    assert with_evidence >= 990
