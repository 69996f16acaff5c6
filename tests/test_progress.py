"""Progress: shown on terminals only, with count, rate and time left; told by long retains."""

from __future__ import annotations

import io
from pathlib import Path

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.progress import Progress
from lamina.store.sqlite import SQLiteStore

from .conftest import CC


def test_line_has_count_total_rate_and_time_left() -> None:
    bar = Progress("reading", total=4 * 1024 * 1024, unit="B", stream=io.StringIO(), force=True)
    bar.started -= 2.0  # two seconds in
    bar.done = 1024 * 1024
    line = bar.line(now=bar.started + 2.0)
    assert line == "reading: 1.0 MB / 4.0 MB (25%), 512.0 KB/s, 0:06 left"


def test_nothing_is_drawn_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("x", total=10, stream=stream, delay=0, interval=0) as bar:
        bar.update(5)
    assert stream.getvalue() == ""


def test_a_long_retain_tells_its_progress(tmp_path: Path) -> None:
    cc = CC()
    for n in range(600):
        cc.user(f"question {n}")
        cc.assistant(f"answer {n}")
    path = cc.write(tmp_path / "s.jsonl")
    told: list[tuple[str, int, int]] = []
    bank = MemoryBank(SQLiteStore(tmp_path / "db"), HashEmbedder())
    bank.progress = lambda stage, done, total: told.append((stage, done, total))
    bank.retain_file(path, "p")
    reading = [t for t in told if t[0] == "reading"]
    embedding = [t for t in told if t[0] == "embedding"]
    assert reading[-1][1] == reading[-1][2] == path.stat().st_size
    # 600 turns, each stored as two lines (the question, the answer), each embedded once
    assert [d for _s, d, _t in embedding] == [256, 512, 768, 1024, 1200]
