"""`lamina bench locomo`: the plain baseline, the token budgets and the split halves."""

from __future__ import annotations

import re

import pytest

from lamina.bench.date_styles import DATE_STYLES, DateStyle, date_phrases, restyle
from lamina.bench.locomo import HALVES, Tally, TurnsBM25, half_of, lead, within_tokens
from lamina.readers.locomo import read_locomo_samples

from .conftest import LOCOMO, needs_shared


def test_a_memory_that_no_longer_fits_is_passed_over_not_the_rest() -> None:
    ranked = [(("s:D1:1", "s:D1:2"), 600), (("s:D1:3",), 500), (("s:D1:4",), 300)]
    assert within_tokens(ranked, "s", 1_000) == {"D1:1", "D1:2", "D1:4"}
    assert within_tokens(ranked, "s", 2_000) == {"D1:1", "D1:2", "D1:3", "D1:4"}
    assert within_tokens(ranked, "s", 100) == set()


def test_the_halves_split_the_dev_conversations_and_are_tallied_apart() -> None:
    assert not HALVES["conv-26+30"] & HALVES["conv-41+42+43"]
    assert half_of("conv-42") == "conv-41+42+43"
    assert half_of("conv-99") is None
    tally = Tally()
    tally.add(1, ["D1:1"], ["D1:1"], {1_000: {"D1:1"}}, "conv-26+30")
    tally.add(1, ["D1:2"], ["D1:1"], {1_000: set()}, "conv-41+42+43")
    scores = tally.scores()
    assert scores["overall"]["turn_any@10"] == 0.5
    assert scores["half_conv-26+30"]["turn_any@1000t"] == 1.0
    assert scores["half_conv-41+42+43"]["turn_all@1000t"] == 0.0


@needs_shared
def test_the_plain_baseline_ranks_single_turns_by_their_words() -> None:
    sample = next(s for s in read_locomo_samples(str(LOCOMO)) if s.sample_id == "conv-26")
    bm25 = TurnsBM25(sample)
    ranked = bm25.rank("Caroline LGBTQ support group", 5)
    assert len(ranked) == 5
    assert all(len(records) == 1 and tokens > 0 for records, tokens in ranked)
    best = next(m for m in sample.messages if m.id == ranked[0][0][0])
    assert "support group" in best.text.lower()
    assert bm25.rank("zzzz qqqq", 5) == []


def test_the_lead_over_each_baseline_is_given_overall_and_per_half() -> None:
    def figures(x: float) -> dict[str, float]:
        return {"turn_any@10": x, "turn_all@10": x, "turn_any@1000t": x, "turn_all@1000t": x}

    def run(x: float, y: float) -> dict[str, object]:
        return {**figures(x), "halves": {"a": figures(x), "b": figures(y)}}

    found = lead({"lamina": run(0.8, 0.7), "bm25": run(0.75, 0.7)})
    assert set(found) == {"bm25"}
    assert found["bm25"]["overall"]["turn_any@10"] == 5.0
    assert found["bm25"]["a"]["turn_all@1000t"] == 5.0
    assert found["bm25"]["b"]["turn_any@10"] == 0.0


@pytest.mark.parametrize(
    ("question", "style", "asked"),
    [
        ("Said on 16 November, 2023?", "numeric-dmy", "Said on 16.11.2023?"),
        ("Said on 16 November, 2023?", "numeric-mdy", "Said on 11/16/2023?"),
        ("Said on 16 November, 2023?", "iso", "Said on 2023-11-16?"),
        ("Said on 16 November, 2023?", "words", "Said on 16 November, 2023?"),
        ("shared on December 1,2023 taken", "numeric-mdy", "shared on 12/01/2023 taken"),
        ("finish reading on 8th December, 2023?", "numeric-dmy", "finish reading on 08.12.2023?"),
        ("the job in August 2023?", "numeric-dmy", "the job in 08/2023?"),
        ("the job in August 2023?", "iso", "the job in 2023-08?"),
        ("when they met on Aug 15th?", "numeric-dmy", "when they met on 15/08?"),
        ("when they met on Aug 15th?", "numeric-mdy", "when they met on 08/15?"),
        ("when they met on Aug 15th?", "iso", "when they met on Aug 15th?"),
        ("between August 11 and August 15 2023", "numeric-dmy", "between 11/08 and 15.08.2023"),
        ("in June? in 2023? last May?", "numeric-mdy", "in June? in 2023? last May?"),
    ],
)  # fmt: skip
def test_date_styles_rewrite_only_the_date_phrases(
    question: str, style: DateStyle, asked: str
) -> None:
    assert restyle(question, style) == asked
    assert bool(date_phrases(question)) == (question != restyle(question, "numeric-dmy"))


@needs_shared
def test_every_style_asks_the_same_dated_questions() -> None:
    """The dated subset is read from the question as the dataset writes it, so every style
    tallies the same questions there; only their text differs."""
    samples = read_locomo_samples(str(LOCOMO))
    questions = [q.question for s in samples for q in s.questions if q.category in (1, 2, 3, 4)]
    dated = [q for q in questions if date_phrases(q)]
    assert len(dated) >= 60
    for style in DATE_STYLES:
        changed = [q for q in questions if restyle(q, style) != q]
        assert set(changed) <= set(dated)
        if style != "words":
            assert not any(
                re.search(r"\b(?:January|March|October)\b", restyle(q, style)) for q in dated
            )
