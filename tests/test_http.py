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
    def __init__(self, home: Path) -> None:
        self.home = home
        self.keys: dict[str, str] = {}
        for name, bank in (("a", "alpha"), ("b", "beta")):
            out = lamina(home, "keys", "create", name, "--bank", bank, "--json")
            assert out.returncode == 0, out.stderr
            self.keys[name] = json.loads(out.stdout)["key"]
        self.port = free_port()
        env = {**os.environ, "LAMINA_HOME": str(home)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lamina", "serve", "--port", str(self.port),
             "--max-body", "65536"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
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
    assert anonymous.json()["error"]["type"] == "AccessError"
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
    assert server.call("GET", "/v1/banks", key="b").json() == {"banks": []}
    assert [b["bank"] for b in server.call("GET", "/v1/banks").json()["banks"]] == ["alpha"]


def test_async_retain_is_an_operation_any_instance_can_answer(server: Server) -> None:
    started = server.call(
        "POST",
        "/v1/banks/alpha/retain",
        json={"document": "note", "text": "Backups run at 03:00 UTC.", "async": True},
    )
    op = started.json()["operation"]
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
    missing = server.call("DELETE", "/v1/banks/alpha/documents/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    assert server.call("GET", "/openapi.json", key=None).status_code == 200


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
         "/v1/banks/alpha/documents/..%2F..", "/v1/operations/x", "/v1/compile"]
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
