"""What a bank costs a fresh `lamina serve`, measured beside the hook (`lamina bench hook`):
its start-up, its first recall and the ones after it."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from ..access import LOCAL_TOKEN_FILE
from .common import free_port, percentiles, process_cpu_ms

__all__ = ["measure_serve"]

LAMINA = [sys.executable, "-P", "-m", "lamina"]


def _post(url: str, body: dict[str, Any], token: str) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, data=orjson.dumps(body), headers=headers)
    with urllib.request.urlopen(request, timeout=120) as answer:
        found: dict[str, Any] = orjson.loads(answer.read())
        return found


def measure_serve(env: dict[str, str], bank: str, prompts: list[str], runs: int) -> dict[str, Any]:
    """A fresh `lamina serve` on a loopback port: its start-up until /health answers, then its
    first recall (which opens the bank: the cost a user meets after every restart) and `runs`
    recalls after it, each as wall time seen by the client and the server's CPU time."""
    port = free_port()
    server = subprocess.Popen(
        [*LAMINA, "serve", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/",
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.perf_counter()
        while True:
            if server.poll() is not None:
                error = server.stderr.read().decode(errors="replace") if server.stderr else ""
                raise RuntimeError(f"lamina serve exited: {error.strip()[-300:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                if time.perf_counter() - started > 120:
                    raise RuntimeError("lamina serve did not answer /health in 120 s") from None
                time.sleep(0.05)
        up_ms = (time.perf_counter() - started) * 1000
        # A server without API keys asks for the data directory's local token.
        token = (Path(env["LAMINA_HOME"]) / LOCAL_TOKEN_FILE).read_text().strip()
        timings: list[tuple[float, float, bool]] = []
        for i in range(runs + 1):
            before, mark = process_cpu_ms(server.pid), time.perf_counter()
            query = {"query": prompts[i % len(prompts)]}
            found = _post(f"{base}/v1/banks/{bank}/recall", query, token)
            wall = (time.perf_counter() - mark) * 1000
            timings.append((wall, process_cpu_ms(server.pid) - before, bool(found.get("results"))))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    first, rest = timings[0], timings[1:]
    return {
        "start_ms": round(up_ms, 1),
        "first_recall": {
            "wall_ms": round(first[0], 1),
            "server_cpu_ms": round(first[1], 1),
            "returned_memories": first[2],
        },
        "recall": {
            "runs": len(rest),
            "wall_ms": percentiles([w for w, _, _ in rest]),
            "server_cpu_ms": percentiles([c for _, c, _ in rest]),
            "returned_memories": round(sum(r for _, _, r in rest) / max(1, len(rest)), 3),
        },
    }
