"""Memory units a budget can hold: long agentic turns cut into parts under a token cap that keep
every stated word; what the user said through tools is remembered; a memory too large for what
is left of the budget comes back shortened around the query; banks retained under older unit
rules are rebuilt on the next retain, without duplicates."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.query import QueryOptions, recall_query_for_file
from lamina.bank.recall import RecallOptions
from lamina.bank.retain import RetainOptions
from lamina.embed import HashEmbedder
from lamina.messages import SYNTHETIC_KINDS, Message, Role
from lamina.readers import read_transcript
from lamina.store import open_store
from lamina.text.shorten import shorten
from lamina.text.units import UnitOptions, build_units, split_text
from lamina.tokens import count_text
from lamina.turns import conversational_text

from .conftest import CC, CLAUDE_CODE, needs_shared, shared_transcripts

OLD_RULES = UnitOptions(
    max_tokens=None,
    said_through_tools=False,
    lines=False,
    windows=2,
    subagents=False,
    summaries=False,
)
"""The unit rules before units had a token cap: one unit per turn, cut to 8,000 characters."""

AGENTIC = CLAUDE_CODE / "spotter-258c7280.jsonl"
PLANNED = CLAUDE_CODE / "spotter-8463c716.jsonl"
ORCHESTRATED = CLAUDE_CODE / "ccviewer-fe5e1c67.jsonl"
"""An orchestrating session whose subagents' records are written inline (sidechain)."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"\S+", text))


@needs_shared
def test_a_long_agentic_turn_becomes_parts_under_the_cap_that_keep_every_stated_word() -> None:
    messages = read_transcript(str(AGENTIC)).messages
    options = UnitOptions()
    assert options.max_tokens is not None
    units, _segments = build_units(messages, options)
    parts = [u for u in units if u.kind == "part"]
    assert len(parts) >= 8  # one prompt, hundreds of tool calls: many parts, not 2-3 turns
    for unit in units:
        if unit.kind in ("turn", "line", "part"):
            assert count_text(unit.text) <= options.max_tokens, unit.key
    covering: dict[str, list[str]] = {}
    for unit in units:
        if unit.kind in ("turn", "line", "part"):
            for record in unit.record_ids:
                covering.setdefault(record, []).append(unit.text)
    for message in messages:
        if message.kind in SYNTHETIC_KINDS or message.role is Role.SYSTEM:
            continue
        said = conversational_text(message)
        if said:
            held = _words("\n".join(covering.get(message.id, [])))
            assert _words(said) <= held, f"line {message.source.line}: stated words dropped"
    # Together the parts span every record of the turns, tool activity included, as the
    # turn units did.
    old, _ = build_units(messages, OLD_RULES)
    assert {r for u in units for r in u.record_ids} == {r for u in old for r in u.record_ids}


@needs_shared
@pytest.mark.parametrize("cap", [32, 64, 256])
def test_no_unit_of_any_shared_session_is_over_the_cap(cap: int) -> None:
    for path in shared_transcripts():
        units, _ = build_units(read_transcript(str(path)).messages, UnitOptions(max_tokens=cap))
        for unit in units:
            if unit.kind != "window":
                assert count_text(unit.text) <= cap, (path.name, unit.key)
            else:
                assert count_text(unit.text) <= 2 * cap + 1, (path.name, unit.key)


def test_a_cap_too_small_to_hold_a_part_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        UnitOptions(max_tokens=8)


def test_split_text_keeps_every_word_within_the_limit() -> None:
    text = "\n\n".join(
        [
            "First paragraph. " * 40,
            "line one\nline two " * 30,
            "x" * 3000,  # no boundary at all
            "A last, short paragraph.",
        ]
    )
    chunks = split_text(text, 50)
    assert all(count_text(c) <= 50 for c in chunks)
    assert "".join("".join(c.split()) for c in chunks) == "".join(text.split())


def test_a_short_turn_becomes_one_line_per_speaker_and_a_window_holding_the_turn(cc: CC) -> None:
    cc.user("Which database should the notes API use?")
    cc.assistant("Checking the options.")
    cc.assistant("SQLite: one file, no server, and FTS5 for search.")
    messages = read_transcript_lines(cc)
    new, _ = build_units(messages, UnitOptions())
    old, _ = build_units(messages, OLD_RULES)
    assert [(u.kind, u.text) for u in new] == [
        ("line", "user: Which database should the notes API use?"),
        (
            "line",
            "assistant: Checking the options.\n"
            "assistant: SQLite: one file, no server, and FTS5 for search.",
        ),
        ("window", old[0].text),  # the whole turn, as one unit held it before
    ]
    assert [u.speakers for u in new[:2]] == [("user",), ("assistant",)]
    assert {r for u in new for r in u.record_ids} == set(old[0].record_ids)


def read_transcript_lines(cc: CC) -> list[Message]:
    with tempfile.TemporaryDirectory() as folder:
        path = cc.write(Path(folder) / "s.jsonl")
        return read_transcript(str(path)).messages


@pytest.fixture
def bank(tmp_path: Path) -> MemoryBank:
    return MemoryBank(open_store(str(tmp_path / "db" / "lamina.db")), HashEmbedder())


def test_an_answer_given_through_ask_user_question_is_recallable(
    cc: CC, bank: MemoryBank, tmp_path: Path
) -> None:
    cc.user("Set up persistence for the notes API.")
    question = "Which database should the notes API use?"
    cc.tool_use(
        "toolu_ask",
        "AskUserQuestion",
        questions=[{"question": question, "header": "Database", "options": []}],
    )
    answer = "Postgres with pgvector, we already run it"
    cc.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_ask",
                "content": f'User has answered your questions: "{question}"="{answer}". '
                "You can now continue with the user's answers in mind.",
            }
        ],
        toolUseResult={"questions": [{"question": question}], "answers": {question: answer}},
    )
    cc.assistant("Setting up the storage layer now.")
    path = cc.write(tmp_path / "s.jsonl")
    bank.retain_file(path, "proj")
    result = bank.recall("which database did the user choose?", "proj")
    assert any(answer in hit.text for hit in result.hits)
    # It is memory text, not a turn start: the session is still one turn.
    _units, segs = build_units(read_transcript(str(path)).messages)
    assert len(segs) == 1


@needs_shared
def test_plan_approvals_and_messages_typed_while_the_agent_worked_are_remembered(
    bank: MemoryBank,
) -> None:
    bank.retain_file(PLANNED, "proj")
    bank.retain_file(AGENTIC, "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert "user: approved the plan" in texts
    assert "### Strategy: Parallel enriched path" in texts  # the plan that was approved
    assert "new beads for the epic were added. tackle them" in texts  # typed into the queue


@needs_shared
def test_what_an_inline_subagent_said_and_did_is_remembered_but_starts_no_turn(
    bank: MemoryBank,
) -> None:
    messages = read_transcript(str(ORCHESTRATED)).messages
    _units, segments = build_units(messages)
    without, same_segments = build_units(messages, UnitOptions(subagents=False))
    assert segments == same_segments  # turns are what they were
    bank.retain_file(ORCHESTRATED, "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    # A subagent's report (line 36) and its reason for a second hook file (line 382).
    assert "subagent: ## Component Summary" in texts
    assert "Let me create a simplified hook in a new file" in texts
    # What the subagents ran shows among the actions.
    assert "npx create-next-app@latest" in texts
    assert "simplified hook" not in "\n".join(u.text for u in without)


@needs_shared
def test_what_a_long_turn_did_with_tools_is_recallable_in_words(bank: MemoryBank) -> None:
    bank.retain_file(AGENTIC, "proj")
    activity = [m for m in bank.memories("proj") if m.kind == "activity"]
    texts = "\n".join(m.text for m in activity)
    # What a command was for, a commit message written on the command line, an error's line.
    assert "Bash (Push with upstream tracking): git push --set-upstream origin spotter-gqc" in texts
    assert "feat: close review session by closing all open annotations (spotter-gqc.6)" in texts
    assert "error: fatal: The current branch spotter-gqc has no upstream branch." in texts
    assert all(m.text.startswith("activity:\n") for m in activity)
    # The parts keep their room for what was said: the actions are in the activity units.
    parts = [m for m in bank.memories("proj") if m.kind == "part"]
    assert parts and not any("\nactions: " in m.text for m in parts)
    # A part of the same stretch shown first does not hide it.
    result = bank.recall("why was the first git push of the branch refused", "proj")
    assert any("has no upstream branch" in hit.text for hit in result.hits)


@needs_shared
def test_turning_activity_units_off_leaves_none_behind(database: str, tmp_path: Path) -> None:
    store = open_store(database)
    MemoryBank(store, HashEmbedder()).retain_file(AGENTIC, "proj")
    plain = UnitOptions(activity=False)
    again = MemoryBank(store, HashEmbedder(), retain_options=RetainOptions(units=plain))
    assert again.retain_file(AGENTIC, "proj").status == "reread"
    kept = {m.id: m.text for m in again.memories("proj")}
    assert "activity" not in {m.kind for m in again.memories("proj")}
    fresh = MemoryBank(
        open_store(str(tmp_path / "fresh.db")),
        HashEmbedder(),
        retain_options=RetainOptions(units=plain),
    )
    fresh.retain_file(AGENTIC, "proj")
    assert kept == {m.id: m.text for m in fresh.memories("proj")}


@needs_shared
def test_a_memory_is_shortened_the_same_way_in_every_process(tmp_path: Path) -> None:
    """The cold hook and the warm server are separate processes, with string hashing seeded
    apart: a shortened memory must come out the same in both (it once depended on a set's
    order, and a prompt got another cut of the same memory now and then)."""
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    for path in shared_transcripts()[:4]:
        bank.retain_file(path, "p")
    texts = [m.text for m in bank.memories("p", with_embeddings=False) if m.kind == "activity"]
    bank.close()
    queries = [
        recall_query_for_file(str(shared_transcripts()[0]), prompt, QueryOptions()).query
        for prompt in ("how did we fix the failing tests?", "what does the plan say next?")
    ]
    code = (
        "import json, sys\n"
        "from lamina.text.shorten import shorten\n"
        "texts, queries = json.loads(sys.stdin.read())\n"
        "print(json.dumps([shorten(t, q, n) for t in texts for q in queries"
        " for n in range(24, 240, 3)]))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps([texts[:40], queries]),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            timeout=120,
            check=True,
        ).stdout
        for seed in range(8)
    }
    assert len(texts) > 5 and len(outputs) == 1


def test_shorten_keeps_the_part_around_the_query() -> None:
    filler = "\n".join(f"assistant: Step {n} compiled and the tests ran green." for n in range(80))
    cause = "assistant: The migration failed because SQLite cannot ALTER a column's nullability."
    text = f"user: go on\n{filler}\n{cause}\n{filler}"
    short = shorten(text, "why did the migration fail on SQLite?", 60)
    assert short is not None
    assert count_text(short) <= 60
    assert "SQLite cannot ALTER a column's nullability" in short
    assert short.startswith("[…]") and short.endswith("[…]")
    assert shorten(text, "kubernetes helm chart", 60) is None  # nothing of it is asked


def test_a_memory_larger_than_the_budget_comes_back_shortened_around_the_query(
    tmp_path: Path,
) -> None:
    bank = MemoryBank(
        open_store(str(tmp_path / "lamina.db")),
        HashEmbedder(),
        retain_options=RetainOptions(units=OLD_RULES),
    )
    cc = CC()
    cc.user("Port the importer and keep going until it is done.")
    for n in range(60):
        cc.assistant(f"Ported module {n}; its tests pass and the coverage report is unchanged.")
    cc.assistant("We set the retry limit to 7 because the upstream API drops one call in five.")
    for n in range(60, 90):
        cc.assistant(f"Ported module {n}; its tests pass and the coverage report is unchanged.")
    bank.retain_file(cc.write(tmp_path / "s.jsonl"), "proj")
    [memory] = [m for m in bank.memories("proj") if m.kind == "turn"]
    assert count_text(memory.text) > 400
    result = bank.recall("what retry limit did we set?", "proj", RecallOptions(budget=200))
    [hit] = result.hits
    assert hit.shortened and hit.tokens <= 200 and result.tokens <= 200
    # Its tokens are estimated (no tokenizer on the prompt path), never below the real count.
    assert count_text(hit.text) <= hit.tokens
    assert "retry limit to 7" in hit.text
    assert hit.as_dict()["shortened"] is True


@needs_shared
@pytest.mark.parametrize("path", [AGENTIC, PLANNED, ORCHESTRATED], ids=lambda p: p.stem)
def test_a_bank_retained_under_the_old_unit_rules_is_rebuilt_without_duplicates(
    path: Path, database: str, tmp_path: Path
) -> None:
    store = open_store(database)
    old = MemoryBank(store, HashEmbedder(), retain_options=RetainOptions(units=OLD_RULES))
    old.retain_file(path, "proj")
    records = store.count_records("proj")
    assert {m.kind for m in old.memories("proj")} <= {"turn", "window"}

    new = MemoryBank(store, HashEmbedder())
    report = new.retain_file(path, "proj")
    assert report.status == "reread"
    assert store.count_records("proj") == records  # every record still stored once
    rebuilt = {m.id: m.text for m in new.memories("proj")}

    fresh = MemoryBank(open_store(str(tmp_path / "fresh.db")), HashEmbedder())
    fresh.retain_file(path, "proj")
    assert rebuilt == {m.id: m.text for m in fresh.memories("proj")}
    assert new.retain_file(path, "proj").status == "unchanged"


@needs_shared
def test_a_long_turn_retained_as_it_grows_ends_as_a_fresh_retain_would(
    bank: MemoryBank, tmp_path: Path
) -> None:
    lines = AGENTIC.read_text(encoding="utf-8").splitlines()[:700]
    path = tmp_path / "s.jsonl"
    for cut in (3, 40, 90, 160, 300, 301, 450, 700):
        path.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
        bank.retain_file(path, "proj")
    grown = {m.id: m.text for m in bank.memories("proj")}
    fresh = MemoryBank(open_store(str(tmp_path / "fresh.db")), HashEmbedder())
    fresh.retain_file(path, "proj")
    assert grown == {m.id: m.text for m in fresh.memories("proj")}
    assert bank.store.count_records("proj") == fresh.store.count_records("proj")


def test_secrets_are_redacted_before_a_long_statement_is_cut(tmp_path: Path) -> None:
    bank = MemoryBank(
        open_store(str(tmp_path / "lamina.db")),
        HashEmbedder(),
        retain_options=RetainOptions(units=UnitOptions(max_tokens=64)),
    )
    body = "\n".join(
        f"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{n:04d}kcwggSjAgEAAoIBAQC7" for n in range(30)
    )
    key = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    cc = CC()
    cc.user("Set up the deploy credentials.")
    cc.assistant(f"Here is the key I found in the old server's config:\n{key}\nRotate it soon.")
    cc.tool_use("t1", "Bash", command="deploy --password=hunter2hunter2 " + "x" * 90)
    cc.tool_result("t1", "ok")
    cc.assistant("Deployed. " + "The rollout went through every region without errors. " * 30)
    report = bank.retain_file(cc.write(tmp_path / "s.jsonl"), "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert "[REDACTED:private-key]" in texts
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in texts
    assert "hunter2hunter2" not in texts
    assert report.redactions == 2


@needs_shared
def test_a_chat_is_stored_as_one_line_per_speaker_and_windows_stay_in_their_session() -> None:
    from lamina.readers.locomo import read_locomo_samples

    from .conftest import LOCOMO

    sample = read_locomo_samples(str(LOCOMO))[0]
    messages = sample.messages
    units, _segs = build_units(messages)
    session_of = {m.id: m.session_id for m in messages}
    lines = [u for u in units if u.kind == "line"]
    # Each message is in exactly one line (or turn, where one person says everything), each
    # line one person's (consecutive messages by one person are one line).
    held = sorted(r for u in units if u.kind in ("line", "turn") for r in u.record_ids)
    assert held == sorted(m.id for m in messages)
    assert all(len(u.speakers) == 1 for u in lines)
    windows = [u for u in units if u.kind == "window"]
    assert windows and all(len({session_of[r] for r in w.record_ids}) == 1 for w in windows)
    sessions = {m.session_id for m in messages}
    base = [u for u in units if u.kind in ("line", "turn")]
    assert len(windows) == len(base) - 3 * len(sessions)  # 4 units each, within a session


@needs_shared
def test_recall_never_repeats_a_line_it_already_returned(database: str) -> None:
    from lamina.readers.locomo import read_locomo_samples

    from .conftest import LOCOMO

    sample = read_locomo_samples(str(LOCOMO))[0]
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages(sample.messages, "chat", sample.sample_id)
    for question in sample.questions[:20]:
        result = bank.recall(question.question, "chat", RecallOptions(budget=2_000))
        shown = [line for hit in result.hits for line in hit.text.split("\n") if line.strip("[…]")]
        assert len(shown) == len(set(shown)), question.question
        assert result.tokens <= 2_000
        assert all(count_text(hit.text) <= hit.tokens for hit in result.hits)
    bank.close()


@needs_shared
def test_a_chat_retained_as_turn_pairs_is_rebuilt_as_lines_without_leftovers(
    database: str,
) -> None:
    from lamina.readers.locomo import read_locomo_samples

    from .conftest import LOCOMO

    sample = read_locomo_samples(str(LOCOMO))[0]
    messages = sample.messages[:120]
    store = open_store(database)
    pairs = UnitOptions(lines=False, windows=2)  # the rules before line units
    old = MemoryBank(store, HashEmbedder(), retain_options=RetainOptions(units=pairs))
    old.retain_messages(messages, "chat", sample.sample_id)
    assert {m.kind for m in old.memories("chat")} == {"turn", "window"}
    new = MemoryBank(store, HashEmbedder())
    assert new.retain_messages(messages, "chat", sample.sample_id).status != "unchanged"
    units, _segs = build_units(messages)
    kept = sorted((m.kind, m.text) for m in new.memories("chat"))
    assert kept == sorted((u.kind, u.text) for u in units)  # nothing left of the old rules
    assert store.count_records("chat") == len(messages)
    store.close()


def test_windows_can_start_every_other_unit_and_still_reach_the_end(cc: CC) -> None:
    for n in range(4):
        cc.user(f"question {n}")
        cc.assistant(f"answer {n}")
    cc.user("question 4")
    messages = read_transcript_lines(cc)
    units, _ = build_units(messages, UnitOptions(window_step=2))
    windows = [u for u in units if u.kind == "window"]
    # 9 lines: windows start at lines 0, 2 and 4, and one ends with the last line
    assert [w.text.split("\n")[0] for w in windows] == [
        "user: question 0",
        "user: question 1",
        "user: question 2",
        "assistant: answer 2",
    ]
    assert windows[-1].text.endswith("user: question 4")
    with pytest.raises(ValueError, match="window_step"):
        UnitOptions(window_step=0)


def test_a_huge_paste_keeps_its_start_and_end_and_says_what_was_left_out(
    cc: CC, bank: MemoryBank, tmp_path: Path
) -> None:
    log = "\n".join(
        f"12:{i % 60:02d} worker[{i % 7}] handled job {i} in {i % 97} ms" for i in range(100_000)
    )
    cc.user("The nightly import is stuck, here is the whole log:\n" + log + "\nFATAL quarantined")
    cc.assistant("The last line says the import was quarantined; the first jobs ran fine.")
    path = cc.write(tmp_path / "paste.jsonl")
    assert path.stat().st_size > 4_000_000
    report = bank.retain_file(path, "p")
    memories = list(bank.memories("p"))
    # Not thousands of parts for one paste: what is kept is bounded, whatever the paste's size.
    assert report.memories_added == len(memories) < 200
    text = "\n".join(m.text for m in memories)
    assert "nightly import is stuck" in text and "FATAL quarantined" in text
    assert re.search(r"\[… [\d,]+ characters not kept …\]", text)
    assert "handled job 50000 " not in text  # the middle is left out
    found = bank.recall("why was the nightly import quarantined", "p").hits
    assert any("FATAL quarantined" in hit.text for hit in found)


def _strings(value: object) -> list[str]:
    """Every string in a decoded JSON record."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


_LABEL = re.compile(r"^(?:user|assistant|subagent|subagent's task|summary)(?: \(\w+\))?: ")


@needs_shared
def test_a_memory_span_covers_every_record_whose_words_it_carries(bank: MemoryBank) -> None:
    """ "Where was this said" points at the right lines: for every memory of a retained real
    session, each line of its text that a record of the transcript holds is held by a record
    within the memory's first and last line (a part that opens with its turn's prompt spans
    the prompt's line too)."""
    located = 0
    for path in (AGENTIC, PLANNED, ORCHESTRATED):
        document = bank.retain_file(path, "proj").document
        held: list[tuple[int, int, str]] = []
        for message in read_transcript(str(path)).messages:
            first = message.source.line
            if first is None:
                continue
            words = " ".join(" ".join(s for r in message.records for s in _strings(r)).split())
            held.append((first, message.source.end_line or first, words))
        for memory in bank.memories("proj", with_embeddings=False):
            if memory.document != document or memory.first_line is None:
                continue
            last = memory.last_line or memory.first_line
            for line in memory.text.split("\n"):
                said = " ".join(_LABEL.sub("", line).removesuffix(" […]").split())
                if memory.kind == "activity" or line.startswith("actions: ") or len(said) < 16:
                    continue
                snippet = said[:48]
                holders = [(a, b) for a, b, words in held if snippet in words]
                if not holders:
                    continue  # cleaned or redacted on the way: no record holds it verbatim
                located += 1
                assert any(memory.first_line <= a and b <= last for a, b in holders), (
                    f"{path.name}: {memory.kind} L{memory.first_line}-{last} carries "
                    f"{snippet!r}, said at {holders[:3]}"
                )
    assert located > 400  # most lines were found verbatim and checked
