"""Query expansion (optional, off by default): a model's search queries reach every channel but
the time one, a failing, refusing or capped model leaves recall as it was, the spend caps hold
across processes through the store, answers are kept per question, and `lamina recall
--expand-with` goes through the real Anthropic SDK to a scripted API on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.expand import MAX_QUERIES, MAX_QUERY_CHARS, QueryExpander, parse_queries
from lamina.bank.recall import RecallOptions
from lamina.embed import HashEmbedder
from lamina.llm import LLMError, LLMResponse, ScriptedLLM, TransientLLMError
from lamina.llm.spend import SpendCaps
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.store.ledger import StoreSpendLedger
from lamina.store.sqlite import SQLiteStore

from .conftest import LOCOMO, needs_shared
from .fake_anthropic import ScriptedAPI, last_user_text

QUESTION = "What is Sam's recurring frustration?"
KEYS = "I lost my keys again this morning, third Monday in a row now."
TURNS = [
    ("Sam", KEYS),
    ("Ana", "Oh no. Did you find them in the end?"),
    ("Sam", "Yes, in the fridge of all places. Anyway, how was the concert on Friday?"),
    ("Ana", "Loud and wonderful. The drummer broke a stick in the second song."),
    ("Sam", "Work is fine, Sam's team shipped the new website last week."),
    ("Ana", "Sam, you said the printer at the office jams whenever you are in a hurry."),
    ("Sam", "My sister visited and we baked bread together, a sourdough loaf."),
    ("Ana", "I started running in the park before breakfast, Sam should join me."),
]
KEYS_QUERIES = "misplaced keys again\nlosing things every week\nlost my keys"


def _bank(tmp_path: Path) -> MemoryBank:
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), HashEmbedder())
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    messages = [
        Message(
            f"m{i}",
            Role.USER if speaker == "Sam" else Role.ASSISTANT,
            (TextBlock(text),),
            Kind.PROMPT if speaker == "Sam" else Kind.REPLY,
            timestamp=start.replace(minute=i),
            speaker=speaker,
        )
        for i, (speaker, text) in enumerate(TURNS)
    ]
    bank.retain_messages(messages, "chat", "sam-and-ana")
    return bank


def _rank_of_keys(result: Any) -> int | None:
    for rank, hit in enumerate(result.hits):
        if "lost my keys" in hit.memory.text:
            return rank
    return None


def test_the_model_s_queries_find_what_the_question_s_words_do_not(tmp_path: Path) -> None:
    bank = _bank(tmp_path)
    options = RecallOptions(limit=3, budget=4_000)
    plain = bank.recall(QUESTION, "chat", options)
    assert plain.expansion is None
    llm = ScriptedLLM([KEYS_QUERIES])
    expanded = bank.recall(QUESTION, "chat", options, expander=QueryExpander(llm))
    assert _rank_of_keys(expanded) == 0, [h.memory.text for h in expanded.hits]
    assert _rank_of_keys(plain) != 0, [h.memory.text for h in plain.hits]
    assert expanded.query == QUESTION
    assert expanded.expansion is not None
    assert expanded.expansion.queries == tuple(KEYS_QUERIES.splitlines())
    assert expanded.as_dict()["expansion"]["queries"] == list(expanded.expansion.queries)
    (request,) = llm.requests
    assert request.messages == [{"role": "user", "content": QUESTION}]
    assert "search queries" in request.system
    bank.close()


def test_time_words_the_model_wrote_do_not_frame_the_question(tmp_path: Path) -> None:
    bank = _bank(tmp_path)
    now = datetime(2026, 3, 20, tzinfo=UTC)
    llm = ScriptedLLM(["keys lost last week\nwhat happened in March 2026"])
    result = bank.recall(
        QUESTION, "chat", RecallOptions(limit=5, now=now), expander=QueryExpander(llm)
    )
    assert result.hits
    assert all("time" not in hit.channels for hit in result.hits)
    # The question's own time words still do.
    llm = ScriptedLLM(["keys lost again"])
    dated = bank.recall(
        "What did Sam lose last week?",
        "chat",
        RecallOptions(limit=5, now=datetime(2026, 3, 9, tzinfo=UTC)),
        expander=QueryExpander(llm),
    )
    assert any("time" in hit.channels for hit in dated.hits)
    bank.close()


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (LLMError("invalid x-api-key", status=401), "invalid x-api-key"),
        (TransientLLMError("overloaded", status=529), "overloaded"),
        (LLMResponse(text="", stop_reason="refusal"), "refusal"),
        ("   \n\n", "no search query"),
        (QUESTION, "no search query"),  # the question said back
    ],
    ids=["error", "overloaded", "refusal", "empty", "echo"],
)
def test_a_model_that_fails_leaves_recall_as_it_was(
    tmp_path: Path, answer: LLMError | LLMResponse | str, why: str
) -> None:
    bank = _bank(tmp_path)
    options = RecallOptions(limit=5)
    plain = bank.recall(QUESTION, "chat", options)
    result = bank.recall(QUESTION, "chat", options, expander=QueryExpander(ScriptedLLM([answer])))
    assert [h.memory.id for h in result.hits] == [h.memory.id for h in plain.hits]
    assert result.expansion is not None and not result.expansion.queries
    assert result.expansion.skipped is not None and why in result.expansion.skipped
    bank.close()


def test_an_answer_cut_at_max_tokens_keeps_its_whole_lines() -> None:
    cut = LLMResponse(text="misplaced keys again\nlosing thi", stop_reason="max_tokens")
    expansion = QueryExpander(ScriptedLLM([cut])).expand(QUESTION)
    assert expansion.queries == ("misplaced keys again",)


def test_the_same_question_is_asked_once(tmp_path: Path) -> None:
    llm = ScriptedLLM([KEYS_QUERIES])
    expander = QueryExpander(llm)
    first = expander.expand(QUESTION)
    again = expander.expand("  What is Sam's   recurring frustration? ")
    assert again.queries == first.queries and again.cached and not first.cached
    assert len(llm.requests) == 1


def test_the_spend_cap_holds_across_processes_sharing_the_store(tmp_path: Path) -> None:
    """Two expanders on one database, as two processes would be: what the first spent counts
    against the second's cap, and a call over it is never sent."""
    store = SQLiteStore(tmp_path / "lamina.db")
    answer = LLMResponse(text=KEYS_QUERIES, input_tokens=900, output_tokens=100)
    first_llm = ScriptedLLM([answer])
    first = QueryExpander(first_llm, caps=SpendCaps(StoreSpendLedger(store), tokens_per_hour=1_100))
    assert first.expand(QUESTION).queries
    other = SQLiteStore(tmp_path / "lamina.db")
    second_llm = ScriptedLLM([KEYS_QUERIES])
    second_caps = SpendCaps(StoreSpendLedger(other), tokens_per_hour=1_100)
    second = QueryExpander(second_llm, caps=second_caps)
    capped = second.expand("What does Ana do before breakfast?")
    assert capped.queries == ()
    assert capped.skipped is not None
    assert "spend cap: 1000 tokens in the last hour" in capped.skipped
    assert second_llm.requests == []  # not sent
    store.close()
    other.close()


def test_parsing_keeps_plain_short_distinct_queries() -> None:
    answer = (
        "Here are queries:\n"
        "1. misplaced keys\n"
        "- Misplaced keys\n"  # a repeat, in other case
        f"* {QUESTION}\n"  # the question itself
        "2) lost wallet\x07 again\n"
        f"3. {'x' * 500}\n"
        "4. one too many\n"
    )
    queries = parse_queries(answer, QUESTION)
    assert len(queries) == MAX_QUERIES
    assert queries[:3] == ("Here are queries:", "misplaced keys", "lost wallet again")
    assert all(len(q) <= MAX_QUERY_CHARS for q in queries)
    assert parse_queries("", QUESTION) == ()


def _expansion_script(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    assert "search queries" in str(body.get("system"))
    assert last_user_text(body) == QUESTION
    return [{"type": "text", "text": KEYS_QUERIES}]


def test_the_recall_command_expands_through_a_provider(tmp_path: Path) -> None:
    """`lamina recall --expand-with anthropic:...` through the real SDK to a scripted API on
    127.0.0.1: the JSON names the queries, the spend is kept in the store; an unreachable
    provider gives a warning and the plain results."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "LAMINA_HOME": str(home),
        "LAMINA_EMBEDDER": "hash",
        "LAMINA_CONFIG": str(tmp_path / "none.toml"),
        "ANTHROPIC_API_KEY": "sk-test",
    }
    bank = _bank(home)  # the data directory's own database
    bank.close()
    command = [sys.executable, "-m", "lamina", "recall", QUESTION, "--bank", "chat", "--json"]
    with ScriptedAPI(_expansion_script) as api:
        done = subprocess.run(
            [*command, "--expand-with", "anthropic:claude-haiku-4-5"],
            env={**env, "ANTHROPIC_BASE_URL": api.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["expansion"]["queries"] == KEYS_QUERIES.splitlines()
    assert "lost my keys" in answer["results"][0]["text"]
    assert len(api.requests) == 1
    spent = SQLiteStore(home / "lamina.db")
    assert spent.spent_since("anthropic:claude-haiku-4-5", datetime(2000, 1, 1, tzinfo=UTC)) > 0
    spent.close()
    # Nothing listens there any more: recall goes on without expansion, and says why.
    down = subprocess.run(
        [*command, "--expand-with", "anthropic:claude-haiku-4-5"],
        env={**env, "ANTHROPIC_BASE_URL": api.url, "LAMINA_QUERY_EXPANDER": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert down.returncode == 0, down.stderr
    answer = json.loads(down.stdout)
    assert answer["expansion"]["queries"] == [] and answer["expansion"]["skipped"]
    assert answer["results"]


@needs_shared
def test_the_locomo_bench_expands_the_lamina_variant_s_questions(tmp_path: Path) -> None:
    """`lamina bench locomo --expand-with` asks the model once per question of the lamina
    variant (never for the baselines) and says how many went unexpanded."""
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    sample["qa"] = [q for q in sample["qa"] if q.get("category") == 2][:4]
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample]), encoding="utf-8")
    asked: list[str] = []

    def script(body: Mapping[str, Any]) -> list[dict[str, Any]]:
        asked.append(last_user_text(body))
        return [{"type": "text", "text": "support group meeting\nLGBTQ group"}]

    args = ["bench", "locomo", "--data", str(data), "--embedder", "hash", "--json"]
    with ScriptedAPI(script) as api:
        done = subprocess.run(
            [sys.executable, "-m", "lamina", *args, "--expand-with", "anthropic:claude-haiku-4-5"],
            env={**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.url},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["lamina"]["expansion"] == {"model": "anthropic:claude-haiku-4-5", "skipped": 0}
    assert sorted(asked) == sorted(q["question"] for q in sample["qa"])
