"""`lamina bench retain` on a small shared transcript: every process it measures (baselines,
cold and warm retains, and those of another source tree) ran and was measured. No timing or
memory figure is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import CLAUDE_CODE, ROOT, needs_shared


@needs_shared
def test_bench_retain_measures_cold_and_warm_retains_beside_the_baselines_and_another_tree() -> (
    None
):
    small = min(CLAUDE_CODE.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "bench", "retain", str(small),
         "--runs", "1", "--against", str(ROOT), "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["inputs"] == [str(small)]
    assert set(data["baseline"]) == {
        "python -c pass", "lamina --version", "model loaded, one text embedded"
    }  # fmt: skip
    measured = [*data["baseline"].values()]
    for variant in ("this", "against"):
        phases = data["retain"][variant][str(small)]
        measured += [phases["cold"], phases["warm"]]
    for figures in measured:
        assert figures["failed"] == 0 and figures["runs"] == 1, figures
        assert figures["rss_mb"]["max"] > 0 and figures["cpu_ms"]["max"] > 0


def test_bench_retain_refuses_a_folder_without_lamina(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "bench", "retain", str(tmp_path), "--against",
         str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert "no lamina/ package" in json.loads(out.stdout)["error"]["message"]
