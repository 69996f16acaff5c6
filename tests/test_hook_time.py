"""The hook's time channel follows the prompt's own time words, not dates quoted in the turns
before it (in SQLite and in PostgreSQL, which search in the database)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.integrations.claude_code.prompt import PromptRequest, answer_prompt
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.store import open_store

NOW = datetime.now(UTC)
LAST_YEAR = datetime(NOW.year - 1, 6, 15, tzinfo=UTC)
LAST_WEEK = NOW - timedelta(days=7)  # always inside "last week"

# Two periods: last year's memories and last week's, on the same two topics. Without a time
# frame the backup question's best match is last week's, the deploy question's last year's.
FACTS = [
    ("backup", "Billing database backup: a nightly pg_dump to the NAS.", LAST_YEAR),
    (
        "backup",
        "Billing database backup job: hourly WAL archiving to object storage, "
        "the backup job checked by a restore drill.",
        LAST_WEEK,
    ),
    (
        "deploy",
        "Deploy of the web app: blue-green deploy with a smoke test, the deploy "
        "rolled back once on a failed smoke test.",
        LAST_YEAR,
    ),
    ("deploy", "The web app went out through the new pipeline.", LAST_WEEK),
]

# An earlier turn quoting a relative date; none of its other words is in the bank.
CONTEXT = [
    ("user", "Fun aside: I restored one of those last year, quite a saga."),
    ("assistant", "Noted, what a saga."),
]


def conversation(doc: str, facts: list[tuple[str, str, datetime]]) -> list[Message]:
    out: list[Message] = []
    for n, (_, fact, when) in enumerate(facts):
        said = ((Role.USER, Kind.PROMPT, "and then?"), (Role.ASSISTANT, Kind.REPLY, fact))
        for role, kind, text in said:
            out.append(
                Message(
                    id=f"{doc}-{role.value}{n}",
                    role=role,
                    blocks=(TextBlock(text),),
                    kind=kind,
                    timestamp=when,
                    session_id=doc,
                )
            )
    return out


@pytest.fixture
def bank(database: str) -> MemoryBank:
    b = MemoryBank(open_store(database), HashEmbedder())
    for n, fact in enumerate(FACTS):
        b.retain_messages(conversation(f"doc-{n}", [fact]), "proj", f"doc-{n}")
    return b


def transcript(path: Path, prompt: str) -> Path:
    """A Claude Code transcript: the context turns, then the new prompt."""
    session = str(uuid.uuid4())
    lines, parent = [], None
    for n, (role, text) in enumerate([*CONTEXT, ("user", prompt)]):
        line_id = str(uuid.uuid4())
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "type": role,
                "sessionId": session,
                "cwd": "/home/dev/proj",
                "message": {"role": role, "content": content},
                "uuid": line_id,
                "timestamp": (NOW - timedelta(minutes=10 - n)).isoformat().replace("+00:00", "Z"),
            }
        )
        parent = line_id
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def order(block: str, topic: str) -> list[str]:
    """The facts on a topic in the order the injected block shows them (the others match
    nothing of the question but its vector, and their order is noise)."""
    shown = [(block.find(text), text) for t, text, _ in FACTS if t == topic and text in block]
    return [text for _, text in sorted(shown)]


def answer(bank: MemoryBank, prompt: str, path: Path | None, topic: str) -> list[str]:
    request = PromptRequest(prompt=prompt, bank="proj", session="other",
                            transcript=str(path) if path else "")  # fmt: skip
    return order(answer_prompt(bank, request, {}).context, topic)


def test_a_date_quoted_in_an_earlier_turn_does_not_steer_recall(
    bank: MemoryBank, tmp_path: Path
) -> None:
    prompt = "How does the billing database backup job run?"
    alone = answer(bank, prompt, None, "backup")
    assert alone == [FACTS[1][1], FACTS[0][1]]  # last week's backup, the best match
    with_context = answer(bank, prompt, transcript(tmp_path / "t.jsonl", prompt), "backup")
    assert with_context == alone
    # What it guards against: the whole composed query's "last year" lifts last year's backup.
    query = "\n".join(f"{r}: {t}" for r, t in CONTEXT) + f"\nuser: {prompt}"
    whole = bank.recall(query, "proj", RecallOptions())
    assert whole.hits[0].memory.text.endswith(FACTS[0][1])
    assert "time" in whole.hits[0].channels
    own = bank.recall(query, "proj", RecallOptions(time_text=prompt))
    assert all("time" not in h.channels for h in own.hits)


def test_a_prompt_naming_a_time_still_gets_the_time_channel(
    bank: MemoryBank, tmp_path: Path
) -> None:
    plain = "How did the deploy of the web app go?"
    assert answer(bank, plain, None, "deploy") == [
        FACTS[2][1],
        FACTS[3][1],
    ]  # last year's deploy, the best match
    prompt = "How did the deploy of the web app go last week?"
    got = answer(bank, prompt, transcript(tmp_path / "t.jsonl", prompt), "deploy")
    assert got == [FACTS[3][1], FACTS[2][1]]  # last week's, though an earlier turn says "last year"


def test_the_recall_preview_composes_as_the_hook_does(bank: MemoryBank, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lamina.integrations.http import create_app

    app = create_app(tmp_path, memory=bank)
    token = {"Authorization": f"Bearer {app.state.gate.token}"}
    api = TestClient(app, base_url="http://127.0.0.1", headers=token)
    context = [{"role": role, "content": text} for role, text in CONTEXT]

    def preview(prompt: str) -> dict[str, Any]:
        body = {"prompt": prompt, "context": context}
        answer: dict[str, Any] = api.post("/v1/banks/proj/recall/preview", json=body).json()
        assert answer["composed"] is True and "last year" in answer["query"]
        return answer

    plain = preview("How does the billing database backup job run?")
    assert plain["results"] and all("time" not in h["channels"] for h in plain["results"])
    assert plain["results"][0]["text"].endswith(FACTS[1][1])
    timed = preview("How did the deploy of the web app go last week?")
    assert timed["results"][0]["text"].endswith(FACTS[3][1])
    assert "time" in timed["results"][0]["channels"]
