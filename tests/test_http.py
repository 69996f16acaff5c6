"""HTTP through a real server process: keys, bank isolation, limits, error shapes, and no 5xx
on malformed input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import CLAUDE_CODE, needs_shared

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lamina(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "lamina", *args], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip


class Server:
    def __init__(self, home: Path, database_url: str | None = None, max_body: int = 65536) -> None:
        self.home = home
        self.keys: dict[str, str] = {}
        db = ("--database-url", database_url) if database_url else ()
        for name, bank in (("a", "alpha"), ("b", "beta")):
            out = lamina(home, *db, "keys", "create", name, "--bank", bank, "--new-bank", "--json")
            assert out.returncode == 0, out.stderr
            self.keys[name] = json.loads(out.stdout)["key"]
        self.port = free_port()
        env = {**os.environ, "LAMINA_HOME": str(home)}
        env.pop("LAMINA_DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lamina", *db, "serve", "--port", str(self.port),
             "--max-body", str(max_body)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the server did not start")

    def call(self, method: str, path: str, key: str | None = "a", **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        headers.update(kw.pop("headers", {}))
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("http") / "home")
    yield srv
    srv.proc.terminate()
    srv.proc.wait(timeout=30)


MESSAGES = [
    {"role": "user", "content": "Which port does the notes API listen on?"},
    {"role": "assistant", "content": "It listens on port 8040, behind the systemd unit."},
]


def test_keys_are_required_and_scoped_to_their_banks(server: Server) -> None:
    anonymous = server.call("GET", "/v1/banks", key=None)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["type"] == "unauthorized"
    wrong = httpx.get(f"{server.url}/v1/banks", headers={"Authorization": "Bearer lam_nope"})
    assert wrong.status_code == 401
    retained = server.call(
        "POST", "/v1/banks/alpha/retain", json={"document": "chat-1", "messages": MESSAGES}
    )
    assert retained.status_code == 200, retained.text
    assert retained.json()["new_records"] == 2
    again = server.call(
        "POST", "/v1/banks/alpha/retain", json={"document": "chat-1", "messages": MESSAGES}
    )
    assert again.json()["status"] == "unchanged"
    found = server.call("POST", "/v1/banks/alpha/recall", json={"query": "which port?"})
    assert found.status_code == 200 and "8040" in found.json()["results"][0]["text"]
    # Key b can neither read nor write alpha, nor see that it exists.
    assert (
        server.call("POST", "/v1/banks/alpha/recall", key="b", json={"query": "port"}).status_code
        == 404
    )
    assert (
        server.call(
            "POST", "/v1/banks/alpha/retain", key="b", json={"document": "x", "text": "hi there"}
        ).status_code
        == 404
    )
    assert server.call("GET", "/v1/banks", key="b").json() == {
        "banks": [],
        "total": 0,
        "limit": 100,
        "offset": 0,
    }
    assert [b["bank"] for b in server.call("GET", "/v1/banks").json()["banks"]] == ["alpha"]


def test_async_retain_is_an_operation_any_instance_can_answer(server: Server) -> None:
    started = server.call(
        "POST",
        "/v1/banks/alpha/retain",
        json={"document": "note", "text": "Backups run at 03:00 UTC.", "async": True},
    )
    assert started.status_code == 202, started.text
    op = started.json()["operation"]
    assert started.headers["location"] == f"/v1/operations/{op}"
    deadline = time.monotonic() + 30
    state = {}
    while time.monotonic() < deadline:
        state = server.call("GET", f"/v1/operations/{op}").json()
        if state["status"] != "running":
            break
        time.sleep(0.2)
    assert state["status"] == "done" and state["result"]["new_records"] == 1
    assert server.call("GET", f"/v1/operations/{op}", key="b").status_code == 404
    from lamina.store.sqlite import SQLiteStore

    assert SQLiteStore(server.home / "lamina.db").get_operation(op)["status"] == "done"


def test_lists_page_and_document_ids_may_hold_slashes(server: Server) -> None:
    path = "/v1/banks/alpha/documents"
    for n in range(3):
        body = {"document": f"dir/sub/file-{n}.jsonl", "messages": MESSAGES}
        assert server.call("POST", "/v1/banks/alpha/retain", json=body).status_code == 200
    everything = server.call("GET", path).json()
    ids = [d["id"] for d in everything["documents"]]
    assert everything["total"] == len(ids) >= 3
    page = server.call("GET", path, params={"limit": 1, "offset": 1}).json()
    assert page["documents"] == everything["documents"][1:2]
    assert (page["total"], page["limit"], page["offset"]) == (len(ids), 1, 1)
    assert server.call("GET", path, params={"limit": 0}).status_code == 422
    # A document id with '/' in it, sent as is or percent-encoded.
    assert server.call("DELETE", f"{path}/dir/sub/file-0.jsonl").json()["memories_forgotten"] > 0
    gone = server.call("DELETE", f"{path}/dir%2Fsub%2Ffile-1.jsonl")
    assert gone.status_code == 200 and gone.json()["document"] == "dir/sub/file-1.jsonl"
    assert server.call("DELETE", f"{path}/dir/sub/file-0.jsonl").status_code == 404
    left = [d["id"] for d in server.call("GET", path).json()["documents"]]
    assert "dir/sub/file-2.jsonl" in left and "dir/sub/file-0.jsonl" not in left
    for listing in ("/v1/banks", "/v1/banks/alpha/logs"):
        paged = server.call("GET", listing, params={"limit": 1}).json()
        assert paged["limit"] == 1 and paged["total"] >= len(paged[listing.rsplit("/")[-1]])


def test_compile_endpoint_returns_a_valid_request(server: Server) -> None:
    from lamina.context import validate_anthropic, validate_openai

    conversation = []
    for n in range(40):  # about 12k tokens in under 64 KB
        conversation.append({"role": "user", "content": f"question {n} " + "about caching " * 25})
        conversation.append({"role": "assistant", "content": f"answer {n} " + "cache it " * 40})
    out = server.call("POST", "/v1/compile", json={"messages": conversation, "budget": 4000,
                                                   "reserve": 500})  # fmt: skip
    assert out.status_code == 200, out.text
    data = out.json()
    assert validate_anthropic(data["request"]) == []
    assert data["report"]["tokens"] <= 3500 and data["report"]["summaries_by_level"]
    bad = server.call("POST", "/v1/compile", json={"messages": conversation, "budget": 1000,
                                                   "reserve": 900})  # fmt: skip
    assert bad.status_code == 400
    body = {"messages": conversation, "budget": 4000, "reserve": 500, "request_format": "openai"}
    out = server.call("POST", "/v1/compile", json=body)
    assert out.status_code == 200, out.text
    openai = out.json()
    assert validate_openai(openai["request"]) == []
    assert openai["report"]["tokens"] <= 3500
    assert openai["report"]["summaries_by_level"] == data["report"]["summaries_by_level"]
    unknown = server.call("POST", "/v1/compile", json={"messages": conversation,
                                                       "request_format": "gemini"})  # fmt: skip
    assert unknown.status_code == 422


def test_compiles_keep_the_system_prompt(server: Server) -> None:
    conversation: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for n in range(30):
        conversation.append({"role": "user", "content": f"question {n} " + "about caching " * 25})
        conversation.append({"role": "assistant", "content": f"answer {n} " + "cache it " * 40})
    body = {"messages": conversation, "budget": 4000, "reserve": 500}
    out = server.call("POST", "/v1/compile", json=body).json()
    assert out["request"]["system"][0]["text"] == "Be brief." and out["report"]["tokens"] <= 3500
    body["request_format"] = "openai"
    out = server.call("POST", "/v1/banks/alpha/logs/with-system/compile", json=body).json()
    assert out["request"]["messages"][0] == {"role": "system", "content": "Be brief."}
    again = server.call("POST", "/v1/banks/alpha/logs/with-system/compile", json={}).json()
    assert again["request"]["system"][0]["text"] == "Be brief."
    # Apart from the messages, as Anthropic's `system` field (a string or text blocks).
    apart = {"messages": conversation[1:], "budget": 4000, "reserve": 500,
             "system": [{"type": "text", "text": "Be terse."}]}  # fmt: skip
    out = server.call("POST", "/v1/compile", json=apart).json()
    assert out["request"]["system"][0]["text"] == "Be terse."
    path = "/v1/banks/alpha/logs/with-system"
    added = server.call("POST", f"{path}/messages", json={"messages": conversation[1:3],
                                                          "system": "Be kind."})  # fmt: skip
    assert added.status_code == 200, added.text
    kind = server.call("POST", f"{path}/compile", json={"request_format": "openai"}).json()
    assert kind["request"]["messages"][0] == {"role": "system", "content": "Be kind."}


def test_limits_and_error_shapes(server: Server) -> None:
    big = server.call(
        "POST", "/v1/banks/alpha/retain", json={"document": "d", "text": "x" * 100_000}
    )
    assert big.status_code == 413 and big.json()["error"]["type"] == "too_large"
    broken = server.call(
        "POST",
        "/v1/banks/alpha/recall",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert broken.status_code == 422 and "error" in broken.json()
    assert broken.json()["error"]["type"] == "invalid_request"
    missing = server.call("DELETE", "/v1/banks/alpha/documents/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    assert missing.json()["error"]["type"] == "not_found"
    assert server.call("GET", "/openapi.json", key=None).status_code == 200
    # Unknown routes and wrong methods answer in the same shape, with their own types.
    nowhere = server.call("GET", "/v1/nowhere")
    assert nowhere.status_code == 404
    assert nowhere.json() == {"error": {"type": "not_found", "message": "no such route"}}
    wrong = server.call("GET", "/v1/banks/alpha/recall")
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "method_not_allowed"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(
        st.sampled_from(["query", "budget", "document", "messages", "text", "format", "async",
                         "role", "content", "since", "tags", "limit"]) | st.text(max_size=6),
        c, max_size=5),
    max_leaves=15,
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(
        ["/v1/banks/alpha/recall", "/v1/banks/alpha/retain", "/v1/banks/%00/recall",
         "/v1/banks/alpha/documents/..%2F..", "/v1/operations/x", "/v1/compile",
         "/v1/banks/alpha/logs/fuzz/messages", "/v1/banks/alpha/logs/fuzz/compile"]
    ),
    body=json_values,
)  # fmt: skip
def test_malformed_requests_never_get_a_5xx(server: Server, path: str, body: Any) -> None:
    method = "GET" if path.startswith("/v1/operations") else "POST"
    response = server.call(method, path, json=body)
    assert response.status_code < 500, response.text


def test_serving_beyond_loopback_needs_a_key(tmp_path: Path) -> None:
    out = lamina(tmp_path / "home", "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert out.returncode == 2 and "without API keys" in out.stderr


# -- context logs ------------------------------------------------------------------------------


def chat(turns: int, start: int = 0) -> list[dict[str, Any]]:
    """A conversation in the Anthropic shape, without ids (as clients send it)."""
    out: list[dict[str, Any]] = []
    for n in range(start, start + turns):
        out.append({"role": "user", "content": f"question {n} " + "about the cache " * 20})
        out.append({"role": "assistant", "content": f"answer {n} " + "keep it warm " * 30})
    return out


def test_log_append_is_idempotent_and_compile_needs_a_log(server: Server) -> None:
    path = "/v1/banks/alpha/logs/chat-1"
    first = server.call("POST", f"{path}/messages", json={"messages": chat(10)})
    assert first.status_code == 200, first.text
    assert first.json() | {} == {"bank": "alpha", "log": "chat-1", "received": 20, "added": 20,
                                 "messages": 20}  # fmt: skip
    # The whole conversation again, then with two new turns: only what is new is added.
    assert server.call("POST", f"{path}/messages", json={"messages": chat(10)}).json()["added"] == 0
    grown = server.call("POST", f"{path}/messages", json={"messages": chat(12)}).json()
    assert (grown["added"], grown["messages"]) == (4, 24)
    # Only the new ones, in the OpenAI shape this time; a message said twice in one request
    # is kept twice.
    twice = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Done."}] * 2
    more = server.call("POST", f"{path}/messages", json={"messages": twice, "format": "openai"})
    assert (more.json()["added"], more.json()["messages"]) == (4, 28)

    listed = server.call("GET", "/v1/banks/alpha/logs").json()["logs"]
    [entry] = [log for log in listed if log["id"] == "chat-1"]
    assert entry["messages"] == 28 and entry["tokens"] > 28 * 20 and entry["summaries"] == 0
    assert entry["updated"]

    missing = server.call("POST", "/v1/banks/alpha/logs/nope/compile", json={})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    assert server.call("GET", "/v1/banks/alpha/logs/nope").status_code == 404
    low = server.call("POST", f"{path}/compile", json={"budget": 10})
    assert low.status_code == 422 and "budget" in low.json()["error"]["message"]
    tight = server.call("POST", f"{path}/compile", json={"budget": 1000, "reserve": 900})
    assert tight.status_code == 422 and "reserve" in tight.json()["error"]["message"]
    empty = server.call("POST", f"{path}/messages", json={"messages": []})
    assert empty.status_code == 422 and "messages" in empty.json()["error"]["message"]


def test_a_key_sees_only_its_banks_logs(server: Server) -> None:
    path = "/v1/banks/alpha/logs/private"
    assert server.call("POST", f"{path}/messages", json={"messages": chat(3)}).status_code == 200
    compiled = server.call("POST", f"{path}/compile", json={"budget": 4000, "reserve": 500})
    assert compiled.status_code == 200, compiled.text
    for method, url, body in [
        ("GET", "/v1/banks/alpha/logs", None),
        ("GET", path, None),
        ("POST", f"{path}/messages", {"messages": chat(1, start=50)}),
        ("POST", f"{path}/compile", {"budget": 4000, "reserve": 500}),
        ("POST", f"{path}/compile", {"messages": chat(1, start=50)}),
        ("DELETE", path, None),
    ]:
        theirs = server.call(method, url, key="b", json=body)
        assert theirs.status_code == 404, (method, url, theirs.text)
        assert theirs.json()["error"]["message"] == "no bank named 'alpha'"
        assert server.call(method, url, key=None, json=body).status_code == 401
    # Nothing of the above reached alpha's log, and beta holds no log of its own.
    assert server.call("GET", path).json()["messages"] == 6
    assert server.call("GET", "/v1/banks/beta/logs", key="b").status_code == 404
    server.call("POST", "/v1/banks/beta/logs/own/messages", key="b", json={"messages": chat(1)})
    assert [e["id"] for e in server.call("GET", "/v1/banks/beta/logs", key="b").json()["logs"]] == [
        "own"
    ]
    assert server.call("GET", "/v1/banks/beta/logs/private", key="b").status_code == 404


def test_deleting_a_log_removes_it(server: Server) -> None:
    path = "/v1/banks/alpha/logs/doomed"
    server.call("POST", f"{path}/messages", json={"messages": chat(40)})
    assert server.call("POST", f"{path}/compile", json={"budget": 4000, "reserve": 500}).json()[
        "report"
    ]["summaries_written"]
    gone = server.call("DELETE", path)
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert "doomed" not in [
        e["id"] for e in server.call("GET", "/v1/banks/alpha/logs").json()["logs"]
    ]
    assert server.call("DELETE", path).status_code == 404
    assert server.call("POST", f"{path}/compile", json={}).status_code == 404
    # A new log of the same name starts empty: no summary of the old one comes back.
    server.call("POST", f"{path}/messages", json={"messages": chat(1)})
    assert server.call("GET", path).json()["summaries"] == 0


def test_pins_over_http_hold_messages_raw_and_conflicts_are_409(server: Server) -> None:
    path = "/v1/banks/alpha/logs/pinned"
    assert server.call("POST", f"{path}/messages", json={"messages": chat(60)}).status_code == 200
    tight = {"budget": 4_000, "reserve": 500}
    held = "question 20 " + "about the cache " * 20  # message 40
    folded = server.call("POST", f"{path}/compile", json=tight).json()
    assert held not in json.dumps(folded["request"]), "unpinned, it is folded at this budget"
    put = server.call("PUT", f"{path}/pins/q20", json={"mode": "raw", "messages": [40, 41]})
    assert put.status_code == 200, put.text
    assert put.json()["pins"] == ["pin 'q20' (messages 40-41, raw)"]
    kept = server.call("POST", f"{path}/compile", json=tight).json()
    assert held in json.dumps(kept["request"])
    assert kept["report"]["pins"][0]["shown_at_levels"] == [0]
    clash = server.call("PUT", f"{path}/pins/fold", json={"mode": "exact", "level": 1,
                                                         "messages": [41, 50]})  # fmt: skip
    assert clash.status_code == 409 and "'q20'" in clash.json()["error"]["message"]
    both = server.call("PUT", f"{path}/pins/x", json={"mode": "raw", "messages": [1, 2],
                                                     "document": "a.md"})  # fmt: skip
    assert both.status_code == 422
    other = server.call(
        "PUT", f"{path}/pins/q20", key="b", json={"mode": "raw", "messages": [1, 1]}
    )
    assert other.status_code == 404, "another bank's key cannot pin"
    shown = server.call("GET", path).json()
    assert [p["name"] for p in shown["pins"]] == ["q20"]
    assert server.call("DELETE", f"{path}/pins/q20").status_code == 200
    again = server.call("DELETE", f"{path}/pins/q20")
    assert again.status_code == 404
    assert again.json()["error"]["message"] == "no pin 'q20' on log 'pinned' in bank 'alpha'"
    no_log = server.call("DELETE", "/v1/banks/alpha/logs/nolog/pins/q20")
    assert no_log.json()["error"] == {"type": "not_found",
                                      "message": "no log 'nolog' in bank 'alpha'"}  # fmt: skip


def spotter_batches(count: int = 6) -> list[list[dict[str, Any]]]:
    """spotter-258c7280's records in `count` consecutive slices, each cut where a live agent
    compiles: before a model call (a new response starts), with every tool call answered."""
    path = CLAUDE_CODE / "spotter-258c7280.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    cuts, seen, pending = [], set(), set()
    for i, record in enumerate(records):
        content = (record.get("message") or {}).get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if record.get("type") == "assistant":
            if record["message"].get("id") not in seen and not pending and i > 200:
                cuts.append(i)
            seen.add(record["message"].get("id"))
        pending |= {b["id"] for b in blocks if b.get("type") == "tool_use"}
        pending -= {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
    chosen = [cuts[len(cuts) * n // count] for n in range(count)] + [len(records)]
    return [records[a:b] for a, b in zip([0, *chosen], chosen, strict=False)]


def unmarked(request: dict[str, Any]) -> list[Any]:
    """The request's messages without their cache breakpoints."""
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"}
                          for b in m["content"]]}
        for m in request["messages"]
    ]  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def log_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, str]]:
    database = str(tmp_path / "db" / "lamina.db")
    if request.param == "postgres":
        database = str(request.getfixturevalue("pg_url"))
    srv = Server(tmp_path / "home", database_url=database, max_body=64 * 1024 * 1024)
    yield srv, database
    srv.proc.terminate()
    srv.proc.wait(timeout=30)


@needs_shared
def test_a_stored_log_keeps_its_prefix_and_summarises_once(log_server: tuple[Server, str]) -> None:
    from lamina.context import validate_anthropic
    from lamina.store import open_store

    server, database = log_server
    path = "/v1/banks/alpha/logs/spotter"
    options = {"budget": 32_000, "reserve": 4_000}
    previous: dict[str, Any] | None = None
    written = grown_kept = 0
    batches = spotter_batches()
    # Only what is new each time; at the end, the whole transcript again (nothing to add).
    for batch in [*batches, [r for b in batches for r in b]]:
        out = server.call("POST", f"{path}/compile", json={**options, "messages": batch})
        assert out.status_code == 200, out.text
        data = out.json()
        assert validate_anthropic(data["request"]) == []
        assert data["report"]["tokens"] <= 28_000
        written += data["report"]["summaries_written"]
        if previous is not None and data["report"]["folds"] == 0:
            # Nothing had to fold: the previous request is the prefix of this one (cache
            # breakpoints move on; the provider's cache ignores them).
            before = unmarked(previous["request"])
            assert unmarked(data["request"])[: len(before)] == before
            grown = data["report"]["log_messages"] > previous["report"]["log_messages"]
            grown_kept += grown
        previous = data
    assert data["report"]["summaries_written"] == 0  # the repeat wrote nothing
    assert written > 0 and grown_kept >= 1
    store = open_store(database)
    try:
        summaries = store.load_summaries("alpha", "spotter")
        # Compiles wrote some; the rest were written ahead of need, in the background, for
        # the next fold. Each span once.
        assert len(summaries) >= written
        assert len({(s.level, s.start, s.end) for s in summaries}) == len(summaries)
        assert len({s.id for s in summaries}) == len(summaries)
    finally:
        store.close()
    [entry] = server.call("GET", "/v1/banks/alpha/logs").json()["logs"]
    assert entry["summaries"] == len(summaries)
    assert entry["messages"] == data["report"]["log_messages"]
    shown = server.call("GET", path).json()
    assert (
        shown["last_frontier"]["raw_messages"] + shown["last_frontier"]["folded_messages"]
        == (entry["messages"])
    )
    openai = server.call("POST", f"{path}/compile", json={**options, "request_format": "openai"})
    assert openai.status_code == 200 and openai.json()["report"]["summaries_written"] == 0


def test_a_memory_superseded_over_http_yields_to_its_replacement_until_unmarked(
    server: Server,
) -> None:
    notes = [
        {"role": "user", "content": "Which queue does the mailer use?"},
        {"role": "assistant", "content": "The mailer reads the redis queue named outbox-7."},
    ]
    server.call("POST", "/v1/banks/alpha/retain", json={"document": "mailer", "messages": notes})
    server.call("POST", "/v1/banks/alpha/retain", json={"document": "mailer-fix", "text":
                "Correction: the mailer reads the SQS queue outbox-8 since the move."})  # fmt: skip
    query = {"query": "which queue does the mailer read?"}
    before = [r["id"] for r in server.call("POST", "/v1/banks/alpha/recall", json=query).json()
              ["results"]]  # fmt: skip
    old = before[0]
    docs = {"query": "SQS queue outbox-8", "documents": ["mailer-fix"]}
    new = server.call("POST", "/v1/banks/alpha/recall", json=docs).json()["results"][0]["id"]
    # Key b may not mark alpha's memories, nor learn the bank exists.
    assert server.call("PUT", f"/v1/banks/alpha/marks/{old}", key="b",
                       json={"state": "wrong"}).status_code == 404  # fmt: skip
    body = {"state": "superseded", "replacement": new, "note": "moved"}
    marked = server.call("PUT", f"/v1/banks/alpha/marks/{old}", json=body)
    assert marked.status_code == 200, marked.text
    assert marked.json()["mark"]["replacement"] == new
    after = server.call("POST", "/v1/banks/alpha/recall", json=query).json()["results"]
    ids = [r["id"] for r in after]
    assert old not in ids and ids[0] == new and after[0]["correction"] == {"replaces": [old]}
    listed = server.call("GET", "/v1/banks/alpha/marks").json()["marks"]
    assert [m["memory"] for m in listed] == [old]
    assert server.call("DELETE", f"/v1/banks/alpha/marks/{old}").status_code == 200
    assert server.call("DELETE", f"/v1/banks/alpha/marks/{old}").status_code == 404
    missing = server.call("PUT", "/v1/banks/alpha/marks/nope", json={"state": "wrong"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    again = [r["id"] for r in server.call("POST", "/v1/banks/alpha/recall", json=query).json()
             ["results"]]  # fmt: skip
    assert again == before
