"""Mixed load on one bank of a real `lamina serve` process (SQLite and PostgreSQL) and of a
real `lamina mcp` over HTTP: eight threads retaining and recalling at once get no 5xx, and the
bank answers normally afterwards. Figures: `server_errors` must stay 0."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from .servers import Served

pytest.importorskip("fastapi")

THREADS = 8
ROUNDS = 25


def storm(call: Any) -> Counter[int]:
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(ROUNDS):
            if (n + i) % 2:
                said = [f"Worker {n} step {i}: which port for service {i}?",
                        f"Service {i} of worker {n} listens on {8000 + i}."]  # fmt: skip
                roles = ("user", "assistant")
                messages = [
                    {"role": role, "content": text} for role, text in zip(roles, said, strict=True)
                ]
                body = {"document": f"doc-{n}", "messages": messages}
                status = call("POST", "/v1/banks/load/retain", json=body).status_code
            else:
                query = {"query": f"which port does service {i} listen on?"}
                status = call("POST", "/v1/banks/load/recall", json=query).status_code
            with lock:
                statuses[status] += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return statuses


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_mixed_retain_and_recall_load_gets_no_server_error(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    db = str(request.getfixturevalue("pg_url")) if kind == "postgres" else None
    server = Served(tmp_path / "home", "serve", db=db)
    token = server.token

    def call(method: str, path: str, **kw: Any) -> Any:
        return server.call(method, path, key=token, **kw)

    try:
        seed = {"document": "seed", "text": "The notes API listens on port 8040."}
        assert call("POST", "/v1/banks/load/retain", json=seed).status_code == 200
        statuses = storm(call)
        server_errors = sum(n for status, n in statuses.items() if status >= 500)
        assert server_errors == 0, statuses
        assert sum(statuses.values()) == THREADS * ROUNDS
        # Nothing was poisoned: later recalls answer, and find what the storm retained.
        for i in range(5):
            found = call("POST", "/v1/banks/load/recall", json={"query": "port 8040"})
            assert found.status_code == 200, found.text
            assert found.json()["results"], i
    finally:
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]


mcp = pytest.importorskip("mcp")


async def mcp_storm(url: str, token: str) -> list[str]:
    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    failures: list[str] = []

    async def client(n: int) -> None:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
            streamable_http_client(url, http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            for i in range(ROUNDS // 2):
                if (n + i) % 2:
                    result = await session.call_tool("retain_text", {
                        "text": f"Worker {n} note {i}: service {i} runs on port {9000 + i}.",
                        "bank": "load", "document": f"notes-{n}"})  # fmt: skip
                else:
                    result = await session.call_tool(
                        "recall", {"query": f"port of service {i}", "bank": "load"}
                    )
                if result.is_error:
                    failures.append(str(result.content))

    async with anyio.create_task_group() as group:
        for n in range(THREADS):
            group.start_soon(client, n)
    return failures


def test_mcp_over_http_under_mixed_load(tmp_path: Path) -> None:
    server = Served(tmp_path / "home", "mcp", "--transport", "streamable-http", "--bank", "load")
    try:
        seed = anyio.run(mcp_storm, f"{server.url}/mcp", server.token)
        assert seed == [] or all("no bank named" in f for f in seed), seed[:3]
        assert anyio.run(mcp_storm, f"{server.url}/mcp", server.token) == []
    finally:
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]
