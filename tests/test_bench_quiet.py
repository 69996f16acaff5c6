"""`lamina bench quiet`: the shipped off-topic prompts load, other sets can be pointed at, and
the benchmark compares the floor on with the floor off in one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lamina.bank.recall import Floor
from lamina.bench.agent import load_questions
from lamina.bench.quiet import load_ontopic, load_prompts, run_quiet_bench
from lamina.errors import InputError

from .conftest import CLAUDE_CODE, needs_shared


def test_the_dev_prompts_ship_and_a_file_of_the_same_shape_loads(tmp_path: Path) -> None:
    prompts = load_prompts()
    assert len(prompts) == 50 and all(isinstance(p, str) and p for p in prompts)
    mine = tmp_path / "prompts.json"
    mine.write_text(json.dumps({"prompts": ["write a haiku about autumn"]}))
    assert load_prompts(str(mine)) == ["write a haiku about autumn"]
    mine.write_text(json.dumps({"questions": []}))
    with pytest.raises(InputError, match="not a prompt set"):
        load_prompts(str(mine))
    with pytest.raises(InputError, match="cannot read"):
        load_prompts(str(tmp_path / "absent.json"))
    # On-topic prompts, each about one session, beside the off-topic ones.
    both = {"prompts": ["a haiku"], "ontopic": [{"file": "s.jsonl", "prompt": "why rust?"}]}
    mine.write_text(json.dumps(both))
    assert load_prompts(str(mine)) == ["a haiku"]
    assert load_ontopic(str(mine)) == [("s.jsonl", "why rust?")]
    assert load_ontopic() == []
    mine.write_text(json.dumps({"prompts": [], "ontopic": [3]}))
    with pytest.raises(InputError, match="not a prompt set"):
        load_ontopic(str(mine))


@needs_shared
def test_the_floor_silences_off_topic_prompts_and_keeps_questions() -> None:
    shipped = load_questions()
    questions = [q for q in shipped if q.file.startswith("drmaciver")][:4]
    questions += [q for q in shipped if q.file.startswith("obra")][:1]
    prompts = ["write a haiku about autumn", "what's 17% of 240?"]
    session = questions[0].file
    asked = [(session, "how did the port of the python code to rust go?")]
    result = run_quiet_bench(CLAUDE_CODE, questions, prompts, Floor(), ontopic_prompts=asked)
    assert result["ontopic_prompts"]["prompts"] == 1
    assert result["ontopic_prompts"]["injected_floor_on"] == 1.0
    dense, lexical = result["dense"], result["lexical_only"]
    assert dense["offtopic"]["injected_floor_off"] == 1.0
    assert dense["offtopic"]["quieted"] == 1.0 and dense["offtopic"]["injected_floor_on"] == 0.0
    assert dense["ontopic"]["questions"] == 5
    # Mid-session (the transcript up to a real prompt, that session's memories left out): the
    # floor judges the prompt alone, where judging the query with its turns let them through.
    midway = result["mid_session"]
    assert midway["offtopic"]["prompts"] == midway["real_prompts"]["prompts"] > 4
    assert midway["offtopic"]["injected"] < midway["offtopic"]["injected_judging_query"]
    assert dense["ontopic"]["found_floor_on"] <= dense["ontopic"]["found_floor_off"]
    assert dense["grid"] and "grid" not in lexical
    # A lexical-only answer is not judged: the floor changes nothing there.
    for part in ("offtopic", "ontopic"):
        assert lexical[part]["injected_floor_on"] == lexical[part]["injected_floor_off"]
