"""`lamina bench inspector`: how long the web inspector's pages take to show a large bank, in a
real browser, against the same pages on a small bank (the baseline) in the same run.

The large bank is built as `lamina bench latency` builds its banks (real turns of the shared
data recombined, vectors from theirs), with a context log compiled from the longest shared
Claude Code session and a hook log of a few hundred runs. A real `lamina serve` answers on
127.0.0.1; Debian's Chromium, driven headless by Playwright, opens each page afresh and the time
is measured from the navigation to the page's content being shown. Without Chromium (or
Playwright) only the API's answer times are measured, and `browser` says why.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from ..access import LOCAL_TOKEN_FILE
from ..bank.bank import MemoryBank
from ..context.frontier import CompileOptions
from ..context.stored import StoredLog
from ..context.summarise import ExtractiveSummariser
from ..errors import InputError
from ..integrations.claude_code.hook import TIMINGS_MARK
from ..readers import read_messages
from .common import count_option, emit, free_port, json_option, percentiles, shared_data_dir
from .latency import _base_texts, build

__all__ = ["inspector_bench"]

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
EMBEDDED_TEXTS = 3000
SMALL = 500


def _pages(bank: str, word: str) -> list[tuple[str, str, str]]:
    return [
        ("banks", "#/banks", ".card"),
        ("memories", f"#/memories?bank={bank}", "#memories .memory"),
        ("memories_search", f"#/memories?bank={bank}&q={word}", "#memory-count"),
        ("recall", f"#/recall?bank={bank}&q=what+did+we+decide+about+the+trip", "#block, p.empty"),
        ("logs", f"#/logs?bank={bank}&log=long", "#strip button"),
        ("hooks", "#/hooks", "table, p.empty"),
    ]


def _api(bank: str, word: str) -> list[tuple[str, str, str, dict[str, Any] | None]]:
    base = f"/v1/banks/{bank}"
    return [
        ("bank_detail", "GET", base, None),
        ("memories_page", "GET", f"{base}/memories?limit=50", None),
        ("memories_search", "GET", f"{base}/memories?q={word}", None),
        ("memories_document", "GET", f"{base}/memories?document=doc0", None),
        ("memories_kind_page", "GET", f"{base}/memories?kind=turn&offset=1000", None),
        ("recall_preview", "POST", f"{base}/recall/preview",
         {"query": "what did we decide about the trip", "budget": 1024}),
        ("log_strip", "GET", f"{base}/logs/long/strip", None),
        ("hooks", "GET", "/v1/hooks", None),
    ]  # fmt: skip


def _prepare(home: Path, large: int) -> dict[str, float]:
    texts, _ = _base_texts()
    sample = random.Random(11).sample(texts, min(EMBEDDED_TEXTS, len(texts)))
    memory = MemoryBank.open(home)
    started = time.perf_counter()
    vectors = memory.embedder.embed_documents(sample)
    embed_s = time.perf_counter() - started
    started = time.perf_counter()
    for name, n in (("bench-small", SMALL), (f"bench-{large}", large)):
        build(memory, name, n, sample, vectors)
        memory.prepare(name)
    build_s = time.perf_counter() - started
    claude = shared_data_dir("claude-code")
    assert claude is not None
    longest = max(claude.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    started = time.perf_counter()
    for name in ("bench-small", f"bench-{large}"):
        log = StoredLog.open(memory.store, name, "long", ExtractiveSummariser())
        log.append(read_messages(str(longest)))
        log.compile(CompileOptions(budget=8000, reserve=1000))
    compile_s = time.perf_counter() - started
    memory.close()
    (home / "logs").mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with (home / "logs" / "hooks.log").open("w", encoding="utf-8") as handle:
        for i in range(600):
            stamp = (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            timings = {"path": "cold", "memories": 4, "chars": 2000, "lexical_only": False,
                       "stages_ms": {"start": 40.0, "query": 3.0, "search": 60.0 + i % 40},
                       "total_ms": 110.0 + i % 40}  # fmt: skip
            handle.write(f"{stamp} UserPromptSubmit doc{i % 20} injected 4 memories (2000 chars)"
                         f" (cold path){TIMINGS_MARK}{json.dumps(timings)}\n")  # fmt: skip
    return {"embed_s": round(embed_s, 1), "build_s": round(build_s, 1),
            "compile_s": round(compile_s, 1)}  # fmt: skip


def _browser_times(
    url: str, banks: dict[str, str], word: str, runs: int, token: str
) -> dict[str, Any]:
    chromium = os.environ.get("LAMINA_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        return {"unavailable": f"no Chromium at {chromium}"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"unavailable": "the playwright package is not installed"}
    out: dict[str, Any] = {}
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        out["version"] = browser.version
        for label, bank in banks.items():
            timings: dict[str, Any] = {}
            for page_name, where, ready in _pages(bank, word):
                values: list[float] = []
                for _ in range(runs + 1):  # the first load warms the server: not counted
                    context = browser.new_context(
                        extra_http_headers={"Authorization": f"Bearer {token}"}
                    )
                    page = context.new_page()
                    started = time.perf_counter()
                    page.goto(url + where)
                    page.wait_for_selector(ready, timeout=120_000)
                    values.append((time.perf_counter() - started) * 1000)
                    context.close()
                timings[page_name] = percentiles(values[1:])
            out[label] = timings
        browser.close()
    return out


def _api_times(url: str, banks: dict[str, str], word: str, runs: int, token: str) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=120, headers=headers) as client:
        for label, bank in banks.items():
            timings: dict[str, Any] = {}
            for name, method, path, body in _api(bank, word):
                values: list[float] = []
                for _ in range(runs + 1):
                    started = time.perf_counter()
                    answer = client.request(method, path, json=body)
                    values.append((time.perf_counter() - started) * 1000)
                    if answer.status_code != 200:
                        raise InputError(f"{method} {path} answered {answer.status_code}")
                timings[name] = percentiles(values[1:])
            out[label] = timings
    return out


@click.command("inspector")
@count_option("--memories", at_least=1000, default=10_000, help="Memories in the large bank.")
@count_option("--runs", at_least=1, default=5, help="Loads of each page (after one not counted).")
@json_option
def inspector_bench(memories: int, runs: int, as_json: bool) -> None:
    """Page load times of the web inspector on a large bank, against a 500-memory bank.

    Example: lamina bench inspector --memories 10000 --runs 5 --json"""
    word = "restaurant"
    with tempfile.TemporaryDirectory(prefix="lamina-bench-inspector-") as tmp:
        home = Path(tmp) / "home"
        click.echo(f"building a {memories:,}-memory bank and a {SMALL}-memory one", err=True)
        prepared = _prepare(home, memories)
        port = free_port()
        env = {**os.environ, "LAMINA_HOME": str(home)}
        env.pop("LAMINA_DATABASE_URL", None)
        server = subprocess.Popen(
            [sys.executable, "-P", "-m", "lamina", "serve", "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/"
        try:
            import httpx

            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise InputError("lamina serve did not start") from None
                    time.sleep(0.2)
            banks = {"large": f"bench-{memories}", "baseline_small": "bench-small"}
            click.echo("measuring the API, then the pages in Chromium", err=True)
            # A server without API keys asks for the data directory's local token.
            token = (home / LOCAL_TOKEN_FILE).read_text().strip()
            api = _api_times(url, banks, word, runs, token)
            pages = _browser_times(url, banks, word, runs, token)
        finally:
            server.terminate()
            server.wait(timeout=30)
    emit(
        {
            "benchmark": "inspector",
            "memories": {"large": memories, "baseline_small": SMALL},
            "runs": runs,
            "page_load_ms": {k: v for k, v in pages.items() if k in banks},
            "browser": pages.get("version") or pages.get("unavailable"),
            "api_ms": api,
            "search": f"q={word}: every word in the text, filtered and paged in the database",
            "data": "synthetic: texts recombined from two real turns (as `lamina bench latency`)",
            **prepared,
        },
        as_json,
    )
