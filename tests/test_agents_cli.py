"""Codex, Gemini CLI and Copilot CLI sessions through the CLI, as a user runs it: show, turns,
retain, recall; each document records the agent and session it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SHARED

CODEX = SHARED / "codex" / "cryptosodi__battle-cities__codex-session.jsonl"
GEMINI = SHARED / "gemini" / "mai0313__session-eefc44a3_2025-10-05.json"
GEMINI_JSONL = SHARED / "agent-clis-generated" / "gemini-0.61.0"
COPILOT = SHARED / "copilot" / "mai0313__copilot-96ef38f0_2026-04-23.jsonl"

pytestmark = pytest.mark.skipif(
    not (CODEX.exists() and GEMINI.exists() and COPILOT.exists()),
    reason="../shared/data/{codex,gemini,copilot} are not beside the checkout",
)


def lamina(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_BANK", None)
    env.pop("LAMINA_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_show_and_turns_read_each_agent(tmp_path: Path) -> None:
    gemini_jsonl = next(GEMINI_JSONL.glob("session-*.jsonl"))
    for path, fmt, turns in ((CODEX, "codex", 1), (GEMINI, "gemini", 1), (COPILOT, "copilot", 1),
                             (gemini_jsonl, "gemini", 2)):  # fmt: skip
        shown = lamina(tmp_path, "show", str(path), "--json")
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr[-500:]
        data = json.loads(shown.stdout)
        assert (data["format"], data["turns"], data["warnings"]) == (fmt, turns, 0)
        listed = lamina(tmp_path, "turns", str(path), "--json")
        assert listed.returncode == 0, listed.stderr[-500:]
        assert len(json.loads(listed.stdout)) == turns


def test_retain_and_recall_a_fact_said_in_each_agent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retained = lamina(home, "retain", str(CODEX), str(GEMINI), str(COPILOT), "--bank", "agents",
                      "--json")  # fmt: skip
    assert retained.returncode == 0, retained.stderr[-1000:]
    files = json.loads(retained.stdout)["files"]
    assert [f["status"] for f in files] == ["retained"] * 3
    assert all(f["memories_added"] > 0 and not f.get("warnings") for f in files)
    documents = json.loads(lamina(home, "documents", "--bank", "agents", "--json").stdout)
    by_agent = {d["metadata"]["agent"]: d for d in documents["documents"]}
    assert by_agent["codex"]["id"] == "019f15de-d815-7440-a6de-8068ba05b6b5"
    assert by_agent["codex"]["format"] == "codex"
    assert by_agent["codex"]["metadata"]["agent_version"] == "0.142.4"
    assert by_agent["gemini"]["id"] == "eefc44a3-0832-4bc0-ac33-fa668f038213"
    assert by_agent["copilot"]["id"] == "96ef38f0-9d09-45c3-8124-6448c36090ed"
    assert by_agent["copilot"]["metadata"]["session_id"] == by_agent["copilot"]["id"]
    # A fact said in each session is recalled from that session first.
    for query, agent, said in (
        ("apply for the agentic engineering grant by Superteam", "codex", "Superteam"),
        ("cargo clippy 警告 程式碼更簡潔", "gemini", "clippy"),
        ("Rust 自動生成文檔 rustdoc mdBook GitHub Pages", "copilot", "mdBook"),
    ):
        found = lamina(home, "recall", query, "--bank", "agents", "--json")
        assert found.returncode == 0, found.stderr[-500:]
        best = json.loads(found.stdout)["results"][0]
        assert best["document"] == by_agent[agent]["id"], (agent, best["text"][:200])
        assert said in best["text"]
    again = lamina(home, "retain", str(CODEX), "--bank", "agents", "--json")
    assert json.loads(again.stdout)["files"][0]["status"] == "unchanged"


def test_recall_by_agent_keeps_to_that_agent_s_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retained = lamina(home, "retain", str(CODEX), str(COPILOT), "--bank", "agents")
    assert retained.returncode == 0, retained.stderr[-1000:]
    query = "Rust 自動生成文檔 rustdoc mdBook GitHub Pages"  # said in the Copilot session

    def found(*args: str) -> list[str]:
        ran = lamina(home, "recall", query, "--bank", "agents", "--json", *args)
        assert ran.returncode == 0, ran.stderr[-500:]
        return [hit["document"] for hit in json.loads(ran.stdout)["results"]]

    copilot, codex = "96ef38f0-9d09-45c3-8124-6448c36090ed", "019f15de-d815-7440-a6de-8068ba05b6b5"
    assert copilot in found()
    assert set(found("--agent", "codex")) == {codex}
    assert set(found("--agent", "Copilot", "--agent", "gemini")) == {copilot}
    assert found("--agent", "claude-code") == []  # no session of that agent: nothing, not all
    assert found("--agent", "codex", "--document", copilot) == []

    # The same filter over HTTP and MCP.
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lamina.bank.bank import MemoryBank
    from lamina.integrations.http import create_app
    from lamina.integrations.mcp_tools import Tools

    memory = MemoryBank.open(home)
    try:
        app = create_app(home, memory=memory)
        token = {"Authorization": f"Bearer {app.state.gate.token}"}
        api = TestClient(app, base_url="http://127.0.0.1", headers=token)
        for agents, expected in ((["codex"], {codex}), (["claude-code"], set())):
            body = {"query": query, "agents": agents}
            answer = api.post("/v1/banks/agents/recall", json=body)
            assert answer.status_code == 200, answer.text
            assert {hit["document"] for hit in answer.json()["results"]} == expected
        tools = Tools(memory, app.state.gate, "agents", None)  # type: ignore[arg-type]
        recalled = tools.recall(query, agents=["codex"]).structured_content or {}
        assert {m["document"] for m in recalled["memories"]} == {codex}
    finally:
        memory.close()
