"""`lamina bench agent`: the shipped question set is sound, and the benchmark runs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from click.testing import CliRunner

from lamina.bank.bank import MemoryBank
from lamina.bench.agent import answers_it, load_questions, run_agent_bench
from lamina.cli import cli
from lamina.embed import HashEmbedder
from lamina.store import open_store

from .conftest import CLAUDE_CODE, ROOT, needs_shared


def test_the_question_set_ships_inside_the_package() -> None:
    data = resources.files("lamina.bench").joinpath("data/agent_questions.json")
    assert data.is_file()
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"bench/data/*"' in pyproject
    questions = load_questions()
    assert len(questions) >= 40
    assert len({q.id for q in questions}) == len(questions)
    halves = {q.half for q in questions}
    assert halves == {"tune", "check"}


@needs_shared
def test_every_answer_is_stated_in_its_evidence_lines() -> None:
    for q in load_questions():
        lines = (CLAUDE_CODE / q.file).read_text(encoding="utf-8").split("\n")
        stated = False
        for e in q.evidence:
            assert 1 <= e.first_line <= e.last_line <= len(lines), q.id
            raw = "\n".join(lines[e.first_line - 1 : e.last_line])
            text = raw.replace("\\n", " ").replace('\\"', '"')
            stated |= answers_it(q, text, e.first_line, e.last_line)
        assert stated, f"{q.id}: no evidence line states {q.answers}"


@needs_shared
def test_the_benchmark_scores_lamina_and_the_baseline(tmp_path: Path) -> None:
    questions = [q for q in load_questions() if q.file.startswith("drmaciver")]
    bank = MemoryBank(open_store(str(tmp_path / "lamina.db")), HashEmbedder())
    result = run_agent_bench(CLAUDE_CODE, questions, (1000,), bank=bank)
    assert result["questions"] == len(questions)
    for name in ("lamina", "bm25_records", "ceiling"):
        assert 0.0 <= result[name]["any@1000"]["all"] <= 1.0
    assert result["ceiling"]["any@1000"]["all"] == 1.0  # every answer fits the budget somewhere
    assert result["unit_tokens"]


def test_the_command_is_wired() -> None:
    out = CliRunner().invoke(cli, ["bench", "agent", "--help"])
    assert out.exit_code == 0
    assert "BM25" in out.output
