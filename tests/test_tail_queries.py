"""The warm server's recall queries from what it kept of a transcript's end: the same query as a
fresh read of the file, at every point of a session that keeps being appended to, cut
mid-line, compacted, truncated, rewritten or replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.bank.query import QueryOptions, RecallQuery, TailQueries, recall_query_for_file

from .conftest import CLAUDE_CODE, needs_shared

pytestmark = needs_shared

WINDOW = 256 * 1024
"""The hook's (both readers are given it; a real session grows across many windows)."""

PROMPT = "and what did we decide about the tests?"


def fresh(path: Path, prompt: str | None, options: QueryOptions) -> RecallQuery:
    return recall_query_for_file(str(path), prompt, options, window=WINDOW)


def check(
    queries: TailQueries,
    path: Path,
    options: QueryOptions,
    where: str,
    bare: TailQueries | None = None,
) -> None:
    """The kept query equals the fresh one, for the hook's prompt and (with `bare`) for the
    transcript's own last prompt."""
    kept = queries.query(str(path), PROMPT, options)
    assert kept == fresh(path, PROMPT, options), where
    if bare is not None:
        assert bare.query(str(path), None, options) == fresh(path, None, options), where


def steps(lines: list[bytes], count: int) -> list[int]:
    """Line counts to grow the file through: evenly spread, plus the line after a compaction
    boundary and the one after the line following it."""
    points = {len(lines) * k // count for k in range(1, count + 1)}
    for i, line in enumerate(lines):
        if b'"compact_boundary"' in line:
            points |= {i + 1, i + 2}
    return sorted(points)


@pytest.mark.parametrize("context_turns", [3, 1])
def test_appended_in_steps_the_kept_query_is_the_fresh_one(
    tmp_path: Path, context_turns: int
) -> None:
    lines = (CLAUDE_CODE / "spotter-258c7280.jsonl").read_bytes().splitlines(keepends=True)
    assert any(b'"compact_boundary"' in line for line in lines)
    options = QueryOptions(context_turns=context_turns)
    path = tmp_path / "session.jsonl"
    queries, bare = TailQueries(window=WINDOW), TailQueries(window=WINDOW)
    written = 0
    with path.open("wb") as out:
        for upto in steps(lines, 40):
            chunk = b"".join(lines[written:upto])
            written = upto
            # Half of the new bytes first: the last line is being written.
            out.write(chunk[: len(chunk) // 2])
            out.flush()
            check(queries, path, options, f"{written} lines, the last one in part", bare)
            out.write(chunk[len(chunk) // 2 :])
            out.flush()
            check(queries, path, options, f"{written} lines", bare)
    # Most prompts were answered from what was kept, reading only what was appended.
    assert queries.hits > 3 * queries.rereads
    assert len(queries.kept) == 1 and bare.hits > 0


def test_truncated_rewritten_or_replaced_the_file_is_read_again(tmp_path: Path) -> None:
    first = (CLAUDE_CODE / "spotter-258c7280.jsonl").read_bytes()
    other = (CLAUDE_CODE / "obra-long-conversation.jsonl").read_bytes()
    options = QueryOptions()
    path = tmp_path / "session.jsonl"
    queries = bare = TailQueries(window=WINDOW)
    cut = first.index(b"\n", len(first) // 2) + 1
    path.write_bytes(first[:cut])
    check(queries, path, options, "half the session", bare)
    with path.open("r+b") as out:  # truncated in place (same inode), then appended to
        out.truncate(cut // 2)
    check(queries, path, options, "truncated mid-line", bare)
    with path.open("ab") as out:
        out.write(first[cut // 2 : cut + 50_000])
    check(queries, path, options, "appended to after the truncation", bare)
    # Rewritten in place with another session, longer than what was read: same inode, larger.
    with path.open("r+b") as out:
        out.write(other[: cut + 80_000])
        out.truncate()
    check(queries, path, options, "rewritten in place", bare)
    # Replaced by a new file (another inode) of the first session again.
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(first)
    replacement.replace(path)
    check(queries, path, options, "replaced", bare)
    with path.open("ab") as out:
        out.write(other[: other.index(b"\n", 30_000) + 1])
    check(queries, path, options, "appended to after the replacement", bare)


def test_the_sessions_kept_are_bounded(tmp_path: Path) -> None:
    queries = TailQueries(sessions=2, window=WINDOW)
    options = QueryOptions()
    names = ["spotter-258c7280", "obra-long-conversation", "drmaciver-python-to-rust-port"]
    paths = []
    for name in names:
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes((CLAUDE_CODE / f"{name}.jsonl").read_bytes())
        paths.append(path)
    for _ in range(2):
        for path in paths:
            check(queries, path, options, path.name, queries)
            assert len(queries.kept) <= 2
    assert list(queries.kept) == [str(p) for p in paths[1:]]


def test_a_transcript_that_is_not_claude_codes_is_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "how do I cache the config?"}\n')
    queries = TailQueries()
    assert queries.query(str(path), PROMPT) == recall_query_for_file(str(path), PROMPT)
    assert not queries.kept
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(Exception) as raised:
        recall_query_for_file(str(missing), PROMPT)
    with pytest.raises(type(raised.value)):
        queries.query(str(missing), PROMPT)
