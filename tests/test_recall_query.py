"""Recall-query composition: cap, order, no duplicate prompt, stripping, bounded work."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from lamina import Kind, Message, QueryOptions, Role, TextBlock, compose_recall_query
from lamina.bank.query import recall_query_for_file
from lamina.turns import is_turn_start

from .conftest import CC, CLAUDE_CODE, needs_shared, shared_transcripts


def msg(i: int, role: Role, text: str, kind: Kind | None = None) -> Message:
    default = Kind.PROMPT if role is Role.USER else Kind.REPLY
    return Message(id=str(i), role=role, blocks=(TextBlock(text),), kind=kind or default)


def chat(*pairs: tuple[str, str]) -> list[Message]:
    out: list[Message] = []
    for prompt, reply in pairs:
        out.append(msg(len(out), Role.USER, prompt))
        out.append(msg(len(out), Role.ASSISTANT, reply))
    return out


def test_context_then_prompt_in_order_with_role_labels() -> None:
    messages = chat(("a1", "b1"), ("a2", "b2"), ("a3", "b3"))
    q = compose_recall_query(messages, "what next?", QueryOptions(context_turns=2))
    assert q.query == "user: a2\nassistant: b2\nuser: a3\nassistant: b3\nuser: what next?"
    assert q.turns == 2 and q.chars == len(q.query) and not q.truncated


def test_default_prompt_is_the_last_turn_and_is_never_repeated() -> None:
    messages = chat(("first", "r1"), ("second", "r2"))
    messages.append(msg(9, Role.USER, "third"))
    q = compose_recall_query(messages, None, QueryOptions(context_turns=1))
    assert q.prompt == "third"
    assert q.query == "user: second\nassistant: r2\nuser: third"
    # Given explicitly while the transcript already holds it: still once.
    again = compose_recall_query(messages, "third", QueryOptions(context_turns=1))
    assert again.query == q.query
    assert again.query.count("third") == 1


def test_the_same_words_asked_again_after_a_reply_are_a_new_asking() -> None:
    """ "continue" typed again after the agent answered the last "continue": the query carries
    that answer (the last turn is an earlier asking, not this prompt already written down).
    A file's end then decides the query without reading back to that earlier prompt."""
    messages = chat(("fix the parser", "Fixed the tokenizer."), ("continue", "Now the lexer."))
    q = compose_recall_query(messages, "continue", QueryOptions(context_turns=1))
    assert q.query == "user: continue\nassistant: Now the lexer.\nuser: continue"
    # Not yet answered: the transcript already holds this prompt, which is not repeated.
    held = compose_recall_query(messages[:-1], "continue", QueryOptions(context_turns=1))
    assert held.query == "user: fix the parser\nassistant: Fixed the tokenizer.\nuser: continue"


def test_the_latest_prompt_is_not_counted_among_the_turns() -> None:
    messages = chat(("p1", "r1"), ("p2", "r2"), ("p3", "r3"))
    zero = compose_recall_query(messages, "now", QueryOptions(context_turns=0))
    assert zero.query == "user: now" and zero.turns == 0
    three = compose_recall_query(messages, "now", QueryOptions(context_turns=3))
    assert three.turns == 3 and three.query.startswith("user: p1")


@pytest.mark.parametrize("cap", [15, 30, 41, 60, 100, 800])
def test_cap_covers_labels_and_separators_and_drops_oldest_whole_entries(cap: int) -> None:
    messages = chat(("alpha", "bravo"), ("charlie", "delta"), ("echo", "foxtrot"))
    q = compose_recall_query(messages, "golf?", QueryOptions(context_turns=3, max_chars=cap))
    assert len(q.query) <= cap
    assert q.query.endswith("user: golf?")
    lines = q.query.split("\n")
    everything = [
        "user: alpha",
        "assistant: bravo",
        "user: charlie",
        "assistant: delta",
        "user: echo",
        "assistant: foxtrot",
        "user: golf?",
    ]
    # What is kept is a whole-entry suffix of the full query: oldest dropped first.
    assert lines == everything[len(everything) - len(lines) :]
    assert q.truncated == (len(lines) < len(everything))


def test_an_entry_that_does_not_fit_is_shortened_keeping_its_start_not_dropped() -> None:
    reply = "The retry limit is 5 attempts with jittered backoff. " + "Details follow. " * 200
    messages = chat(("what did we decide about retries?", reply))
    q = compose_recall_query(messages, "and the timeout?", QueryOptions(max_chars=800))
    assert q.truncated and len(q.query) <= 800
    assert len(q.query) > 700, "the room left is used, not thrown away"
    lines = q.query.split("\n")
    assert lines[0].startswith("assistant: The retry limit is 5 attempts with jittered backoff.")
    assert lines[0].endswith("…") and lines[-1] == "user: and the timeout?"
    assert q.turns == 1 and len(q.context) == 1
    # Newer entries that fit stay whole; the one that does not is shortened; older ones go.
    messages = chat(("first question", reply), ("second question", "short answer"))
    q = compose_recall_query(messages, "next?", QueryOptions(max_chars=400))
    lines = q.query.split("\n")
    assert lines[1:] == ["user: second question", "assistant: short answer", "user: next?"]
    assert lines[0].startswith("assistant: The retry limit") and len(q.query) <= 400
    assert "first question" not in q.query and q.turns == 2


def test_too_little_room_drops_the_entry_rather_than_keep_a_stub() -> None:
    messages = chat(("q", "x" * 500))
    q = compose_recall_query(messages, "p" * 60, QueryOptions(max_chars=100))
    assert q.query == "user: " + "p" * 60 and q.truncated


@needs_shared
def test_a_long_reply_no_longer_leaves_a_shared_sessions_query_as_the_bare_prompt() -> None:
    q = recall_query_for_file(str(CLAUDE_CODE / "ccviewer-fe5e1c67.jsonl"))
    assert q.context, "the newest context is kept, shortened"
    assert 700 < q.chars <= 800  # was 57: the prompt alone


def test_a_prompt_over_the_cap_alone_is_cut_keeping_both_ends() -> None:
    long_prompt = "START " + "x" * 3000 + " END"
    q = compose_recall_query(chat(("a", "b")), long_prompt, QueryOptions(max_chars=200))
    assert len(q.query) == 200 and q.truncated
    assert q.query.startswith("user: START") and q.query.endswith("END")
    assert q.context == ()


def test_only_roles_asked_for() -> None:
    messages = chat(("p1", "r1"), ("p2", "r2"))
    q = compose_recall_query(
        messages, "go", QueryOptions(context_turns=2, roles=frozenset({Role.USER}))
    )
    assert q.query == "user: p1\nuser: p2\nuser: go"


def test_memory_blocks_and_synthetic_records_never_enter_the_query() -> None:
    block = "<lamina_memories>\n- [2026-01-01] secret memory\n</lamina_memories>"
    messages = [
        msg(0, Role.USER, f"{block}\nreal question one"),
        msg(1, Role.ASSISTANT, "answer one"),
        msg(2, Role.USER, "This session is being continued...", Kind.COMPACT_SUMMARY),
        msg(3, Role.ASSISTANT, "subagent chatter", Kind.SIDECHAIN),
        msg(4, Role.USER, block),
    ]
    q = compose_recall_query(messages, f"{block}\n\nnext question", QueryOptions(context_turns=3))
    assert "secret memory" not in q.query and "lamina_memories" not in q.query
    assert "subagent chatter" not in q.query and "continued" not in q.query
    assert q.query == "user: real question one\nassistant: answer one\nuser: next question"


class CountingList(Sequence[Message]):
    """A transcript that counts how many messages a caller looked at."""

    def __init__(self, items: list[Message]) -> None:
        self.items = items
        self.touched: set[int] = set()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Message:  # type: ignore[override]
        self.touched.add(i if i >= 0 else len(self.items) + i)
        return self.items[i]


def test_work_is_bounded_on_huge_transcripts() -> None:
    pairs = [(f"prompt {n}", f"reply {n}") for n in range(20_000)]
    messages = CountingList(chat(*pairs))
    q = compose_recall_query(messages, "latest", QueryOptions(context_turns=3))
    assert q.turns == 3
    assert len(messages.touched) <= 8  # the last three turns and nothing before them
    capped = CountingList(chat(*pairs))
    compose_recall_query(capped, "latest", QueryOptions(context_turns=10_000, max_chars=60))
    assert len(capped.touched) <= 8  # stops once the cap is reached


def test_file_query_reads_claude_code_from_the_end(cc: CC, tmp_path: Path) -> None:
    for n in range(3000):
        cc.user(f"prompt number {n}")
        cc.assistant(f"reply number {n}")
    path = cc.write(tmp_path / "long.jsonl")
    q = recall_query_for_file(str(path), None, QueryOptions(context_turns=2), window=4096)
    assert q.query == (
        "user: prompt number 2997\nassistant: reply number 2997\n"
        "user: prompt number 2998\nassistant: reply number 2998\nuser: prompt number 2999"
    )


@needs_shared
@pytest.mark.parametrize("path", shared_transcripts(), ids=lambda p: p.name)
@pytest.mark.parametrize("turns", [1, 3, 5])
def test_file_query_matches_the_in_memory_query_on_shared_sessions(path: Path, turns: int) -> None:
    from lamina import read_transcript

    options = QueryOptions(context_turns=turns, max_chars=4000)
    messages = read_transcript(str(path)).messages
    expected = compose_recall_query(messages, None, options)
    got = recall_query_for_file(str(path), None, options, window=8192)
    assert got.query == expected.query and got.turns == expected.turns
    assert got.chars <= 4000
    # A compaction agent's transcript has no turn: its request for a summary is the host's.
    assert any(is_turn_start(m) for m in messages) != path.name.startswith(
        "spotter-258c7280.subagent-acompact"
    )


@needs_shared
def test_spotter_query_holds_the_typed_prompt_not_tool_results() -> None:
    q = recall_query_for_file(str(CLAUDE_CODE / "spotter-258c7280.jsonl"))
    assert q.prompt == "did you push?"
    assert q.query.endswith("user: did you push?")
    assert q.chars <= 800
    assert "tool_use_id" not in q.query and "<task-notification>" not in q.query


def test_the_dense_channel_reads_the_prompt_at_the_end_of_a_long_query(tmp_path: Path) -> None:
    """A composed query is context first and the prompt last; with `dense_chars` (the hook's)
    the dense channel embeds its newest part, so a long context does not crowd the prompt
    out of what the model reads."""
    from lamina.bank.bank import MemoryBank
    from lamina.bank.recall import RecallOptions
    from lamina.embed import get_embedder
    from lamina.integrations.claude_code.prompt import DENSE_QUERY_CHARS
    from lamina.store.sqlite import SQLiteStore

    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), get_embedder("minilm-l3"))
    bank.retain_messages(
        chat(
            ("Tomatoes want sun, compost and deep watering twice a week.", "Noted."),
            ("We picked PostgreSQL for the billing service, for its row locks.", "Good."),
        ),
        "p",
        "chat",
    )
    context = "user: " + "my tomato seedlings wilt in the afternoon sun and need compost " * 12
    query = f"{context}\nuser: which database holds the invoices?"
    dense_only = {"dense": 1.0, "lexical": 0.0, "time": 0.0, "entities": 0.0}

    def top(chars: int | None) -> str:
        options = RecallOptions(limit=1, channel_weights=dense_only, dense_chars=chars)
        return bank.recall(query, "p", options).hits[0].memory.text

    assert len(query) > DENSE_QUERY_CHARS
    assert "PostgreSQL" in top(48)
    assert "Tomatoes" in top(None)  # the model's first 128 tokens: all context
    bank.close()
