"""The entity channel: names and identifiers found whole, where stemmed words lose them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.plan import recall_from_store
from lamina.bank.recall import RecallOptions, without_common
from lamina.embed import HashEmbedder
from lamina.memories import Vector
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.store import open_store
from lamina.store.search import SearchStore
from lamina.text.entities import extract_entities

from .oracle import BankIndex, recall_from_index

# A coding session: one exchange names each identifier, between two about other things; others
# use the identifier's words loosely and often, so that words alone rank them first.
EXCHANGES = [
    (
        "where does the inkwell db path get set?",
        "Inkwell sets the db path from the config file: set db_path there, or the db path "
        "is set to the data folder. The inkwell db path can also be set per project.",
    ),
    (
        "the DB path is wrong on Windows, who sets it?",
        "Inkwell sets the db path with forward slashes; the path needs the OS separator. The "
        "db path setter in inkwell's settings module now normalises the path it sets.",
    ),
    ("run the tests", "All 212 tests pass on Linux and macOS."),
    (
        "can we override it in CI?",
        "Yes: set INKWELL_DB_PATH in the workflow's env block; it overrides the config.",
    ),
    ("update the README too", "Done: the README's install section is rewritten."),
    (
        "where is the session store?",
        "Sessions are stored by the store module: a session store keeps each session open "
        "until the session ends, and the store module changes nothing after that.",
    ),
    (
        "what changed in the store for sessions?",
        "The session store changed: sessions in the store now change their state only "
        "through the store, and the session store's change log lists each change.",
    ),
    ("and the tests now?", "All 214 tests pass on Linux and macOS."),
    (
        "what did you do about the locking bug?",
        "SessionStore.close now releases the file lock before flushing, in "
        "src/inkwell/storage/sessions.py.",
    ),
    ("the changelog?", "Done: the changelog has an entry for it."),
    (
        "and the storage sessions folder?",
        "Inkwell storage keeps sessions in the sessions folder under storage; the storage "
        "layer names each sessions file by date, and inkwell's storage lists sessions.",
    ),
    (
        "any bug left in storage?",
        "One bug: inkwell's storage sessions bug, where storage drops sessions; the bug is "
        "in the sessions storage code of inkwell, a storage bug we track.",
    ),
]


def session(doc: str) -> list[Message]:
    out: list[Message] = []
    when = datetime(2026, 4, 2, 9, tzinfo=UTC)
    for n, (prompt, reply) in enumerate(EXCHANGES):
        for role, kind, text, tag in (
            (Role.USER, Kind.PROMPT, prompt, "u"),
            (Role.ASSISTANT, Kind.REPLY, reply, "a"),
        ):
            out.append(
                Message(
                    id=f"{doc}-{tag}{n}",
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
    b.retain_messages(session("s1"), "code", "s1")
    return b


WITHOUT_ENTITIES = RecallOptions(channel_weights={"dense": 1.0, "lexical": 1.0, "time": 1.0})


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("where is INKWELL_DB_PATH set?", "INKWELL_DB_PATH"),
        ("what changed in SessionStore?", "SessionStore.close"),
    ],
)
def test_a_named_identifier_finds_the_memory_that_names_it(
    bank: MemoryBank, query: str, expected: str
) -> None:
    top = bank.recall(query, "code").hits[0]
    assert expected in top.text
    assert top.channels["entities"]["rank"] == 1
    # Words alone rank a memory that only uses the identifier's words above it.
    words_only = bank.recall(query, "code", WITHOUT_ENTITIES)
    assert expected not in words_only.hits[0].text


@pytest.mark.parametrize(
    "query", ["what did we do in src/inkwell/storage/sessions.py?", "the bug in sessions.py"]
)
def test_a_file_is_found_by_its_path_or_its_name(bank: MemoryBank, query: str) -> None:
    top = bank.recall(query, "code").hits[0]
    assert "src/inkwell/storage/sessions.py" in top.text
    assert top.channels["entities"]["rank"] == 1


def test_a_query_without_entities_leaves_the_ranking_to_the_other_channels(
    bank: MemoryBank,
) -> None:
    query = "how is the database path chosen?"
    with_channel = bank.recall(query, "code")
    without = bank.recall(query, "code", WITHOUT_ENTITIES)
    assert [h.memory.id for h in with_channel.hits] == [h.memory.id for h in without.hits]
    assert all("entities" not in h.channels for h in with_channel.hits)


def test_retain_stores_the_entities_of_each_memory(bank: MemoryBank) -> None:
    line = next(
        m for m in bank.memories("code") if m.kind == "line" and "SessionStore.close" in m.text
    )
    named = set(line.entities)
    assert {"sessionstore.close", "sessionstore", "src/inkwell/storage/sessions.py"} <= named
    assert "sessions.py" in named
    assert set(line.speakers) <= named  # who said it


@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        (
            'Caroline: I read "Nothing is Impossible" by Dr. Seuss in New York. Thanks Mel!',
            {"nothing is impossible", "dr seuss", "seuss", "new york", "mel"},
            {"caroline", "thanks", "i", "nothing", "new york thanks mel"},
        ),
        (
            "Melanie: Wow, that's great. My dog Oscar loved John's bookshop in May.",
            {"oscar", "john"},
            {"melanie", "wow", "may", "john's", "my"},
        ),
        (
            "set INKWELL_DB_PATH, edit lamina/bank/recall.py and ~/.config/inkwell/db, call "
            "os.environ and HTTPServer; and/or e.g. version 3.12 with 5.5mm, --dry-run",
            {
                "inkwell_db_path",
                "lamina/bank/recall.py",
                "recall.py",
                "~/.config/inkwell/db",
                "os.environ",
                "httpserver",
            },
            {"and/or", "e.g", "3.12", "5.5mm", "--dry-run", "dry-run"},
        ),
    ],
)
def test_entities_are_names_and_identifiers(text: str, present: set[str], absent: set[str]) -> None:
    found = set(extract_entities(text))
    assert present <= found
    assert not absent & found


def test_speakers_are_entities_of_their_memories() -> None:
    assert extract_entities("Caroline: hi", ["Caroline"]) == ("caroline",)


def test_reindex_entities_brings_an_old_bank_up_to_date(bank: MemoryBank) -> None:
    """Memories stored before the entity channel have no entities until `reindex --entities`."""
    query = "where is INKWELL_DB_PATH set?"
    stored = list(bank.memories("code", with_embeddings=False))
    assert bank.store.set_entities("code", {m.id: () for m in stored}) == len(stored)
    old = bank.recall(query, "code")
    assert all("entities" not in h.channels for h in old.hits)
    assert "INKWELL_DB_PATH" not in old.hits[0].text
    named = sum(1 for m in stored if m.entities)
    assert bank.refresh_entities("code") == named
    assert bank.refresh_entities("code") == 0  # nothing left to change
    top = bank.recall(query, "code").hits[0]
    assert "INKWELL_DB_PATH" in top.text and top.channels["entities"]["rank"] == 1
    again = {m.id: m.entities for m in bank.memories("code", with_embeddings=False)}
    assert again == {m.id: m.entities for m in stored}


def test_an_entity_most_memories_name_is_left_out(database: str) -> None:
    """A name said in most memories (a speaker's) tells none apart: the entity channel skips
    it, the same on both stores, and still reads the query's rarer entities."""
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages(walks(), "walks", "walks")
    common = bank.recall("where did Caroline walk?", "walks")
    assert common.hits and all("entities" not in h.channels for h in common.hits)
    rare = bank.recall("where did Caroline walk with Oscar?", "walks")
    named = [h for h in rare.hits if "entities" in h.channels]
    assert "Oscar" in rare.hits[0].text and named
    # (a result's lines shown above are left out of its text, so look at what is stored)
    oscar = {m.id for m in bank.memories("walks") if "Oscar" in m.text}
    assert {h.memory.id for h in named} <= oscar
    bank.close()


def test_the_dense_query_says_they_for_a_name_most_memories_name() -> None:
    counts = {"\x01caroline": 100, "\x01oscar": 3}
    df = lambda term: counts.get(term, 0)  # noqa: E731
    found = without_common(
        "When did Caroline's dog meet caroline and Oscar?", ["caroline", "oscar"], df, 120
    )
    assert found == "When did their dog meet they and Oscar?"
    assert (
        without_common("Where did Carolines go?", ["caroline"], df, 120)
        == "Where did Carolines go?"
    )
    assert (
        without_common("Where did Caroline go?", ["caroline"], df, 10_000)
        == "Where did Caroline go?"
    )


class Recording(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Vector:
        self.queries.append(text)
        return super().embed_query(text)


def test_both_recall_paths_embed_the_query_without_the_common_name(database: str) -> None:
    store = open_store(database)
    embedder = Recording()
    MemoryBank(store, embedder).retain_messages(walks(), "walks", "walks")
    assert isinstance(store, SearchStore)
    index = BankIndex("walks")
    index.refresh(store)
    query = "where did Caroline's dog Oscar walk?"
    embedder.queries.clear()
    want = recall_from_index(index, query, embedder, RecallOptions())
    got = recall_from_store(store, "walks", query, embedder, RecallOptions())
    assert embedder.queries == ["where did their dog Oscar walk?"] * 2
    # The same top 10 (deeper, memories of equal text tie and may come in another order).
    assert [h.memory.id for h in got.hits[:10]] == [h.memory.id for h in want.hits[:10]]
    assert [round(h.score, 5) for h in got.hits] == [round(h.score, 5) for h in want.hits]
    store.close()


def walks() -> list[Message]:
    when = datetime(2026, 4, 2, 9, tzinfo=UTC)
    messages: list[Message] = []
    for n in range(120):
        dog = " with her dog Oscar" if n % 40 == 0 else ""
        for role, kind, text in (
            (Role.USER, Kind.PROMPT, f"Caroline walked to the park on day {n}{dog}."),
            (Role.ASSISTANT, Kind.REPLY, "Noted."),
        ):
            messages.append(
                Message(
                    id=f"m{n}-{role.value}",
                    role=role,
                    blocks=(TextBlock(text),),
                    kind=kind,
                    timestamp=when,
                    session_id="walks",
                )
            )
    return messages
