"""Recall on a small known bank: the right memories, filters and budgets hold, reasons given."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.store import open_store
from lamina.tokens import count_text

from .conftest import CC, CLAUDE_CODE, needs_shared

FACTS = [
    ("We picked SQLite over PostgreSQL because there is one small server.", "2026-03-01"),
    ("The pagination limit is 50 items per page, larger limits are clamped.", "2026-03-02"),
    ("Timestamps without a timezone are read as UTC in the CSV importer.", "2026-03-03"),
    ("Deploy with a systemd unit on the existing VPS, not on Fly.io.", "2026-03-04"),
    ("The environment variable for the database path is INKWELL_DB_PATH.", "2026-03-05"),
    ("Rate limiting waits until the service is exposed publicly.", "2026-03-06"),
]


def conversation(doc: str, facts: list[tuple[str, str]]) -> list[Message]:
    out: list[Message] = []
    for n, (fact, day) in enumerate(facts):
        when = datetime.fromisoformat(day).replace(tzinfo=UTC)
        out.append(
            Message(
                id=f"{doc}-q{n}",
                role=Role.USER,
                blocks=(TextBlock(f"note {n}?"),),
                kind=Kind.PROMPT,
                timestamp=when,
                session_id=doc,
            )
        )
        out.append(
            Message(
                id=f"{doc}-a{n}",
                role=Role.ASSISTANT,
                blocks=(TextBlock(fact),),
                kind=Kind.REPLY,
                timestamp=when,
                session_id=doc,
            )
        )
    return out


@pytest.fixture
def bank(database: str) -> MemoryBank:
    b = MemoryBank(open_store(database), HashEmbedder())
    b.retain_messages(conversation("doc-a", FACTS[:3]), "proj", "doc-a", tags=["backend"])
    b.retain_messages(conversation("doc-b", FACTS[3:]), "proj", "doc-b", tags=["ops"])
    return b


def test_the_right_memory_comes_first_with_its_reasons(bank: MemoryBank) -> None:
    result = bank.recall("which database did we pick, SQLite or PostgreSQL?", "proj")
    top = result.hits[0]
    assert "SQLite over PostgreSQL" in top.text
    assert top.memory.document == "doc-a"
    assert top.time == datetime(2026, 3, 1, tzinfo=UTC)
    assert set(top.channels) <= {"dense", "lexical", "entities"} and "lexical" in top.channels
    assert top.channels["entities"]["rank"] == 1  # the query names SQLite and PostgreSQL
    assert top.channels["lexical"]["rank"] == 1
    data = result.as_dict()["results"][0]
    assert {"text", "score", "time", "document", "source", "channels"} <= set(data)
    # The answer's own line, not the question before it.
    assert data["source"]["first_record"] == data["source"]["last_record"] == "doc-a-a0"


def test_filters_by_document_tag_and_time(bank: MemoryBank) -> None:
    q = "systemd deploy pagination database timezone"
    only_b = bank.recall(q, "proj", RecallOptions(documents=frozenset({"doc-b"})))
    assert only_b.hits and {h.memory.document for h in only_b.hits} == {"doc-b"}
    ops = bank.recall(q, "proj", RecallOptions(tags=frozenset({"ops"})))
    assert {h.memory.document for h in ops.hits} == {"doc-b"}
    window = bank.recall(
        q,
        "proj",
        RecallOptions(
            since=datetime(2026, 3, 2, tzinfo=UTC), until=datetime(2026, 3, 4, tzinfo=UTC)
        ),
    )
    days = sorted(h.time.day for h in window.hits if h.time)
    assert days and set(days) <= {2, 3, 4}


def test_budget_is_never_exceeded(bank: MemoryBank) -> None:
    for budget in (5, 20, 40, 1000):
        result = bank.recall(
            "database pagination deploy timezone rate limit", "proj", RecallOptions(budget=budget)
        )
        assert sum(count_text(h.text) for h in result.hits) <= budget
        assert result.tokens <= budget
    small = bank.recall("database", "proj", RecallOptions(budget=1))
    assert small.hits == []


def test_the_memory_block_renders_and_is_stripped_from_later_retains(
    bank: MemoryBank, tmp_path: Path
) -> None:
    result = bank.recall("what is the database path variable?", "proj")
    block = result.block(now=datetime(2026, 11, 29, tzinfo=UTC))
    assert block.startswith("<lamina_memories>") and "INKWELL_DB_PATH" in block
    echo = [
        Message(
            id="e1",
            role=Role.USER,
            blocks=(TextBlock(f"{block}\n\nthanks, and the port?"),),
            kind=Kind.PROMPT,
        ),
    ]
    bank.retain_messages(echo, "proj", "doc-c")
    (memory,) = [m for m in bank.memories("proj") if m.document == "doc-c"]
    assert memory.text == "user: thanks, and the port?"


def test_index_follows_changes_made_by_another_process(bank: MemoryBank, database: str) -> None:
    before = bank.recall("kubernetes helm chart", "proj")  # builds the in-process index
    assert all("Helm" not in h.text for h in before.hits)
    other = MemoryBank(open_store(database), HashEmbedder())
    other.retain_messages(
        conversation("doc-k", [("We will ship a Helm chart for Kubernetes later.", "2026-03-09")]),
        "proj",
        "doc-k",
    )
    hits = bank.recall("kubernetes helm chart", "proj").hits
    assert hits and hits[0].memory.document == "doc-k"
    other.forget_document("proj", "doc-k")
    assert all(h.memory.document != "doc-k" for h in bank.recall("kubernetes helm", "proj").hits)


def dated_notes(notes: list[tuple[str, datetime]]) -> list[Message]:
    return [
        Message(
            id=f"n{n}",
            role=Role.USER,
            blocks=(TextBlock(text),),
            kind=Kind.PROMPT,
            timestamp=when,
            session_id="notes",
        )
        for n, (text, when) in enumerate(notes)
    ]


def test_a_long_range_is_not_filled_with_whatever_was_stored_first_in_it(database: str) -> None:
    """Inside a question's range every memory gets the same time score, so the time channel
    cannot tell which of a long range's memories matter: when the range holds more than the
    channel's depth it proposes none of them (it used to propose the first `depth` stored),
    and the memories the words find inside it still get its score."""
    words = ["harbour", "violin", "granite", "orchid", "lantern", "meadow", "copper", "saffron"]
    notes = [
        (f"Note about the {words[i % 8]} number {i}.", datetime(2026, 5, 1 + i, tzinfo=UTC))
        for i in range(24)
    ]
    notes.append(("The CSV importer now streams its rows.", datetime(2026, 5, 29, tzinfo=UTC)))
    notes.append(("The CSV importer got a progress bar.", datetime(2026, 7, 9, tzinfo=UTC)))
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages(dated_notes(notes), "proj", "notes")
    options = RecallOptions(depth=10, now=datetime(2026, 8, 1, tzinfo=UTC))
    hits = bank.recall("what changed in the importer in May", "proj", options).hits
    assert hits[0].text.endswith("The CSV importer now streams its rows.")
    assert "time" in hits[0].channels
    # Every result was found by its words or its vector, none for being stored early in May.
    assert all(set(h.channels) - {"time"} for h in hits)
    # A range holding no more than the depth still brings its memories by their date alone.
    few = bank.recall("what happened in July", "proj", options).hits
    assert few[0].text.endswith("The CSV importer got a progress bar.")
    assert any(set(h.channels) == {"time"} for h in few)


def test_a_list_question_gets_answers_from_different_days_first(database: str) -> None:
    """Evidence for "what things have I painted?" is spread over days, while one day's
    similar lines crowd the top: the first results of a list question are spread over
    episodes. Other questions keep the fused order."""
    may1, may20 = datetime(2026, 5, 1, 10, tzinfo=UTC), datetime(2026, 5, 20, 10, tzinfo=UTC)
    sunsets = [
        "I painted a sunset over the lake yesterday.",
        "The sunset I painted took me four hours.",
        "I painted that sunset again with more orange.",
        "My painted sunset hangs in the hall now.",
        "I have painted sunsets every week this spring.",
        "I painted a small sunset for my sister too.",
    ]
    notes = [(text, may1) for text in sunsets]
    notes += [("We talked about the weather and the garden.", may20)]
    notes += [("I painted a horse running on the beach.", may20)]
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages(dated_notes(notes), "proj", "notes")

    def days(query: str, spread: bool) -> list[int]:
        hits = bank.recall(query, "proj", RecallOptions(spread=spread)).hits
        return [h.time.day for h in hits if h.time is not None]

    assert days("What things have I painted?", True)[:2] == [1, 20]
    assert days("What things have I painted?", False)[:2] == [1, 1]
    single = "What did I paint over the lake?"
    assert days(single, True) == days(single, False)


COMPACTION = CLAUDE_CODE / "spotter-258c7280.subagent-acompact-fffbd0.jsonl"
"""A compaction agent's transcript: a long summary of the session `spotter-258c7280`."""
COMPACTED = CLAUDE_CODE / "spotter-258c7280.jsonl"


@needs_shared
def test_a_compaction_summary_gives_way_to_the_conversation_it_restates(tmp_path: Path) -> None:
    bank = MemoryBank(open_store(str(tmp_path / "lamina.db")), HashEmbedder())
    question = "Which dependency did the LiveView tests need added to mix.exs?"
    summary = bank.retain_file(COMPACTION, "proj").document
    # The session it summarises is not in the bank: the summary is what remains of it.
    alone = bank.recall(question, "proj", RecallOptions(budget=600)).hits
    assert alone and all(h.memory.speakers == ("summary",) for h in alone)
    assert any("lazy_html" in h.text for h in alone)
    # With the session retained, what was said and done there comes first.
    session = bank.retain_file(COMPACTED, "proj").document
    both = bank.recall(question, "proj", RecallOptions(budget=600)).hits
    assert both and not any(h.memory.document == summary for h in both)
    assert any("lazy_html" in h.text for h in both)
    # Forgotten again, the summary stands for it again.
    bank.forget_document("proj", session)
    again = bank.recall(question, "proj", RecallOptions(budget=600)).hits
    assert [h.memory.id for h in again] == [h.memory.id for h in alone]


def test_a_prompt_sent_twice_is_recalled_once(cc: CC, tmp_path: Path) -> None:
    prompt = "Rename the column user_email to contact_email in the accounts table."
    cc.user(prompt)
    cc.assistant("Renamed it in the migration and the model.")
    cc.user("Now run the tests.")
    cc.assistant("All 42 tests pass.")
    cc.user(prompt)
    cc.assistant("It is already renamed: nothing to do.")
    bank = MemoryBank(open_store(str(tmp_path / "lamina.db")), HashEmbedder())
    bank.retain_file(cc.write(tmp_path / "s.jsonl"), "proj")
    hits = bank.recall("contact_email column rename", "proj", RecallOptions(budget=2_000)).hits
    # The second time it was sent adds nothing the first did not say.
    assert [h.text for h in hits].count(f"user: {prompt}") == 1
