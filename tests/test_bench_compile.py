"""`lamina bench compile` on small logs built from the shared sessions: the JSON's shape, and
every request it compiled valid. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import needs_shared


@needs_shared
def test_bench_compile_reports_every_size_with_baselines_and_valid_requests() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "bench", "compile",
         "--messages", "200", "--messages", "400", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # exactly one JSON document; progress went to stderr
    assert "400 messages" in out.stderr
    assert data["benchmark"] == "compile"
    assert data["invalid_requests"] == 0
    assert data["over_budget_requests"] == 0
    assert data["log"]["messages_per_pass"] > 0 and data["log"]["sources"]
    assert data["target"]["met"] is None  # 2,000 messages were not asked for
    assert [r["messages"] for r in data["runs"]] == [200, 400]
    for run in data["runs"]:
        assert run["invalid_requests"] == 0 and run["problems"] == []
        assert run["requests_checked"] > 0
        assert run["tool_pairs"]["duplicate_tool_ids"] == 0
        assert run["tool_pairs"]["orphan_results"] == 0
        lamina = run["lamina"]
        for replay in (lamina["live"], lamina["live_unsettled"], lamina["live_ahead"],
                       run["sliding_window"], run["compact_at_threshold"]):  # fmt: skip
            assert replay["compiles"] > 0
            assert set(replay["compile_ms"]) == {"p50", "p95", "p99", "p99.9", "max"}
            assert set(replay["compile_cpu_ms"]) == {"p50", "p95", "p99", "p99.9", "max"}
            assert 0 <= replay["compiles_with_full_gc"] <= replay["compiles"]
        # The same log, settled or not, gets the same requests: only the timing may differ.
        assert (
            lamina["live"]["peak_request_tokens"] == lamina["live_unsettled"]["peak_request_tokens"]
        )
        assert lamina["cold_stored"]["summaries_written"] == 0
        assert lamina["cold_full"]["summaries_written"] > 0
        assert run["log_build"]["ms"] > 0
        memory = run["memory"]
        assert {"log_build", "cold_compile", "warm_compile"} <= set(memory)
        assert memory["bytes_per_message"] > 0
    assert set(data["memory"]["bytes_per_message"]) == {"200", "400"}
    assert data["memory"]["per_message_ratio"] > 0
