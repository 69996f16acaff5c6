"""`lamina bench agent`: the shipped question set is sound, and the benchmark runs."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from lamina.bank.bank import MemoryBank
from lamina.bench.agent import (
    answers_it,
    found_in,
    load_question_set,
    load_questions,
    run_agent_bench,
)
from lamina.cli import cli
from lamina.embed import HashEmbedder
from lamina.errors import InputError
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


def _two_fact(tmp_path: Path) -> Path:
    path = tmp_path / "q.json"
    question = {
        "id": "t1",
        "file": "s.jsonl",
        "question": "Which port and which host?",
        "answers": ["port 8080"],
        "evidence": [{"first_line": 3, "last_line": 3}],
        "parts": [
            {"answers": ["port 8080"], "evidence": [{"first_line": 3, "last_line": 3}]},
            {"answers": ["host db1"], "evidence": [{"first_line": 9, "last_line": 9}]},
        ],
        "tags": ["two_fact"],
        "half": "heldout",
    }
    path.write_text(json.dumps({"data": "somewhere", "questions": [question]}))
    return path


def test_a_two_fact_question_counts_only_when_both_facts_come_back(tmp_path: Path) -> None:
    qset = load_question_set(_two_fact(tmp_path))
    assert qset.data == "somewhere"
    (q,) = qset.questions
    assert q.tags == ("two_fact",) and len(q.needs) == 2
    first = ("s.jsonl", "we moved it to Port 8080", 2, 4)
    second = ("s.jsonl", "the host db1 it is", 9, 9)
    elsewhere = ("other.jsonl", "the host db1 it is", 9, 9)
    assert not found_in(q, [first])
    assert not found_in(q, [first, elsewhere])
    assert found_in(q, [second, first])
    assert answers_it(q, "port 8080 and host db1", 3, 9)


def test_a_broken_question_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"questions": [{"id": "x"}]}')
    with pytest.raises(InputError, match=r"bad\.json: not a question set"):
        load_question_set(bad)
    with pytest.raises(InputError, match="shipped sets: claude-code"):
        load_question_set(tmp_path / "absent.json")
