"""`lamina bench hook` at a tiny size: one JSON document with both paths and both baselines, and
the real hook returned memories on both paths, as did `lamina recall` and `lamina serve`. No
timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import needs_shared


@needs_shared
def test_bench_hook_measures_cold_and_warm_against_the_baselines() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "bench", "hook", "--memories", "200", "--runs", "2",
         "--base-texts", "300", "--deadline-runs", "4", "--via", "plugin", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # exactly one JSON document; progress went to stderr
    assert "200 memories built" in out.stderr
    assert data["benchmark"] == "hook" and data["session_excluded"]
    measured = [*data["baselines"].values(), data["sizes"]["200"]["cold"],
                data["sizes"]["200"]["warm"]]  # fmt: skip
    assert set(data["baselines"]) == {
        "python_pass", "python_no_site", "python_import_numpy_onnxruntime"
    }  # fmt: skip
    # What is measured is said: which Lamina, through which command, and whether a
    # development checkout's import finder (which a user's install has not) is in every run.
    install = data["install"]
    assert isinstance(install["editable"], bool) and install["hook_command"].endswith(" hook")
    assert "run-lamina" in install["hook_command"]  # as the plugin runs it
    assert ("editable install" in out.stderr) == install["editable"]
    assert isinstance(install["site_cpu_ms"], float | int)
    for summary in measured:
        assert summary["runs"] == 2 and summary["nonzero_exits"] == 0
        assert set(summary["cpu_ms"]) == set(summary["wall_ms"]) == {"p50", "p95"}
        assert summary["cpu_ms"]["p50"] > 0 and summary["peak_rss_mb"] > 0
    size = data["sizes"]["200"]
    assert size["memories"] == 200
    # The prompts are the agent questions; a bank of 200 memories holds the answers to some
    # only, and the floor leaves the others without memories (on both paths alike).
    assert 0 < size["cold"]["returned_memories"] == size["warm"]["returned_memories"]
    assert size["warm"]["server_cpu_ms_per_prompt"] >= 0
    # The commands a user runs by hand, beside it: `lamina recall` and a fresh `lamina serve`.
    assert size["recall_command"]["runs"] == 2 and size["recall_command"]["nonzero_exits"] == 0
    assert size["recall_command"]["returned_memories"] == 1.0
    serve = size["serve"]
    assert serve["first_recall"]["returned_memories"] and serve["recall"]["returned_memories"] == 1
    assert serve["first_recall"]["wall_ms"] > 0 and serve["recall"]["runs"] == 2
    # A turn's retain both ways: the Stop hook's worker process, and handed to a warm server
    # (which must have retained every turn, or the bench fails).
    turn = size["turn"]
    assert turn["worker"]["runs"] == 2 and turn["worker"]["nonzero_exits"] == 0
    assert turn["warm"]["nonzero_exits"] == 0 and turn["warm"]["server_cpu_ms"]["p50"] > 0
    assert turn["records_per_turn"]["p50"] > 0
    # The cold hook with its time limit spread from 0.3 to 3 s: it never dies.
    deadlines = size["deadlines"]
    assert deadlines["runs"] == 4 and deadlines["time_limits_s"] == {"min": 0.3, "max": 3.0}
    assert deadlines["aborts"] == 0 and deadlines["nonzero_exits"] == 0


@needs_shared
def test_bench_hook_measures_another_agent_s_hook() -> None:
    """`--agent copilot`: Copilot's hook (its origin and COPILOT_HOOK_DIR, top-level output)
    returns memories on both paths; `--agent gemini`: Gemini's BeforeAgent does too. Each reads
    that agent's own real session (Gemini's made 3 times as long), and the query read from
    its end is the whole read's."""
    for agent, repeat in (("copilot", 1), ("gemini", 3)):
        out = subprocess.run(
            [sys.executable, "-m", "lamina", "bench", "hook", "--memories", "200", "--runs", "2",
             "--base-texts", "300", "--agent", agent, "--session-repeat", str(repeat), "--json"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["agent"] == agent and data["session_excluded"].endswith(agent)
        size = data["sizes"]["200"]
        session = size["session"]
        assert session["bytes"] >= repeat * data["transcript_bytes"] - repeat
        assert session["same_query"] is True
        assert 0 < size["cold"]["returned_memories"] == size["warm"]["returned_memories"], agent
        assert size["cold"]["nonzero_exits"] == size["warm"]["nonzero_exits"] == 0
