"""The inspector's read endpoints on both stores: a bank retained from a shared Claude Code
session, searched, filtered and forgotten from; recall as the hook would inject it; a context
log compiled into summaries drawn as a strip; hook runs from a real hook log; keys that see
only their own bank."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.access import Gate, hash_key
from lamina.bank.bank import MemoryBank
from lamina.bank.retain import RetainOptions
from lamina.config import resolve_settings
from lamina.context.frontier import CompileOptions
from lamina.context.stored import StoredLog
from lamina.context.summarise import ExtractiveSummariser
from lamina.integrations.claude_code.contract import HookLog
from lamina.integrations.claude_code.hook import TIMINGS_MARK
from lamina.readers import read_messages
from lamina.store import open_store
from lamina.tokens import count_text

from .conftest import CLAUDE_CODE, needs_shared

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from lamina.integrations.http import create_app

SESSION = CLAUDE_CODE / "obra-long-conversation.jsonl"
SESSION_ID = "9a9eadc8-c1f1-493e-a0f1-884aa996b05b"
pytestmark = needs_shared


@pytest.fixture
def bank(database: str, tmp_path: Path) -> Iterator[MemoryBank]:
    memory = MemoryBank(open_store(database), retain_options=RetainOptions(embed=False))
    memory.retain_file(SESSION, "alpha")
    memory.retain_messages(
        list(read_messages(str(CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl"))),
        "beta",
        "port",
    )
    yield memory
    memory.close()


def client(bank: MemoryBank, home: Path, gate: Gate | None = None) -> TestClient:
    """A client of the app, sending the gate's token (what a server without keys asks)."""
    app = create_app(home, memory=bank, gate=gate)
    token = {"Authorization": f"Bearer {app.state.gate.token}"}
    return TestClient(app, base_url="http://127.0.0.1", headers=token)


def test_memories_search_filter_and_forget(bank: MemoryBank, tmp_path: Path) -> None:
    api = client(bank, tmp_path)
    everything = api.get("/v1/banks/alpha/memories", params={"limit": 500}).json()
    assert everything["total"] == bank.stats("alpha").memories > 20
    assert sum(everything["kinds"].values()) == everything["total"]
    first = everything["items"][0]
    assert first["document"] == SESSION_ID
    assert first["source"]["file"] == str(SESSION)
    assert first["source"]["first_line"] is not None
    assert first["occurred_at"] is not None
    times = [m["occurred_at"] for m in everything["items"] if m["occurred_at"]]
    assert times == sorted(times, reverse=True)  # newest first

    # A word said in the session finds the memories that say it, and only those.
    found = api.get("/v1/banks/alpha/memories", params={"q": "Containerfile"}).json()
    assert 0 < found["total"] < everything["total"]
    assert all("containerfile" in m["text"].lower() for m in found["items"])
    both = api.get("/v1/banks/alpha/memories", params={"q": "containerfile npm"}).json()
    assert all("npm" in m["text"].lower() for m in both["items"])
    assert both["total"] <= found["total"]

    kind = next(iter(everything["kinds"]))
    only = api.get("/v1/banks/alpha/memories", params={"kind": kind, "limit": 500}).json()
    assert only["total"] == everything["kinds"][kind]
    assert {m["kind"] for m in only["items"]} == {kind}
    old = api.get("/v1/banks/alpha/memories", params={"until": "2000-01-01T00:00:00Z"})
    assert old.json()["total"] == 0
    since = api.get("/v1/banks/alpha/memories", params={"since": times[0]}).json()
    assert since["total"] >= 1 and since["items"][0]["occurred_at"] == times[0]

    page = api.get("/v1/banks/alpha/memories", params={"limit": 5, "offset": 5}).json()
    assert [m["id"] for m in page["items"]] == [m["id"] for m in everything["items"][5:10]]

    one = api.get(f"/v1/banks/alpha/memories/{first['id']}").json()
    assert one["text"] == first["text"]
    assert api.delete(f"/v1/banks/alpha/memories/{first['id']}").status_code == 200
    assert api.get(f"/v1/banks/alpha/memories/{first['id']}").status_code == 404
    after = api.get("/v1/banks/alpha/memories").json()
    assert after["total"] == everything["total"] - 1


def test_memories_name_their_agent_and_session_and_filter_by_agent(
    bank: MemoryBank, tmp_path: Path
) -> None:
    api = client(bank, tmp_path)
    page = api.get("/v1/banks/alpha/memories", params={"limit": 500}).json()
    assert page["agents"] == {"claude-code": 1}
    origins = {json.dumps(m["origin"], sort_keys=True) for m in page["items"]}
    assert len(origins) == 1
    origin = page["items"][0]["origin"]
    assert origin["agent"] == "claude-code" and origin["session_id"] == SESSION_ID
    assert origin["agent_version"]  # the Claude Code reader records no cwd (Codex, Copilot do)
    one = api.get(f"/v1/banks/alpha/memories/{page['items'][0]['id']}").json()
    assert one["origin"] == origin

    by_agent = api.get("/v1/banks/alpha/memories", params={"agent": "claude-code"}).json()
    assert by_agent["total"] == page["total"]
    none = api.get("/v1/banks/alpha/memories", params={"agent": "codex"}).json()
    assert none["total"] == 0 and none["items"] == []
    # The document retained from bare messages says no agent: no origin, and no agent's.
    beta = api.get("/v1/banks/beta/memories").json()
    assert beta["agents"] == {} and all(m["origin"] is None for m in beta["items"])
    assert api.get("/v1/banks/beta/memories", params={"agent": "claude-code"}).json()["total"] == 0

    preview = api.post(
        "/v1/banks/alpha/recall/preview",
        json={"query": "scenario testing oracle", "agents": ["claude-code"]},
    ).json()
    assert preview["results"]
    assert preview["origins"] == {SESSION_ID: origin}
    elsewhere = api.post(
        "/v1/banks/alpha/recall/preview",
        json={"query": "scenario testing oracle", "agents": ["codex"]},
    ).json()
    assert elsewhere["results"] == [] and elsewhere["block"] == ""


def test_bank_detail_and_recall_preview(bank: MemoryBank, tmp_path: Path) -> None:
    api = client(bank, tmp_path)
    detail = api.get("/v1/banks/alpha").json()
    assert detail["documents"] == 1
    assert detail["memories"] == bank.stats("alpha").memories
    assert detail["last_document"] == SESSION_ID
    assert detail["last_retain"] is not None
    assert api.get("/v1/banks/nope").status_code == 404

    preview = api.post("/v1/banks/alpha/recall/preview",
                       json={"query": "scenario testing oracle", "budget": 800}).json()  # fmt: skip
    assert preview["results"], preview
    assert all("lexical" in h["channels"] or "entity" in h["channels"]
               for h in preview["results"])  # fmt: skip
    assert preview["block"].startswith("<lamina_memories>")
    assert preview["block"].rstrip().endswith("</lamina_memories>")
    assert preview["block_tokens"] > 0
    assert 1 <= preview["block_memories"] <= len(preview["results"])
    assert preview["results"][0]["text"].split("\n")[0][:40] in preview["block"]

    composed = api.post(
        "/v1/banks/alpha/recall/preview",
        json={
            "prompt": "what was the oracle for?",
            "context": [
                {"role": "user", "content": "we talked about scenario testing"},
                {"role": "assistant", "content": "yes, with screenshots"},
            ],
        },
    ).json()
    assert composed["composed"] is True
    assert "scenario testing" in composed["query"] and "oracle" in composed["query"]
    bad = api.post("/v1/banks/alpha/recall/preview", json={"budget": 100})
    assert bad.status_code == 400 and "query" in bad.json()["error"]["message"]


HOOK_BUDGET = 600


def _hook_injects(database: str, home: Path, prompt: str) -> str:
    """What a real `lamina hook` process injects for `prompt` from bank alpha, its budget
    HOOK_BUDGET tokens (as Claude Code starts it: the event on stdin)."""
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "another-session",
             "prompt": prompt, "cwd": str(home)}  # fmt: skip
    env = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_DATABASE_URL": database,
           "LAMINA_BANK": "alpha", "LAMINA_HOOK_BUDGET": str(HOOK_BUDGET),
           "LAMINA_HOOK_TIME_LIMIT": "120"}  # fmt: skip
    ran = subprocess.run([sys.executable, "-m", "lamina", "hook"], input=json.dumps(event),
                         capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    output = json.loads(ran.stdout) if ran.stdout.strip() else {}
    context: str = output.get("hookSpecificOutput", {}).get("additionalContext", "")
    return context


def test_recall_preview_shows_what_the_hook_injects_within_its_budget(
    bank: MemoryBank, database: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    settings = resolve_settings({"LAMINA_HOOK_BUDGET": str(HOOK_BUDGET)}, home=home)
    app = create_app(home, memory=bank, settings=settings)
    api = TestClient(app, base_url="http://127.0.0.1",
                     headers={"Authorization": f"Bearer {app.state.gate.token}"})  # fmt: skip
    prompt = "How do we test the oracle against screenshots in scenario tests?"
    preview = api.post("/v1/banks/alpha/recall/preview", json={"prompt": prompt}).json()
    assert preview["budget"] == HOOK_BUDGET  # the hook's setting, as the hook reads it
    assert preview["block"].startswith("<lamina_memories>"), preview
    assert preview["block_memories"] >= 2
    # Within the budget, the block's framing (heading, dates) included: the hook's own code.
    assert 0 < preview["block_tokens"] <= HOOK_BUDGET
    assert count_text(preview["block"]) == preview["block_tokens"]
    injected = _hook_injects(database, home, prompt)
    # The block's first line is the current minute: a preview after the hook is of the same
    # minute if the one before was not.
    again = api.post("/v1/banks/alpha/recall/preview", json={"prompt": prompt}).json()
    assert injected in (preview["block"], again["block"])

    # A query typed as it is gets the same framing and budget.
    typed = api.post("/v1/banks/alpha/recall/preview",
                     json={"query": "scenario testing oracle screenshots"}).json()  # fmt: skip
    assert 0 < typed["block_tokens"] <= HOOK_BUDGET
    wider = api.post(
        "/v1/banks/alpha/recall/preview",
        json={"query": "scenario testing oracle screenshots", "budget": 2000},
    ).json()
    assert HOOK_BUDGET < wider["block_tokens"] <= 2000
    assert wider["block_memories"] > typed["block_memories"]


def _compiled_log(bank: MemoryBank) -> None:
    log = StoredLog.open(bank.store, "alpha", "long", ExtractiveSummariser())
    log.append(read_messages(str(SESSION)))
    log.compile(CompileOptions(budget=6000, reserve=1000))


def test_log_strip_levels_summary_and_preview(bank: MemoryBank, tmp_path: Path) -> None:
    _compiled_log(bank)
    api = client(bank, tmp_path)
    strip = api.get("/v1/banks/alpha/logs/long/strip").json()
    assert strip["compiled"] and not strip["preview"]
    stretches = strip["stretches"]
    # The stretches cover the log once, in order, from oldest to newest.
    assert stretches[0]["start"] == 0 and stretches[-1]["end"] == strip["messages"]
    assert all(a["end"] == b["start"] for a, b in itertools.pairwise(stretches))
    assert len(strip["levels"]) >= 2 and 0 in strip["levels"]
    assert stretches[0]["region"] == "head" and stretches[-1]["region"] == "recent"
    assert sum(s["tokens"] for s in stretches) == strip["tokens"]
    folded = next(s for s in stretches if s["summary"])
    assert folded["shown_tokens"] < folded["tokens"]

    summary = api.get(f"/v1/banks/alpha/logs/long/summaries/{folded['summary']}").json()
    assert summary["level"] == folded["level"]
    assert summary["covered"] == folded["end"] - folded["start"]
    assert summary["messages"][0]["position"] == folded["start"]
    assert summary["text"]

    # A compile with a larger budget shows more raw, is not stored, and says where the
    # cached prefix would break.
    before = bank.store.load_frontier("alpha", "long")
    wider = api.post("/v1/banks/alpha/logs/long/strip", json={"budget": 30000}).json()
    assert wider["preview"] and wider["report"]["budget"] == 30000
    raw = sum(s["end"] - s["start"] for s in wider["stretches"] if s["level"] == 0)
    raw_before = sum(s["end"] - s["start"] for s in stretches if s["level"] == 0)
    assert raw > raw_before
    assert wider["prefix_break"] is not None
    assert bank.store.load_frontier("alpha", "long") == before
    same = api.post("/v1/banks/alpha/logs/long/strip", json={"budget": 6000, "reserve": 1000})
    assert same.json()["prefix_break"] is None
    assert api.post("/v1/banks/alpha/logs/long/strip", json={"budget": 500}).status_code == 422
    assert api.get("/v1/banks/alpha/logs/nope/strip").status_code == 404


def _hook_log(home: Path) -> None:
    log = HookLog(home)
    timings = {"path": "cold", "memories": 3, "chars": 1200, "lexical_only": False,
               "over_limit": False, "stages_ms": {"start": 40.0, "query": 3.5, "search": 80.1},
               "total_ms": 130.2}  # fmt: skip
    message = f"injected 3 memories (1200 chars) (cold path){TIMINGS_MARK}{json.dumps(timings)}"
    log.write("UserPromptSubmit", SESSION_ID, message)
    log.write("Stop", SESSION_ID, "retain started")
    log.write("UserPromptSubmit", "other-session", "no memories found (cold path)")


def test_hook_runs_and_keys(bank: MemoryBank, tmp_path: Path) -> None:
    _hook_log(tmp_path)
    api = client(bank, tmp_path)
    runs = api.get("/v1/hooks").json()
    assert runs["log"] == str(tmp_path / "logs" / "hooks.log")
    assert [r["session"] for r in runs["runs"]] == ["other-session", SESSION_ID, SESSION_ID]
    prompt = runs["runs"][2]
    assert prompt["event"] == "UserPromptSubmit"
    assert prompt["timings"]["stages_ms"]["search"] == 80.1
    assert prompt["outcome"].startswith("injected 3 memories")

    key = "lam_test_alpha_only"
    bank.store.create_api_key("alpha-only", hash_key(key), ["alpha"])
    keyed = client(bank, tmp_path, Gate.at_start(bank.store, "127.0.0.1"))
    assert keyed.get("/v1/banks/alpha").status_code == 401
    headers = {"Authorization": f"Bearer {key}"}
    assert [b["bank"] for b in keyed.get("/v1/banks", headers=headers).json()["banks"]] == ["alpha"]
    assert keyed.get("/v1/banks/alpha/memories", headers=headers).status_code == 200
    for path in ("/v1/banks/beta", "/v1/banks/beta/memories", "/v1/banks/beta/logs/x/strip"):
        assert keyed.get(path, headers=headers).status_code == 404
    assert keyed.post("/v1/banks/beta/recall/preview", json={"query": "rust"},
                      headers=headers).status_code == 404  # fmt: skip
    seen = keyed.get("/v1/hooks", headers=headers).json()
    assert seen["log"] is None  # the server's paths are not a key's business
    assert {r["session"] for r in seen["runs"]} == {SESSION_ID}  # a session of its bank only
    # The pages themselves hold no data and need no key.
    page = keyed.get("/")
    assert page.status_code == 200 and "inspector.js" in page.text
    assert keyed.get("/inspector/inspector.js").status_code == 200


def test_empty_answers(tmp_path: Path) -> None:
    memory = MemoryBank(open_store(str(tmp_path / "empty.db")))
    api = client(memory, tmp_path)
    assert api.get("/v1/banks").json()["banks"] == []
    assert api.get("/v1/hooks").json()["runs"] == []
    assert api.get("/v1/banks/none/memories").status_code == 404
    memory.close()


def test_inspect_refuses_a_port_in_use_in_one_line(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "lamina", "--home", str(tmp_path), "inspect", "--no-browser",
             "--port", str(port)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert out.returncode != 0
    assert out.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert out.stdout == ""


BODIES = {"/recall/preview": {"query": "port"}, "/strip": {"budget": 8000}}


def test_every_inspector_endpoint_needs_a_key_and_hides_other_banks(tmp_path: Path) -> None:
    from fastapi.routing import APIRoute

    from lamina.context.logs import read_message_list
    from lamina.integrations.http_inspect import ROUTERS

    memory = MemoryBank(
        open_store(str(tmp_path / "keys.db")), retain_options=RetainOptions(embed=False)
    )
    said = read_message_list([{"role": "user", "content": "The notes API listens on port 8040."}])
    for name in ("alpha", "beta"):
        memory.retain_messages(said, name, "notes")
        StoredLog.open(memory.store, name, "l", ExtractiveSummariser()).append(said)
    key = "lam_alpha_key"
    memory.store.create_api_key("alpha", hash_key(key), ["alpha"])
    api = client(memory, tmp_path, Gate.at_start(memory.store, "127.0.0.1"))
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) >= 8
    for route in routes:
        for method in route.methods:
            path = route.path.replace(":path}", "}").format(
                bank="beta", log="l", memory_id="m", summary="s"
            )
            body = next((b for end, b in BODIES.items() if path.endswith(end)), None)
            anonymous = api.request(method, path, json=body)
            assert anonymous.status_code == 401, (method, path)
            other = api.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})
            if "{bank}" in route.path:
                assert other.status_code == 404, (method, path, other.text)
                assert "beta" not in other.text.replace("'beta'", "")  # nothing of it leaks
            else:
                assert other.status_code == 200, (method, path)
    memory.close()


def test_a_log_never_compiled_is_one_raw_stretch(database: str, tmp_path: Path) -> None:
    from lamina.context.logs import read_message_list

    memory = MemoryBank(open_store(database), retain_options=RetainOptions(embed=False))
    said = read_message_list([{"role": "user", "content": "hello there"},
                              {"role": "assistant", "content": "hi, how can I help?"}])  # fmt: skip
    memory.retain_messages(said, "alpha", "d")
    StoredLog.open(memory.store, "alpha", "fresh", ExtractiveSummariser()).append(said)
    StoredLog.open(memory.store, "alpha", "empty", ExtractiveSummariser())
    api = client(memory, tmp_path)
    strip = api.get("/v1/banks/alpha/logs/fresh/strip").json()
    assert not strip["compiled"]
    assert [(s["start"], s["end"], s["region"], s["level"]) for s in strip["stretches"]] == [
        (0, 2, "uncompiled", 0)
    ]
    empty = api.post("/v1/banks/alpha/logs/empty/strip", json={"budget": 8000})
    assert empty.status_code == 400 and "no messages" in empty.json()["error"]["message"]
    memory.close()


def test_memory_filters_run_in_the_store(database: str, tmp_path: Path) -> None:
    """Words are taken literally (`%` and `_` too), case ignored beyond ASCII; tags, time bounds
    (inclusive), documents and pages filter as a user reads them; kinds count the whole bank."""
    from datetime import UTC, datetime

    from lamina.memories import Cursor, Memory
    from lamina.store.base import MemoryFilter, RetainBatch

    def day(n: int) -> datetime:
        return datetime(2024, 1, n, 12, 0, tzinfo=UTC)

    said = [  # id, document, kind, text, time, tags (storage order)
        ("m1", "d1", "turn", "Tickets were 50% off on Friday", day(3), ("trip",)),
        ("m2", "d1", "turn", "Tickets were 500 off at the door", day(2), ("trip",)),
        ("m3", "d2", "fact", "The file_name column holds it", day(2), ("code",)),
        ("m4", "d2", "turn", "The filename column holds it", None, ("code",)),
        ("m5", "d3", "turn", "Wir wohnen in der GROSSEN Straße, ÄPFEL(2)* im Korb", day(1), ()),
    ]
    memory = MemoryBank(open_store(database), retain_options=RetainOptions(embed=False))
    store = memory.store
    for mid, doc, kind, text, when, tags in said:
        made = Memory(mid, "f", doc, kind, text, (f"r-{mid}",), when, when, tags=tags,
                      content_hash=mid)  # fmt: skip
        version = store.get_cursor("f", doc).version
        store.apply_retain(RetainBatch("f", doc, version, Cursor(), [f"r-{mid}"], [made]))
    api = client(memory, tmp_path)

    def ids(**params: object) -> tuple[list[str], int]:
        answer = api.get("/v1/banks/f/memories", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert page["kinds"] == {"fact": 1, "turn": 4}  # the whole bank, whatever the filter
        return [m["id"] for m in page["items"]], page["total"]

    # Newest first; a tie keeps storage order; no time comes last.
    assert ids() == (["m1", "m2", "m3", "m5", "m4"], 5)
    assert ids(q="50%") == (["m1"], 1)
    assert ids(q="50% FRIDAY") == (["m1"], 1)
    assert ids(q="file_name") == (["m3"], 1)
    assert ids(q="FILE_") == (["m3"], 1)
    assert ids(q="%") == (["m1"], 1)
    assert ids(q="äpfel straße") == (["m5"], 1)
    assert ids(q="äpfel(2)*") == (["m5"], 1)
    assert ids(q="äpfel2") == ([], 0)
    assert ids(q="column holds") == (["m3", "m4"], 2)
    assert ids(q="column nowhere") == ([], 0)
    assert ids(tag="trip") == (["m1", "m2"], 2)
    assert ids(tag="code", kind="turn") == (["m4"], 1)
    assert ids(tag="tri") == ([], 0)
    assert ids(document="d2") == (["m3", "m4"], 2)
    assert ids(document="nope") == ([], 0)
    assert ids(kind="fact") == (["m3"], 1)
    # Bounds are inclusive, in any zone; a memory without a time is outside any bound.
    assert ids(since="2024-01-02T12:00:00Z") == (["m1", "m2", "m3"], 3)
    assert ids(until="2024-01-02T13:00:00+01:00") == (["m2", "m3", "m5"], 3)
    assert ids(since="2024-01-02T00:00:00Z", until="2024-01-02T23:59:59Z") == (["m2", "m3"], 2)
    # Pages slice the same order; the total counts every page, also past the last one.
    assert ids(limit=2, offset=1) == (["m2", "m3"], 5)
    assert ids(limit=2, offset=4) == (["m4"], 5)
    assert ids(offset=9) == ([], 5)
    assert ids(tag="trip", offset=5) == ([], 2)
    assert ids(q="tickets", limit=1, offset=1) == (["m2"], 2)
    # Oldest first is exactly the reverse, pages and filters alike; without the kinds.
    every = store.page_memories("f", MemoryFilter(), 10, oldest_first=True, count_kinds=False)
    assert [m.id for m in every.memories] == ["m4", "m5", "m3", "m2", "m1"]
    assert (every.total, every.kinds) == (5, {})
    page = store.page_memories("f", MemoryFilter(document="d1"), 1, 1, oldest_first=True)
    assert ([m.id for m in page.memories], page.total) == (["m1"], 2)
    memory.close()


def test_injections_list_their_memories_and_cards_carry_marks(
    bank: MemoryBank, tmp_path: Path
) -> None:
    from lamina.integrations.claude_code.injections import record

    alpha = [m.id for m in bank.memories("alpha", with_embeddings=False)][:2]
    beta = next(iter(bank.memories("beta", with_embeddings=False))).id
    record(tmp_path, {"session": SESSION_ID, "bank": "alpha", "prompt": "which plan?",
                      "injected": True, "memories": [{"id": i, "kind": "turn", "score": 0.5,
                      "tokens": 10} for i in alpha], "tokens": 20, "ms": 120.0, "path": "cold",
                      "reason": None})  # fmt: skip
    record(tmp_path, {"session": "s-2", "bank": "beta", "prompt": "a haiku", "injected": False,
                      "memories": [], "tokens": 0, "ms": 90.0, "path": "cold",
                      "reason": "nothing reaches the floor"})  # fmt: skip
    bank.mark_wrong("alpha", alpha[0], "a guess")
    api = client(bank, tmp_path)
    listed = api.get("/v1/injections").json()
    assert listed["log"] == str(tmp_path / "logs" / "injections.jsonl")
    newest, oldest = listed["injections"]
    assert newest["bank"] == "beta" and newest["reason"] == "nothing reaches the floor"
    assert [m["id"] for m in oldest["memories"]] == alpha
    assert all(m["text"] for m in oldest["memories"])
    assert oldest["memories"][0]["mark"]["state"] == "wrong"
    assert oldest["memories"][1]["mark"] is None
    card = api.get(f"/v1/banks/alpha/memories/{alpha[0]}").json()
    assert card["mark"]["note"] == "a guess"
    page = api.get("/v1/banks/alpha/memories", params={"limit": 500}).json()["items"]
    assert [m["id"] for m in page if m["mark"]] == [alpha[0]]
    # The card's button: PUT then DELETE on the API's marks route, from the inspector's page.
    assert api.delete(f"/v1/banks/alpha/marks/{alpha[0]}").status_code == 200
    assert api.put(f"/v1/banks/alpha/marks/{beta}", json={"state": "wrong"}).status_code == 404
    # A key sees the prompts of its banks only, and not the log's path.
    key = "lam_test_alpha_only"
    bank.store.create_api_key("alpha-only", hash_key(key), ["alpha"])
    keyed = client(bank, tmp_path, Gate.at_start(bank.store, "127.0.0.1"))
    seen = keyed.get("/v1/injections", headers={"Authorization": f"Bearer {key}"}).json()
    assert seen["log"] is None and [e["bank"] for e in seen["injections"]] == ["alpha"]
