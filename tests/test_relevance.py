"""Relevance: every recalled memory's score is from 0 to 1, never rises down the results, keeps
recall's order, and is the same number in Python, the CLI's JSON, HTTP and MCP."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import lamina
from lamina.bank.recall import RecallOptions
from lamina.bank.relevance import ceiling, ranked, relevance

from .conftest import EXAMPLE

QUERIES = [
    "which database did we choose, and why?",
    "which environment variable holds the database path?",
    "how many books has the user read?",  # a list question: its first results are spread
]

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")


def test_the_mapping_is_increasing_bounded_and_capped_down_the_list() -> None:
    fused = [-40.0, -7.0, -0.878, 0.0, 3.0, 800.0]
    learned = [relevance(f, "learned") for f in fused]
    assert learned == sorted(learned) and all(0.0 <= v <= 1.0 for v in learned)
    assert learned[3] == 0.5 and round(learned[2], 3) == 0.294
    top = ceiling("combsum", {"dense": 1.0, "lexical": 1.0, "time": 1.0}, ["dense", "lexical"], 60)
    assert top == 2.0 and relevance(2.0, "combsum", top) == 1.0
    assert relevance(2.5, "combsum", top) == 1.0 and relevance(-1.0, "combsum", top) == 0.0
    first_everywhere = 2 / 61
    rrf = ceiling("rrf", {"dense": 1.0, "lexical": 1.0}, ["dense", "lexical"], 60)
    assert rrf == pytest.approx(first_everywhere)
    assert ranked([0.4, 0.6, 0.3, 0.35]) == [0.4, 0.4, 0.3, 0.3]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("relevance") / "home"
    with lamina.open(folder) as store:
        store.bank("alpha").retain_file(EXAMPLE)
    return folder


@pytest.mark.parametrize("fusion", ["learned", "combsum", "rrf"])
def test_scores_are_in_0_1_and_descend_with_the_hits(home: Path, fusion: str) -> None:
    with lamina.open(home) as store:
        bank = store.bank("alpha")
        for query in QUERIES:
            hits = list(bank.recall(query, options=RecallOptions(fusion=fusion, budget=4000)))
            scores = [hit.score for hit in hits]
            assert len(hits) > 3, query
            assert all(0.0 <= s <= 1.0 for s in scores), (query, scores)
            assert scores == sorted(scores, reverse=True), (query, scores)
            # Each is its own fused score's relevance, or the one above it when that is lower.
            top = ceiling(fusion, RecallOptions().channel_weights, ["dense", "lexical"], 60)
            own = [relevance(hit.fused, fusion, top) for hit in hits]
            assert all(s <= o + 1e-12 for s, o in zip(scores, own, strict=True))
            if fusion == "learned":  # the logistic of the model's log-odds
                assert scores[0] == own[0] == pytest.approx(1 / (1 + math.exp(-hits[0].fused)))


def _cli_json(home: Path, query: str) -> list[tuple[str, float]]:
    from .test_http import lamina as run_lamina

    out = run_lamina(home, "recall", query, "--bank", "alpha", "--json")
    assert out.returncode == 0, out.stderr
    return [(r["id"], r["score"]) for r in json.loads(out.stdout)["results"]]


async def _mcp(home: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lamina", "mcp", "--bank", "alpha"],
        env={**os.environ, "LAMINA_HOME": str(home)},
    )
    out: list[list[tuple[str, float]]] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for query in queries:
            result = await session.call_tool("recall", {"query": query, "detail": True})
            data: dict[str, Any] = json.loads(result.content[0].text)
            out.append([(r["id"], r["score"]) for r in data["results"]])
    return out


def test_the_cli_http_and_mcp_show_the_same_scores(home: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("fastapi")
    from .test_http import Server

    python = []
    with lamina.open(home) as store:
        for query in QUERIES:
            hits = store.bank("alpha").recall(query)
            python.append([(h.memory.id, round(h.score, 6)) for h in hits])
    cli = [_cli_json(home, query) for query in QUERIES]
    mcp = anyio.run(_mcp, home, QUERIES)
    server = Server(home)
    try:
        http = []
        for query in QUERIES:
            answer = server.call("POST", "/v1/banks/alpha/recall", json={"query": query})
            assert answer.status_code == 200, answer.text
            http.append([(r["id"], r["score"]) for r in answer.json()["results"]])
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=30)
    assert python[0] and 0 < python[0][0][1] <= 1
    assert cli == python
    assert http == python
    assert mcp == python
