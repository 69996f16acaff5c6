"""The prompt hook reads a Codex rollout, a Gemini chat and a Copilot session from its end, as it
reads a Claude Code transcript: the recall query (and so what is injected) is the one a whole read
of the file gives, at every point of a real session as it grows, with its last line half written,
and after the file is truncated or rewritten. So do the other answers it reads from a session's
end: when the session was last compacted, and whether Gemini's history already holds a block."""

from __future__ import annotations

import html
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import orjson
import pytest

from lamina.bank import query as query_module
from lamina.bank.bank import MemoryBank
from lamina.bank.query import (
    QueryOptions,
    RecallQuery,
    TailQueries,
    compose_recall_query,
    recall_query_for_file,
)
from lamina.embed import HashEmbedder
from lamina.integrations.claude_code import prompt as prompt_module
from lamina.integrations.claude_code.prompt import (
    PromptAnswer,
    PromptRequest,
    answer_prompt,
    last_compaction,
)
from lamina.integrations.gemini.history import held_in_history, memory_entries
from lamina.messages import parse_timestamp
from lamina.readers import detect_format
from lamina.readers.base import LineTailReader
from lamina.readers.gemini import read_gemini_tail
from lamina.store.sqlite import SQLiteStore
from lamina.turns import conversational_text, is_turn_start

from .conftest import CLAUDE_CODE, SHARED

GENERATED = SHARED / "agent-clis-generated"
SESSIONS = {
    "codex": [
        SHARED / "codex" / "acidicsoil__rollout-2025-11-17T15-30-28-019a93b9.jsonl",
        SHARED / "codex" / "kunalcode12__empire-of-bits__codex-session.jsonl",
        *sorted((GENERATED / "codex-0.171.0").glob("rollout-*.jsonl")),
    ],
    "gemini": [
        SHARED / "gemini" / "mai0313__session-0ab84937_2026-04-23.jsonl",
        *sorted((GENERATED / "gemini-0.61.0").glob("session-*.jsonl")),
    ],
    "copilot": [
        SHARED / "copilot" / "mai0313__copilot-96ef38f0_2026-04-23.jsonl",
        GENERATED / "copilot-1.0.102" / "events.jsonl",
    ],
}
"""Real sessions of each agent (the largest of the shared data first)."""
GEMINI_DOCUMENT = SHARED / "gemini" / "mai0313__session-8a20078e_2026-03-27.json"
"""Gemini's older form: one JSON document, rewritten whole every turn."""

pytestmark = pytest.mark.skipif(
    not all(p.is_file() for files in SESSIONS.values() for p in files),
    reason="../shared/data/{codex,gemini,copilot,agent-clis-generated} are not beside the checkout",
)

PROMPT = "and what did we decide about the tests?"
WINDOWS = (2 * 1024, 16 * 1024)
"""Small windows, so that the real sessions (up to 342 kB) are read from mid-file, and grown."""


def whole(path: Path, prompt: str | None, options: QueryOptions) -> RecallQuery:
    """The query from a whole read of the file (what the hook composed before reading ends)."""
    messages = list(detect_format(str(path)).read(str(path), lambda _w: None))
    return compose_recall_query(messages, prompt, options)


def last_prompt(path: Path) -> str | None:
    """The transcript's own last prompt (asked again, it is not counted twice)."""
    messages = list(detect_format(str(path)).read(str(path), lambda _w: None))
    for message in reversed(messages):
        if is_turn_start(message):
            return conversational_text(message)
    return None


def same(path: Path, options: QueryOptions, where: str, queries: TailQueries | None = None) -> None:
    """The query read from the file's end is the whole read's: for the hook's prompt, for the
    transcript's own last prompt asked again, and with no prompt."""
    for prompt in (PROMPT, last_prompt(path), None):
        expected = whole(path, prompt, options)
        for window in WINDOWS:
            got = recall_query_for_file(str(path), prompt, options, window=window)
            assert (got.query, got.prompt) == (expected.query, expected.prompt), (where, window)
        if queries is not None:  # the warm server's reader, which keeps state between prompts
            kept = queries.query(str(path), prompt, options)
            assert (kept.query, kept.prompt) == (expected.query, expected.prompt), where


def cut_points(lines: list[bytes], count: int) -> list[int]:
    return sorted({max(1, len(lines) * k // count) for k in range(1, count + 1)})


@pytest.mark.parametrize(
    "path",
    [p for files in SESSIONS.values() for p in files],
    ids=lambda p: f"{p.parent.name}/{p.name[:40]}",
)
def test_a_growing_session_read_from_its_end_gives_the_whole_read_s_query(
    tmp_path: Path, path: Path
) -> None:
    """Appended line by line in steps, the last line half written at every step."""
    lines = path.read_bytes().splitlines(keepends=True)
    target = tmp_path / path.name
    options = QueryOptions()
    queries = TailQueries(window=WINDOWS[1], spans=3)  # keeps the last 256 kB
    written = 1
    with target.open("wb") as out:
        out.write(lines[0])  # a Gemini chat half its first line long is no chat yet
        for upto in cut_points(lines, 12):
            chunk = b"".join(lines[written:upto])
            written = upto
            out.write(chunk[: len(chunk) // 2])
            out.flush()
            same(target, options, f"{written} lines, the last one in part", queries)
            out.write(chunk[len(chunk) // 2 :])
            out.flush()
            same(target, options, f"{written} lines", queries)
    assert recall_query_for_file(str(target), PROMPT, options, window=WINDOWS[0]).query
    # Codex, Gemini and Copilot sessions are kept by the warm server, as Claude Code's are:
    # most prompts read only the lines appended since the one before.
    assert queries.hits > queries.rereads, (queries.hits, queries.rereads)


@pytest.mark.parametrize("agent", sorted(SESSIONS))
def test_a_truncated_or_rewritten_session_is_read_as_it_now_is(tmp_path: Path, agent: str) -> None:
    first, other = SESSIONS[agent][0].read_bytes(), SESSIONS[agent][1].read_bytes()
    target = tmp_path / SESSIONS[agent][0].name
    options = QueryOptions(context_turns=2)
    queries = TailQueries(window=WINDOWS[0])
    target.write_bytes(first)
    same(target, options, "whole", queries)
    target.write_bytes(first[: len(first) * 2 // 3])  # truncated, mid-line
    same(target, options, "truncated", queries)
    target.write_bytes(other)  # rewritten with another session
    same(target, options, "rewritten", queries)
    replacement = tmp_path / "replacement"
    replacement.write_bytes(first[: len(first) // 2] + other[: len(other) // 3])
    replacement.replace(target)  # replaced by a new file (another inode)
    same(target, options, "replaced", queries)
    with target.open("ab") as out:  # and then appended to
        out.write(first[len(first) // 2 : len(first) * 3 // 4])
    same(target, options, "replaced, then appended to", queries)


def test_a_gemini_message_appended_again_after_the_window_s_start_is_placed_as_a_whole_read_does(
    tmp_path: Path,
) -> None:
    """Gemini appends a message again when its tool call completes; the last copy is read at the
    place of the first. A window starting between the two copies is read from the first. In the
    real chats only `$set` checkpoints come between the copies; here the next prompt is moved
    between them, so a read that placed the copy where it found it would order them wrongly."""
    lines = SESSIONS["gemini"][0].read_bytes().splitlines(keepends=True)
    ids = [orjson.loads(line).get("id") for line in lines]
    types = [orjson.loads(line).get("type") for line in lines]
    again = [i for i, ident in enumerate(ids) if ident and ident in ids[:i]]
    assert again, "the real chat has messages appended again"
    checked = from_kept = 0
    for i in again:
        first = ids.index(ids[i])
        prompt = next((k for k in range(i + 1, len(lines)) if types[k] == "user"), None)
        if prompt is None:
            continue
        moved = [
            *lines[: first + 1],
            lines[prompt],
            *lines[first + 1 : prompt],
            *lines[prompt + 1 :],
        ]
        path = tmp_path / f"moved-{i}.jsonl"
        path.write_bytes(b"".join(moved))
        # The window starts just after the first copy: the prompt, then the copy appended again.
        window = path.stat().st_size - sum(len(line) for line in moved[: first + 1])
        everything = list(detect_format(str(path)).read(str(path), lambda _w: None))
        tail, read_whole = read_gemini_tail(str(path), window, lambda _w: None)
        assert not read_whole and len(tail) < len(everything)
        suffix = everything[len(everything) - len(tail) :]
        assert [(m.id, m.blocks) for m in tail] == [(m.id, m.blocks) for m in suffix], i
        for options in (QueryOptions(context_turns=8), QueryOptions()):
            expected = whole(path, PROMPT, options)
            got = recall_query_for_file(str(path), PROMPT, options, window=window)
            assert got.query == expected.query
            # The warm server's kept lines, the window starting between the copies too.
            queries = TailQueries(window=window)
            for _ in range(2):
                assert queries.query(str(path), PROMPT, options).query == expected.query
            from_kept += queries.hits
        checked += 1
    assert checked and from_kept


def test_gemini_s_single_document_is_read_from_its_last_records(tmp_path: Path) -> None:
    """Before 0.39 Gemini rewrote one JSON document each turn: its last records are built into
    messages, the query the same as the whole read's, at every turn it was rewritten."""
    document = orjson.loads(GEMINI_DOCUMENT.read_bytes())
    records = document["messages"]
    target = tmp_path / GEMINI_DOCUMENT.name
    options = QueryOptions()
    for upto in cut_points([b""] * len(records), 10):
        target.write_bytes(
            orjson.dumps({**document, "messages": records[:upto]}, option=orjson.OPT_INDENT_2)
        )
        same(target, options, f"{upto} records")
    built, read_whole = read_gemini_tail(str(target), 4 * 1024, lambda _w: None)
    assert not read_whole and len(built) < len(records)


# The hook: what the prompt hook injects reading the file's end is what it injected reading it all.


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> MemoryBank:
    """A bank holding the other real sessions of every agent (real SQLite; hashed vectors)."""
    base = tmp_path_factory.mktemp("tail-bank")
    memory_bank = MemoryBank(SQLiteStore(base / "lamina.db"), HashEmbedder())
    for files in SESSIONS.values():
        for n, path in enumerate(files[1:]):
            memory_bank.retain_file(path, "proj", document=f"{path.parent.name}-{n}")
    memory_bank.retain_file(GEMINI_DOCUMENT, "proj", document="gemini-document")
    return memory_bank


def hook_answer(
    bank: MemoryBank, path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> PromptAnswer:
    monkeypatch.setattr(query_module, "DEFAULT_WINDOW", window)
    request = PromptRequest(prompt=PROMPT, bank="proj", session="current", transcript=str(path))
    return answer_prompt(bank, request, {})


@pytest.mark.parametrize("agent", sorted(SESSIONS))
def test_the_hook_injects_the_same_memories_reading_the_session_s_end(
    tmp_path: Path, agent: str, bank: MemoryBank, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = SESSIONS[agent][0]
    lines = source.read_bytes().splitlines(keepends=True)
    target = tmp_path / source.name
    target.write_bytes(b"".join(lines[: len(lines) * 2 // 3]))
    steps = {"two thirds": None, "appended": lines[len(lines) * 2 // 3 :], "rewritten": None}
    injected = 0
    for step, more in steps.items():
        if more is not None:
            with target.open("ab") as out:
                out.writelines(more)
        if step == "rewritten":
            target.write_bytes(b"".join(lines[: len(lines) // 2]))
        ends = hook_answer(bank, target, 4 * 1024, monkeypatch)
        read_all = hook_answer(bank, target, 1 << 40, monkeypatch)
        assert ends.context == read_all.context and ends.ids == read_all.ids, step
        injected += bool(ends.context)
    assert injected, "some prompt got memories"


@pytest.mark.parametrize("agent", ["codex", "copilot"])
def test_a_widened_window_reads_only_the_lines_before_those_already_read(
    tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex and Copilot lines are read in spans: a window four times as wide reads the lines
    further back alone, never a line twice, and the query is the whole read's."""
    source = SESSIONS[agent][0]
    reader = detect_format(str(source))
    assert isinstance(reader, LineTailReader)
    spans: list[tuple[int, int | None]] = []
    read_span = type(reader).read_span

    def recorded(self: object, path: str, start: int, stop: int | None, warn: object) -> object:
        spans.append((start, stop))
        return read_span(self, path, start, stop, warn)  # type: ignore[arg-type]

    monkeypatch.setattr(type(reader), "read_span", recorded)
    widened = 0
    for options in (QueryOptions(), QueryOptions(context_turns=8), QueryOptions(max_chars=4000)):
        for prompt in (PROMPT, None):
            spans.clear()
            expected = whole(source, prompt, options)
            got = recall_query_for_file(str(source), prompt, options, window=1024)
            assert (got.query, got.prompt) == (expected.query, expected.prompt)
            # Each span ends where the one before it began: no byte read twice.
            assert spans[0][1] is None
            assert all(back[1] == front[0] for front, back in pairwise(spans))
            widened += len(spans) > 1
    assert widened, "some query needed a wider window"


# When the session was last compacted: the answer of a full read, found from the end.


def compaction_by_full_read(path: Path) -> datetime | None:
    """The timestamp of the last complete line holding a compaction record, Claude Code's or
    Codex's (None: none)."""
    found = None
    for line in path.read_bytes().split(b"\n"):
        if b'"compact_boundary"' in line or b'"type":"compacted"' in line:
            try:
                record = orjson.loads(line)
            except ValueError:
                return None  # being written: the hook reads it again next time
            found = parse_timestamp(record.get("timestamp"))
    return found


COMPACTED = [
    GENERATED
    / "codex-0.171.0"
    / "rollout-2026-12-04T17-36-43-01a24221-38b7-7202-868e-0659a70eb601.jsonl",
    CLAUDE_CODE / "spotter-258c7280.jsonl",
]
"""Real sessions with compaction records: a Codex rollout, a Claude Code transcript."""


@pytest.mark.parametrize("path", COMPACTED, ids=lambda p: p.parent.name)
def test_last_compaction_read_from_the_end_is_the_full_read_s_answer(
    tmp_path: Path, path: Path
) -> None:
    """Searched from the end back, in a fresh process (nothing kept) and in the warm server
    (kept between prompts), at every point of the session as it grows, then with sessions after
    the last compaction (written again, as if resumed, with lines that name a compaction
    without being one), truncated and rewritten."""
    lines = path.read_bytes().splitlines(keepends=True)
    marked = [i for i, line in enumerate(lines) if b"compact" in line]
    target = tmp_path / path.name
    steps = sorted({len(lines) * k // 12 for k in range(1, 13)} | {i + 1 for i in marked})
    seen: set[datetime | None] = set()
    written = 0

    def check(where: str) -> None:
        expected = compaction_by_full_read(target)
        assert last_compaction(str(target)) == expected, f"warm: {where}"
        prompt_module._scanned.clear()
        assert last_compaction(str(target)) == expected, f"cold: {where}"
        seen.add(expected)

    prompt_module._scanned.clear()
    with target.open("wb") as out:
        for upto in steps:
            chunk = b"".join(lines[written:upto])
            written = upto
            for part in (chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]):
                out.write(part)
                out.flush()
                check(f"{written} lines")
        uncompacted = b"".join(x for x in lines if b"compact" not in x)
        decoys = b"".join(
            orjson.dumps(record) + b"\n"
            for record in (
                {"type": "note", "text": 'a "compact_boundary" quoted, /compact, compacted'},
                {"type": "compacted_soon", "payload": {"type": "compact"}},
            )
        )
        out.write(uncompacted + decoys + uncompacted)  # no compaction since: far back now
        out.flush()
        check("uncompacted lines after it")
    assert None in seen and len(seen) > 1
    target.write_bytes(b"".join(lines[: marked[0]]))  # truncated before the first
    check("truncated")
    target.write_bytes(b"".join(lines))
    check("rewritten")


# What Gemini's history already holds of a memory block: the answer of a whole read.


def held_by_whole_read(path: Path, block: str) -> bool:
    """Every memory of `block` is in the joined text of the chat's user parts holding a memory
    block (a `$set` checkpoint's messages included)."""
    held: list[str] = []
    for raw in path.read_bytes().splitlines():
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        messages = [record] if isinstance(record, dict) else []
        checkpoint = record.get("$set") if isinstance(record, dict) else None
        if isinstance(checkpoint, dict) and isinstance(checkpoint.get("messages"), list):
            messages = [m for m in checkpoint["messages"] if isinstance(m, dict)]
        for message in messages:
            if message.get("type") == "user" and isinstance(message.get("content"), list):
                for part in message["content"]:
                    text = (
                        html.unescape(str(part.get("text", ""))) if isinstance(part, dict) else ""
                    )
                    if "<lamina_memories>" in text:
                        held.append(text)
    text = "\n".join(held)
    entries = memory_entries(block)
    return bool(text) and bool(entries) and all(entry in text for entry in entries)


def memory_block(facts: list[str]) -> str:
    lines = [
        f"- [2026-12-0{1 + n % 9}] {fact}\n  (said in session {n})" for n, fact in enumerate(facts)
    ]
    return "<lamina_memories>\n" + "\n".join(lines) + "\n</lamina_memories>"


def with_blocks(lines: list[bytes]) -> tuple[list[bytes], list[str]]:
    """A real Gemini chat whose every user message got a memory block, as BeforeAgent's context
    arrives in 0.61 (an extra part `<hook_context>...</hook_context>`, HTML-escaped): the n-th
    holds facts n and n+1. Returns the lines and every fact."""
    out: list[bytes] = []
    facts: list[str] = []
    for line in lines:
        record = orjson.loads(line) if line.strip() else None
        if isinstance(record, dict) and record.get("type") == "user":
            n = len(facts)
            facts.append(f"fact number {n} of the chat")
            block = memory_block(
                [f"fact number {n} of the chat", f"fact number {n + 1} of the chat"]
            )
            content = record.get("content")
            parts = content if isinstance(content, list) else [{"text": str(content)}]
            escaped = html.escape(block, quote=False)
            record["content"] = [*parts, {"text": f"<hook_context>{escaped}</hook_context>"}]
            line = orjson.dumps(record) + b"\n"
        out.append(line)
    return out, facts


@pytest.mark.parametrize("source", SESSIONS["gemini"], ids=lambda p: p.parent.name)
def test_held_in_history_read_from_the_end_is_the_whole_read_s_answer(
    tmp_path: Path, source: Path
) -> None:
    """A real Gemini chat with memory blocks, grown in steps with its last line half written,
    then resumed (written again after itself), truncated and replaced: blocks held by its last
    lines, by its first ones only, partly held, and held by none."""
    lines, facts = with_blocks(source.read_bytes().splitlines(keepends=True))
    assert len(facts) >= 2
    target = tmp_path / source.name
    blocks = (
        memory_block(facts[-2:]),  # the last block's
        memory_block(facts[:1]),  # the first block's only
        memory_block([facts[0], facts[-1]]),  # the first and the last
        memory_block([facts[0], "a fact no chat holds"]),
        "no block at all",
    )
    answers: set[bool] = set()

    def check(where: str) -> None:
        for block in blocks:
            expected = held_by_whole_read(target, block)
            assert held_in_history(str(target), block) == expected, (where, block[:80])
            answers.add(expected)

    written = 0
    with target.open("wb") as out:
        for upto in cut_points(lines, 8):
            chunk = b"".join(lines[written:upto])
            written = upto
            for part in (chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]):
                out.write(part)
                out.flush()
                check(f"{written} lines")
        out.writelines(lines)  # resumed: the chat written again after itself
    check("resumed")
    target.write_bytes(b"".join(lines[: len(lines) // 3]))
    check("truncated")
    replacement = tmp_path / "replacement"
    replacement.write_bytes(b"".join(lines[len(lines) // 2 :]))
    replacement.replace(target)
    check("replaced")
    assert answers == {True, False}
    assert not held_in_history(str(tmp_path / "missing.jsonl"), blocks[0])
