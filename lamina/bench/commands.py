"""What a bank costs the commands a user runs by hand, measured beside the hook
(`lamina bench hook`): `lamina recall` as a fresh process, and a fresh `lamina serve`'s first
recall (the one that opens the bank) and the ones after it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from .common import percentiles

__all__ = ["measure_recall_command", "measure_serve"]

Runner = Callable[[list[tuple[list[str], bytes, dict[str, str]]]], list[dict[str, Any]]]
Summary = Callable[[list[dict[str, Any]]], dict[str, Any]]

LAMINA = [sys.executable, "-m", "lamina"]


def measure_recall_command(
    run_all: Runner, summary: Summary, env: dict[str, str], prompts: list[str], runs: int
) -> dict[str, Any]:
    """`lamina recall PROMPT --block` as a fresh process per prompt (the bank from
    LAMINA_BANK): CPU, wall, peak RSS and whether memories came back."""
    jobs = [
        ([*LAMINA, "recall", prompts[i % len(prompts)], "--block"], b"", env) for i in range(runs)
    ]
    return summary(run_all(jobs))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        found: dict[str, Any] = orjson.loads(answer.read())
        return found


def measure_serve(env: dict[str, str], bank: str, prompts: list[str], runs: int) -> dict[str, Any]:
    """A fresh `lamina serve` on a loopback port: its start-up until /health answers, then its
    first recall (which opens the bank: the cost a user meets after every restart) and `runs`
    recalls after it, each as wall time seen by the client and the server's CPU time."""
    port = _free_port()
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
        timings: list[tuple[float, float, bool]] = []
        for i in range(runs + 1):
            before, mark = _cpu_ms(server.pid), time.perf_counter()
            found = _post(f"{base}/v1/banks/{bank}/recall", {"query": prompts[i % len(prompts)]})
            wall = (time.perf_counter() - mark) * 1000
            timings.append((wall, _cpu_ms(server.pid) - before, bool(found.get("results"))))
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
