"""LoCoMo conversations (Maharana et al., 2024): long two-person chats with questions.

A file is a JSON list of samples, or one sample object. A sample has a `sample_id`, a
`conversation` object and the questions (`qa`); the dataset's `observation`, `session_summary`
and `event_summary` are generated material and are never read. The conversation holds
`speaker_a`, `speaker_b`, and sessions `session_<n>`: lists of turns
`{speaker, dia_id, text, [img_url, blip_caption, query]}`, each dated by
`session_<n>_date_time` ("1:56 pm on 8 May, 2023"). Some samples date sessions that hold no turns;
those dates are ignored.

Every dialog turn becomes one message, in session order and then turn order:

- id `<sample_id>:<dia_id>` ("conv-26:D1:3"), session id `<sample_id>:session_<n>`;
- role USER for `speaker_a` and ASSISTANT for `speaker_b`. The two people are peers; the mapping
  only gives turn logic (`lamina.turns`) a shape to work with, so each utterance of speaker_a
  starts a turn and speaker_b's answers belong to it;
- `speaker` is the person's name; the kind follows from the text (`classify`);
- the text as a text block, plus `[shares an image: <caption>]` when the speaker shared an
  image (the record keeps `img_url` and `blip_caption`);
- the timestamp is the session's date and time, read as UTC (LoCoMo gives no time zone).

`read_locomo_samples` also returns the questions with their evidence turn ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lamina.errors import ReadError, ReadWarning
from lamina.messages import Block, Kind, Message, Role, Source, TextBlock
from lamina.text.calendar_names import MONTHS
from lamina.turns import classify

from .base import WarningSink, load_json_document

__all__ = [
    "LocomoQuestion",
    "LocomoReader",
    "LocomoSample",
    "LocomoSession",
    "parse_evidence",
    "parse_locomo_datetime",
    "read_locomo",
    "read_locomo_samples",
]

_DATE_TIME = re.compile(
    r"""^\s*(?:(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap])\.?\s*m\.?\s*(?:on\s+)?)?
    (?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?P<month>[a-z]+)\.?,?\s+(?P<year>\d{4})\s*$""",
    re.IGNORECASE | re.VERBOSE,
)
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D\d+:\d+")


def parse_locomo_datetime(text: str) -> datetime | None:
    """An aware UTC datetime from a LoCoMo session date ("1:56 pm on 8 May, 2023"); the time of
    day may be missing ("8 May, 2023" is midnight). None when the text is not such a date."""
    match = _DATE_TIME.match(text)
    if match is None:
        return None
    month = MONTHS.get(match["month"].lower())
    hour, minute = 0, 0
    if match["hour"] is not None:
        hour, minute = int(match["hour"]), int(match["minute"] or 0)
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match["ampm"].lower() == "p" else 0)
    if month is None:
        return None
    try:
        return datetime(int(match["year"]), month, int(match["day"]), hour, minute, tzinfo=UTC)
    except ValueError:
        return None


class LocomoSession(NamedTuple):
    number: int
    date_time: datetime | None
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    question: str
    answer: str | None
    """The answer as text; for category 5 (adversarial) the dataset's `adversarial_answer`."""
    category: int
    evidence: tuple[str, ...]
    """Ids of the turns that support the answer ("D1:3"), all present in the conversation."""


@dataclass(frozen=True, slots=True)
class LocomoSample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[LocomoSession] = field(default_factory=list)
    questions: list[LocomoQuestion] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        """All dialog turns of the sample, in order."""
        return [m for session in self.sessions for m in session.messages]


class _Parser:
    def __init__(self, path: str, warn: WarningSink) -> None:
        self.path = path
        self.warn = warn
        self.index = 0
        """Position of the next message among all messages of the file."""

    def _warning(self, reason: str) -> None:
        self.warn(ReadWarning(self.path, None, reason))

    def _turn(
        self, sample: LocomoSample, number: int, when: datetime | None, position: int, turn: Any
    ) -> Message | None:
        where = f"{sample.sample_id} session {number} turn {position + 1}"
        if not isinstance(turn, Mapping) or not isinstance(turn.get("text"), str):
            self._warning(f"{where}: not a dialog turn with text; skipped")
            return None
        dia_id = turn.get("dia_id")
        if not isinstance(dia_id, str) or not dia_id:
            dia_id = f"D{number}:{position + 1}"
            self._warning(f"{where}: no dia_id; using {dia_id}")
        speaker = turn.get("speaker")
        role = Role.ASSISTANT if speaker == sample.speaker_b else Role.USER
        if speaker not in (sample.speaker_a, sample.speaker_b):
            self._warning(f"{where}: speaker {speaker!r} is neither speaker_a nor speaker_b")
        blocks: list[Block] = [TextBlock(turn["text"])]
        caption = turn.get("blip_caption")
        if isinstance(caption, str) and caption.strip():
            blocks.append(TextBlock(f"[shares an image: {caption.strip()}]"))
        elif turn.get("img_url"):
            blocks.append(TextBlock("[shares an image]"))
        message = Message(
            id=f"{sample.sample_id}:{dia_id}",
            role=role,
            blocks=tuple(blocks),
            kind=Kind.PROMPT,
            timestamp=when,
            source=Source(path=self.path, index=self.index),
            record_type="dialog",
            speaker=speaker if isinstance(speaker, str) else None,
            session_id=f"{sample.sample_id}:session_{number}",
            records=(turn,),
        )
        self.index += 1
        return replace(message, kind=classify(message))

    def _sessions(
        self, sample: LocomoSample, conversation: Mapping[str, Any]
    ) -> Iterator[LocomoSession]:
        numbers = sorted(
            int(m.group(1))
            for key in conversation
            if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conversation[key], list)
        )
        for number in numbers:
            raw_date = conversation.get(f"session_{number}_date_time")
            when = parse_locomo_datetime(raw_date) if isinstance(raw_date, str) else None
            if when is None:
                self._warning(
                    f"{sample.sample_id} session {number}: date {raw_date!r} not understood; "
                    "its messages have no timestamp"
                )
            messages = []
            for position, turn in enumerate(conversation[f"session_{number}"]):
                message = self._turn(sample, number, when, position, turn)
                if message is not None:
                    messages.append(message)
            yield LocomoSession(number, when, messages)

    def sample(self, value: Any, position: int) -> LocomoSample | None:
        conversation = value.get("conversation") if isinstance(value, Mapping) else None
        if not isinstance(conversation, Mapping):
            self._warning(f"sample {position}: no conversation object; skipped")
            return None
        sample_id = value.get("sample_id")
        sample = LocomoSample(
            sample_id=str(sample_id) if sample_id is not None else f"sample-{position}",
            speaker_a=str(conversation.get("speaker_a", "")),
            speaker_b=str(conversation.get("speaker_b", "")),
        )
        sample.sessions.extend(self._sessions(sample, conversation))
        known = {m.id.removeprefix(f"{sample.sample_id}:") for m in sample.messages}
        qa = value.get("qa")
        for number, item in enumerate(qa if isinstance(qa, list) else ()):
            question = self._question(sample.sample_id, number, item, known)
            if question is not None:
                sample.questions.append(question)
        return sample

    def _question(
        self, sample_id: str, number: int, item: Any, known: set[str]
    ) -> LocomoQuestion | None:
        if not isinstance(item, Mapping) or not isinstance(item.get("question"), str):
            self._warning(f"{sample_id} question {number}: no question text; skipped")
            return None
        category = item.get("category")
        if not isinstance(category, int) or isinstance(category, bool):
            self._warning(f"{sample_id} question {number}: category {category!r}; skipped")
            return None
        answer = item.get("adversarial_answer") if category == 5 else None
        if answer is None:
            answer = item.get("answer")
        evidence = item.get("evidence")
        return LocomoQuestion(
            question=item["question"],
            answer=None if answer is None else str(answer),
            category=category,
            evidence=parse_evidence(evidence if isinstance(evidence, list) else [], known),
        )


def parse_evidence(entries: list[Any], known: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Turn ids from evidence entries: each entry is split on ';' and whitespace ("D8:6; D9:17"),
    and only ids of the form D<session>:<turn> that are in `known` are kept, in order, once."""
    found: dict[str, None] = {}
    for entry in entries:
        if not isinstance(entry, str):
            continue
        for token in re.split(r"[;\s]+", entry):
            if _DIA_ID.fullmatch(token) and token in known:
                found[token] = None
    return tuple(found)


def read_locomo_samples(path: str, warn: WarningSink | None = None) -> list[LocomoSample]:
    """The samples of a LoCoMo file: their sessions of messages and their questions."""
    data = load_json_document(path)
    if isinstance(data, Mapping):
        data = [data]
    if not isinstance(data, list):
        raise ReadError(path, "not a LoCoMo file (expected a list of samples or one sample)")
    parser = _Parser(path, warn or (lambda _w: None))
    samples = (parser.sample(value, position) for position, value in enumerate(data))
    return [s for s in samples if s is not None]


def read_locomo(path: str, warn: WarningSink) -> Iterator[Message]:
    """The dialog turns of every sample in a LoCoMo file, as messages."""
    for sample in read_locomo_samples(path, warn):
        yield from sample.messages


def locomo_messages(values: Iterable[Any], source: str, warn: WarningSink) -> Iterator[Message]:
    """The dialog turns of LoCoMo samples held in memory, as `read_locomo` reads them from a
    file (`source` names them in warnings)."""
    parser = _Parser(source, warn)
    for position, value in enumerate(values):
        sample = parser.sample(value, position)
        if sample is not None:
            yield from sample.messages


class LocomoReader:
    name = "locomo"
    description = "LoCoMo long-term conversation samples (JSON)"

    def sniff(self, head: bytes, path: str) -> float:
        body = head.lstrip()
        if not body.startswith((b"[", b"{")):
            return 0.0
        if all(key in body for key in (b'"conversation"', b'"speaker_a"', b'"dia_id"')):
            return 0.9
        if all(key in body for key in (b'"qa"', b'"evidence"', b'"category"')):
            return 0.6  # the questions come first and may fill the whole head
        return 0.0

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        return read_locomo(path, warn)
