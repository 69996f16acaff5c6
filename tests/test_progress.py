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


def frames(stream: io.StringIO) -> list[str]:
    """The lines drawn on a terminal, in order (each draw starts with a carriage return)."""
    return [f.replace("\x1b[2K", "") for f in stream.getvalue().split("\r") if f.strip("\x1b[2K")]


def test_a_bar_that_reaches_its_total_draws_it_whatever_the_throttle() -> None:
    stream = io.StringIO()
    bar = Progress("embedding", total=100, unit="memories", stream=stream, force=True, delay=0)
    bar.interval = 3600.0  # every update after the first is throttled...
    bar.update(10)
    bar.update(54)
    bar.update(100)  # ...but not the last
    assert [f.split(" (")[1][:4] for f in frames(stream)] == ["10%)", "100%"]


def test_a_bar_that_leaves_ends_on_its_final_count_and_a_new_line() -> None:
    stream = io.StringIO()
    with Progress("x", total=10, stream=stream, force=True, delay=0, leave=True) as bar:
        bar.update(5)
        bar.done = 10  # told without a draw
    assert stream.getvalue().endswith("\n")
    assert "10 / 10 (100%)" in frames(stream)[-1]
    transient = io.StringIO()
    with Progress("x", total=10, stream=transient, force=True, delay=0) as bar:
        bar.update(5)
    assert transient.getvalue().endswith("\r\x1b[2K")  # wiped


def test_clear_line_wipes_the_bar_before_a_result_and_it_comes_back() -> None:
    from lamina.progress import clear_line

    stream = io.StringIO()
    with Progress("x", total=10, stream=stream, force=True, delay=0, interval=3600) as bar:
        bar.update(3)
        clear_line()
        stream.write("result\n")
        bar.update(4)  # drawn again at once: the line was wiped
    assert stream.getvalue().split("result\n")[0].endswith("\r\x1b[2K")
    assert "4 / 10" in stream.getvalue().split("result\n")[1]
