"""When a session was last compacted, as the prompt hook reads it to exclude only what the
session still holds: scanned once, then from where the last scan ended while the file is only
appended to (the warm server asks on every prompt), and always the answer of a full read."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import orjson

from lamina.integrations.claude_code.prompt import last_compaction
from lamina.messages import parse_timestamp

from .conftest import CLAUDE_CODE, needs_shared

pytestmark = needs_shared

SESSION = "spotter-258c7280.jsonl"


def full_read(path: Path) -> datetime | None:
    """The timestamp of the last complete line naming a compact_boundary (None: none)."""
    found = None
    for line in path.read_bytes().split(b"\n"):
        if b'"compact_boundary"' in line:
            try:
                record = orjson.loads(line)
            except ValueError:
                return None  # being written: the hook reads it again next time
            found = parse_timestamp(record.get("timestamp"))
    return found


def test_a_growing_session_gives_the_full_reads_answer_at_every_step(tmp_path: Path) -> None:
    lines = (CLAUDE_CODE / SESSION).read_bytes().splitlines(keepends=True)
    boundaries = [i for i, line in enumerate(lines) if b'"compact_boundary"' in line]
    assert boundaries
    steps = sorted({len(lines) * k // 30 for k in range(1, 31)} | {i + 1 for i in boundaries})
    path = tmp_path / "session.jsonl"
    seen: set[datetime | None] = set()
    written = 0
    with path.open("wb") as out:
        for upto in steps:
            chunk = b"".join(lines[written:upto])
            written = upto
            for part in (chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]):
                out.write(part)  # the first half ends inside a line: one being written
                out.flush()
                answer = last_compaction(str(path))
                assert answer == full_read(path), f"after {written} lines"
                seen.add(answer)
    assert None in seen and len(seen) > 1  # before the first compaction and after it


def test_a_rewritten_file_is_scanned_again(tmp_path: Path) -> None:
    data = (CLAUDE_CODE / SESSION).read_bytes()
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    compacted = last_compaction(str(path))
    assert compacted is not None and compacted == full_read(path)
    # Rewritten in place (same file) without its compactions, then longer than before.
    kept = b"".join(x for x in data.splitlines(keepends=True) if b"compact_boundary" not in x)
    with path.open("r+b") as out:
        out.write(kept + kept[: len(data) - len(kept) + 100])
        out.truncate()
    assert last_compaction(str(path)) is None
    # Replaced by another file at the same path.
    replacement = tmp_path / "other.jsonl"
    replacement.write_bytes(data)
    replacement.replace(path)
    assert last_compaction(str(path)) == compacted
    assert last_compaction(str(tmp_path / "missing.jsonl")) is None
