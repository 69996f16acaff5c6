"""Optional fact extraction through the LLM protocol, with a scripted fake model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.extract import FactExtractor, parse_facts
from lamina.bank.retain import RetainOptions
from lamina.embed import HashEmbedder
from lamina.errors import ConfigError
from lamina.llm import LLMError, LLMResponse, ScriptedLLM, TransientLLMError, get_llm
from lamina.llm.spend import SpendCaps
from lamina.store.ledger import StoreSpendLedger
from lamina.store.sqlite import SQLiteStore

from .conftest import CC


def transcript(tmp_path: Path, turns: int) -> Path:
    cc = CC()
    for n in range(turns):
        cc.user(f"shall we use SQLite for service {n}?")
        cc.assistant(f"Yes, SQLite for service {n}; one small server.")
    return cc.write(tmp_path / "s.jsonl")


def bank_with(tmp_path: Path, llm: ScriptedLLM) -> MemoryBank:
    options = RetainOptions(extractor=FactExtractor(llm))
    return MemoryBank(SQLiteStore(tmp_path / "db"), HashEmbedder(), retain_options=options)


def test_facts_become_memories_beside_their_turn(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            '{"facts": [{"fact": "Service 0 uses SQLite.", "date": null},'
            ' {"fact": "The team moved office.", "date": "2026-02-01"}]}',
            'Sure! ```json\n{"facts": []}\n```',
        ]
    )
    bank = bank_with(tmp_path, llm)
    report = bank.retain_file(transcript(tmp_path, 2), "p")
    assert report.facts == 2 and report.fact_errors == []
    facts = sorted((m for m in bank.memories("p") if m.kind == "fact"), key=lambda m: m.text)
    assert [f.text for f in facts] == ["Service 0 uses SQLite.", "The team moved office."]
    # A fact is read from its whole turn (question and answer), stored as one line each.
    lines = [
        m
        for m in bank.memories("p")
        if m.kind == "line" and set(m.record_ids) <= set(facts[0].record_ids)
    ]
    assert len(lines) == 2 and any("service 0" in m.text for m in lines)
    assert facts[1].occurred_at == datetime(2026, 2, 1, tzinfo=UTC)
    assert facts[1].said_at is not None and facts[1].said_at != facts[1].occurred_at
    # The model saw the turn's text and its date.
    assert "shall we use SQLite for service 0?" in llm.requests[0].messages[0]["content"]
    assert bank.recall("which office move?", "p").hits[0].memory.kind == "fact"


def test_a_failing_model_never_blocks_retention(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            TransientLLMError("429 rate limited"),
            LLMResponse(text="", stop_reason="max_tokens"),
            "no json here",
        ]
    )
    bank = bank_with(tmp_path, llm)
    report = bank.retain_file(transcript(tmp_path, 3), "p")
    assert report.status == "retained" and report.facts == 0
    assert len(report.fact_errors) == 3
    assert "rate limited" in report.fact_errors[0]
    assert len([m for m in bank.memories("p") if m.kind == "line"]) == 6  # 3 turns, 2 lines each


def test_the_spend_cap_stops_calls_before_they_are_sent(tmp_path: Path) -> None:
    """Facts spend under the same caps as summaries, kept in the store: once a turn's call
    would pass the hour's cap, the later turns are stored without facts and no call is sent."""
    store = SQLiteStore(tmp_path / "db")
    answer = '{"facts": [{"fact": "Service 0 uses SQLite.", "date": null}]}'
    llm = ScriptedLLM([LLMResponse(text=answer, input_tokens=1_000, output_tokens=50)] * 3)
    extractor = FactExtractor(llm, caps=SpendCaps(StoreSpendLedger(store), tokens_per_hour=2_000))
    bank = MemoryBank(store, HashEmbedder(), retain_options=RetainOptions(extractor=extractor))
    report = bank.retain_file(transcript(tmp_path, 3), "p")
    assert report.status == "retained" and report.facts == 1
    assert len(llm.requests) == 1
    assert len(report.fact_errors) == 2
    assert all("spend cap: 1050 tokens in the last hour" in e for e in report.fact_errors)
    assert len([m for m in bank.memories("p") if m.kind == "line"]) == 6
    assert store.spent_since(llm.name, datetime(2000, 1, 1, tzinfo=UTC)) == 1_050


def test_facts_of_a_changed_turn_are_replaced_not_duplicated(tmp_path: Path) -> None:
    cc = CC()
    cc.user("which database?")
    cc.assistant("Let me check.", msg_id="m1")
    path = cc.write(tmp_path / "s.jsonl")
    llm = ScriptedLLM(
        [
            '{"facts": [{"fact": "A database was asked about."}, {"fact": "Checking."}]}',
            '{"facts": [{"fact": "The project uses SQLite."}]}',
        ]
    )
    bank = bank_with(tmp_path, llm)
    bank.retain_file(path, "p")
    cc.assistant("It is SQLite.", msg_id="m1")
    cc.write(path)
    bank.retain_file(path, "p")
    assert sorted(m.text for m in bank.memories("p") if m.kind == "fact") == [
        "The project uses SQLite."
    ]


def test_parse_facts_is_strict_about_shape_and_lenient_about_wrapping() -> None:
    assert [f.text for f in parse_facts('x {"facts": [{"fact": " a  b "}, 3, {"x": 1}]} y')] == [
        "a b"
    ]
    for bad in ("nothing", '{"facts": 3}', "{not json}"):
        with pytest.raises(LLMError):
            parse_facts(bad)


def test_providers_are_configured_not_required() -> None:
    with pytest.raises(ConfigError, match="name the model"):
        get_llm("anthropic")
    with pytest.raises(ConfigError, match="unknown model provider"):
        get_llm("acme:large")
    with pytest.raises(ConfigError):
        get_llm("anthropic:claude-haiku-4-5", env={})
