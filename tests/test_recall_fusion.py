"""Recall's calibrated fusion: the shipped model, its fit, the speaker signal."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lamina.bank.bank import MemoryBank
from lamina.bank.fusion import (
    ADJUSTMENTS,
    FEATURES,
    MEMORY_FEATURES,
    RERANK,
    FusionModel,
    default_model,
    fit_logistic,
    model_for,
    rerank_features,
    shipped_models,
)
from lamina.bank.recall import RecallOptions
from lamina.bench.fusion import STYLES, coding_questions, collect, synthetic_questions
from lamina.bench.locomo import _bank_name, _now
from lamina.cli import cli
from lamina.embed import DEFAULT_MODEL, Embedder, HashEmbedder, get_embedder
from lamina.embed.bundled import L6_MODEL
from lamina.memories import Memory
from lamina.readers.locomo import LocomoSample, read_locomo_samples
from lamina.store import open_store
from lamina.text.lexical import tokenize
from lamina.text.units import SUMMARY

from .conftest import CLAUDE_CODE, LOCOMO

needs_locomo = pytest.mark.skipif(
    not LOCOMO.is_file(), reason="../shared/data/locomo/locomo-dev.json is not beside the checkout"
)


needs_sessions = pytest.mark.skipif(
    not CLAUDE_CODE.is_dir(), reason="../shared/data/claude-code is not beside the checkout"
)


def _conv26() -> LocomoSample:
    return next(s for s in read_locomo_samples(str(LOCOMO)) if s.sample_id == "conv-26")


def test_the_shipped_model_weighs_every_feature() -> None:
    model = default_model()
    assert set(FEATURES) <= set(model.weights) <= set(FEATURES + ADJUSTMENTS)
    # The channels agree on what counts: a better lexical or dense score never costs.
    assert model.weights["lexical"] > 0 and model.weights["dense"] > 0
    assert FusionModel.from_dict(model.as_dict()) == model


def test_each_shipped_model_names_the_embedder_it_was_fitted_for() -> None:
    data = Path(__import__("lamina").__file__).parent / "data"
    named = [
        json.loads(p.read_text(encoding="utf-8"))["embedder"] for p in data.glob("fusion*.json")
    ]
    assert len(named) == len(set(named))  # one model per embedder
    for name in named:
        assert get_embedder(name).name == name  # the name stored with that model's vectors
    models = shipped_models()
    assert {DEFAULT_MODEL, L6_MODEL} <= set(models)
    assert model_for(DEFAULT_MODEL) == default_model()
    assert model_for(L6_MODEL) == models[L6_MODEL]
    for model in models.values():
        # The fitted features, and perhaps weights set by hand on top.
        assert set(FEATURES) <= set(model.weights) <= set(FEATURES + ADJUSTMENTS)
        assert model.weights["lexical"] > 0 and model.weights["dense"] > 0


def test_the_fit_recovers_a_known_rule() -> None:
    rng = np.random.default_rng(3)
    x = rng.random((4_000, 3))
    truth = 1 / (1 + np.exp(-(6 * x[:, 0] - 4 * x[:, 1] - 1)))
    y = (rng.random(4_000) < truth).astype(np.float64)
    w, b = fit_logistic(x, y, l2=0.1)
    assert w[0] == pytest.approx(6, abs=1) and w[1] == pytest.approx(-4, abs=1)
    assert abs(w[2]) < 0.7 and b == pytest.approx(-1, abs=0.7)
    again = fit_logistic(x, y, l2=0.1)
    assert np.array_equal(again[0], w) and again[1] == b


@needs_locomo
def test_synthetic_questions_come_from_the_turns_and_are_reproducible() -> None:
    sample = _conv26()
    questions = synthetic_questions([sample], per_conversation=60)
    assert questions == synthetic_questions([sample], per_conversation=60)
    assert len(questions) == 60
    turns = {m.id: m for m in sample.messages}
    for q in questions:
        turn = turns[q.turn]
        asked = set(re.findall(r"[a-z]+", q.question.lower()))
        assert asked & set(re.findall(r"[a-z]+", turn.text.lower())), q
        if q.time_text:
            assert q.question.endswith(f"{q.time_text}?")
        named = {sample.speaker_a, sample.speaker_b} & set(q.question.replace("'s", " ").split())
        assert named <= {turn.speaker}, q


@needs_locomo
def test_a_question_naming_one_participant_gets_their_own_lines_first(database: str) -> None:
    sample = _conv26()
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages([m for s in sample.sessions[:6] for m in s.messages], "c", "conv-26")
    for name, other in (("Melanie", "Caroline"), ("Caroline", "Melanie")):
        hits = bank.recall(
            f"What did {name} paint?", "c", RecallOptions(budget=100_000, limit=100)
        ).hits
        lines = [h.memory.speakers for h in hits if h.memory.kind == "line"]
        assert lines[:2] == [(name,), (name,)]
        # A signal, not a filter: the other participant's lines still come back.
        assert (other,) in lines
        plain = bank.recall(f"What did {name} paint?", "c", RecallOptions(fusion="combsum"))
        assert plain.hits[0].memory.kind == "window"  # the fusion before: not their line


@needs_locomo
def test_the_fit_command_prints_one_json_document_and_writes_the_model(tmp_path: Path) -> None:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    small = next(s for s in data if s["sample_id"] == "conv-26")
    conversation = {
        k: v
        for k, v in small["conversation"].items()
        if not k.startswith("session_") or k.split("_")[1] in {"1", "2", "3"}
    }
    path = tmp_path / "small.json"
    path.write_text(json.dumps([{**small, "conversation": conversation}]), encoding="utf-8")
    written = tmp_path / "fusion.json"
    args = ["bench", "fusion", "--data", str(path), "--per-conversation", "40", "--json"]
    args += ["--per-session", "0"]  # the chat questions alone (the coding ones: below)
    result = CliRunner().invoke(cli, [*args, "--embedder", "hash", "--write", str(written)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["questions"] == 40
    assert report["embedder"] == "hash-ngram@1"
    assert report["corpora"] == {"chat": 40}
    assert 0 < report["all"]["learned"]["any@10"] <= 1
    document = json.loads(written.read_text(encoding="utf-8"))
    assert document["embedder"] == "hash-ngram@1"  # what recall looks it up by
    assert "--embedder hash" in document["about"]
    model = FusionModel.from_dict(document["model"])
    assert set(model.weights) == set(FEATURES)


@needs_sessions
def test_a_models_weights_for_the_coding_kinds_move_recall() -> None:
    # Parts, activity, turns and compaction summaries' restatements each have a feature of
    # their own: a model's weight for one is what recall adds to those memories' scores.
    assert {"turn", "part", "activity", "restates"} <= set(MEMORY_FEATURES)
    bank = MemoryBank(open_store(":memory:"), HashEmbedder())
    bank.retain_file(CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl", "c")
    shipped = default_model()
    assert all(shipped.weights.get(kind, 0.0) == 0 for kind in ("part", "activity"))

    def kinds(activity: float) -> list[str]:
        model = FusionModel({**shipped.weights, "activity": activity}, shipped.bias)
        options = RecallOptions(budget=100_000, limit=8, model=model)
        return [h.memory.kind for h in bank.recall("cargo test coverage", "c", options).hits]

    assert "activity" in kinds(0.0) and "part" in kinds(0.0)
    assert kinds(20.0)[:3] == ["activity"] * 3
    assert "activity" not in kinds(-20.0)[:3]
    summary = Memory(
        "s",
        "b",
        "d",
        "part",
        "summary: the build failed on the linker",
        ("r",),
        speakers=(SUMMARY,),
    )
    part = replace(summary, speakers=("assistant",))
    rows = rerank_features("why did the build fail?", [summary, part], [40, 40])
    restates = MEMORY_FEATURES.index("restates")
    assert list(rows[:, restates]) == [1.0, 0.0]
    assert rows[0, MEMORY_FEATURES.index("part")] == rows[1, MEMORY_FEATURES.index("part")] == 1


def _coding_memories() -> list[tuple[str, Memory]]:
    bank = MemoryBank(open_store(":memory:"), HashEmbedder())
    bank.retain_file(CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl", "c")
    return [("claude-code", m) for m in bank.memories("c", with_embeddings=False)]


@needs_sessions
def test_coding_questions_come_from_what_a_session_said_and_are_reproducible() -> None:
    memories = _coding_memories()
    questions = coding_questions(memories, per_session=30)
    assert questions == coding_questions(memories, per_session=30)
    assert 20 <= len(questions) <= 30
    assert {q.style for q in questions} == set(STYLES)
    texts = [" ".join(m.text.lower().split()) for _s, m in memories]
    for q in questions:
        # A statement some memory holds (a prompt's, a reply's or a tool's line) ...
        assert any(q.phrase in t for t in texts), q
        asked = set(tokenize(q.question))
        said = set(tokenize(q.phrase))
        if q.style == "related":
            assert not asked & said, q  # ... asked in none of its words
        else:
            assert asked & said, q


@needs_locomo
@pytest.mark.parametrize(
    ("embedder", "sessions"),
    [(HashEmbedder, 19), (lambda: get_embedder("minilm-l6"), 5)],
    ids=["hash", "minilm-l6"],
)
def test_the_fit_sees_each_candidate_as_recall_ranks_it(
    tmp_path: Path, embedder: Callable[[], Embedder], sessions: int
) -> None:
    # The fit's rows are the candidates recall re-scores, with the features recall gives
    # them: ranked by the model recall uses for the bank's embedder (its own fitted one, or
    # the bundled embedder's for one without), they come out in the order recall returns.
    sample = _conv26()
    sample = LocomoSample(
        sample.sample_id, sample.speaker_a, sample.speaker_b, sample.sessions[:sessions]
    )
    bank = MemoryBank(open_store(str(tmp_path / "lamina.db")), embedder())
    bank.retain_messages(sample.messages, _bank_name(sample), sample.sample_id)
    questions = synthetic_questions([sample], per_conversation=25)
    rows = collect(bank, [sample], questions)
    model = model_for(bank.embedder.name)
    assert model == shipped_models().get(bank.embedder.name, default_model())
    weights = model.vector(FEATURES)
    assert len(rows.x) == len(questions)
    for x, turns, q in zip(rows.x, rows.turns, questions, strict=True):
        assert len(x) <= RERANK
        scores = x @ weights + model.bias
        best = np.argsort(-scores, kind="stable")[:5]
        options = RecallOptions(
            budget=100_000,
            limit=5,
            collapse=False,
            spread=False,  # (a list question's results spread over episodes after the fusion)
            now=_now(sample),
            time_text=q.time_text or "",
        )
        hits = bank.recall(q.question, _bank_name(sample), options).hits
        # The same memories with the same scores (the store's vector scan and the fit's
        # in-memory index may differ in the last float digits, so near-ties can swap).
        fitted = {turns[j]: float(scores[j]) for j in range(len(turns))}
        got = [(fitted.get(h.memory.record_ids), h.fused) for h in hits]
        assert [a for a, _b in got] == pytest.approx([b for _a, b in got], abs=1e-5), q.question
        assert [h.fused for h in hits] == pytest.approx(list(scores[best]), abs=1e-5), q.question


@needs_locomo
def test_an_embedder_without_a_fitted_model_gets_the_bundled_ones_and_says_so_once(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    sample = _conv26()
    embedder = HashEmbedder(dim=40 if database.startswith("postgres") else 48)  # none fitted
    bank = MemoryBank(open_store(database), embedder)
    bank.retain_messages([m for s in sample.sessions[:3] for m in s.messages], "c", "conv-26")
    question = "When did Caroline go to the support group?"
    with caplog.at_level(logging.WARNING, logger="lamina.bank.fusion"):
        first = bank.recall(question, "c").hits
        again = bank.recall(question, "c").hits
    said = [r.getMessage() for r in caplog.records if r.name == "lamina.bank.fusion"]
    assert len(said) == 1 and embedder.name in said[0] and "lamina bench fusion" in said[0]
    bundled = bank.recall(question, "c", RecallOptions(model=default_model())).hits
    assert [(h.memory.id, h.fused) for h in first] == [(h.memory.id, h.fused) for h in bundled]
    assert [h.memory.id for h in again] == [h.memory.id for h in first]


def test_the_locomo_bench_names_a_model_file_it_cannot_read(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text("[]", encoding="utf-8")
    bad = tmp_path / "model.json"
    bad.write_text('{"model": {"bias": 1}}', encoding="utf-8")
    for path, reason in ((bad, "not a fusion model"), (tmp_path / "none.json", "No such file")):
        args = ["bench", "locomo", "--data", str(data), "--model", str(path), "--json"]
        result = subprocess.run(
            [sys.executable, "-m", "lamina", *args], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 2
        # Under --json the error is also one JSON object on stdout.
        assert reason in json.loads(result.stdout)["error"]["message"]
        assert f"error: {path}: {reason}" in result.stderr
        assert len(result.stderr.splitlines()) == 1


@needs_locomo
def test_a_list_question_gets_lines_before_windows_when_the_model_says_so(database: str) -> None:
    # The several things a list question asks for are said in separate lines; a window around
    # one of them spends the top results on its context. A model's `list_window` weight (the
    # L6 model ships one) moves windows down for such questions only.
    sample = _conv26()
    bank = MemoryBank(open_store(database), HashEmbedder())
    bank.retain_messages([m for s in sample.sessions[:6] for m in s.messages], "c", "conv-26")
    shipped = shipped_models()[L6_MODEL]
    assert shipped.weights["list_window"] < 0
    assert FusionModel.from_dict(shipped.as_dict()) == shipped
    without = FusionModel(
        {k: v for k, v in shipped.weights.items() if k != "list_window"}, shipped.bias
    )

    def kinds(question: str, model: FusionModel, spread: bool = True) -> list[str]:
        options = RecallOptions(budget=100_000, limit=10, model=model, spread=spread)
        return [h.memory.kind for h in bank.recall(question, "c", options).hits]

    listing = "What kinds of art does Caroline make?"
    assert kinds(listing, without).count("window") >= 5
    assert kinds(listing, shipped)[:8] == ["line"] * 8
    # Only for a question asking for several things, and with the list handling on.
    single = "What did Melanie paint for the art show?"
    assert kinds(single, shipped) == kinds(single, without)
    assert kinds(listing, shipped, spread=False) == kinds(listing, without, spread=False)


def test_the_hash_embedder_gets_the_default_model_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The hash embedder ships for tests and installs without the model: its users are not told
    on every command that no fusion was fitted for it."""
    with caplog.at_level(logging.WARNING, logger="lamina.bank.fusion"):
        assert model_for(HashEmbedder().name) == default_model()
    assert not [r for r in caplog.records if r.name == "lamina.bank.fusion"]
