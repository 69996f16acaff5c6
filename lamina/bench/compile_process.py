"""`lamina bench compile --process`: `lamina compile FILE --bank B` as whole processes.

The transcripts: the shared Claude Code sessions (not their subagents' files), their JSON Lines
records written pass after pass into one file, every record, message and tool id suffixed
`~<pass>` from the second pass on (so ids stay unique and each tool call is still answered by
its own result), the last session cut (in proportion to its lines) where the file reaches
about N log messages (the report gives the log's true size). For each size, a fresh data
directory: the **first** call (it reads, redacts, counts and stores the whole log), then
`runs` **second** calls with nothing new, then `runs` calls each after 40 more lines of the
next session were **appended** to the file. Each call is its own process; its CPU time (user +
system, from `wait4`), wall time and peak RSS are reported; bytecode is cached in the run's
folder (as an installed package has it) after one untimed warm-up compile. The **baseline**
is the same interpreter doing nothing (`python -c pass`) and starting Lamina's CLI
(`python -m lamina --version`), measured in the same run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ..errors import InputError

__all__ = ["process_bench"]

DEFAULT_PROCESS_SIZES = (323, 1_910, 20_055)


def _suffixed(record: Any, suffix: str) -> Any:
    """A record of a later pass: its ids (record, message, tool calls and results) suffixed."""
    if not suffix or not isinstance(record, dict):
        return record
    out = dict(record)
    for key in ("uuid", "parentUuid", "leafUuid"):
        if isinstance(out.get(key), str):
            out[key] = out[key] + suffix
    body = out.get("message")
    if isinstance(body, dict):
        body = dict(body)
        if isinstance(body.get("id"), str):
            body["id"] = body["id"] + suffix
        content = body.get("content")
        if isinstance(content, list):
            blocks = []
            for block in content:
                if isinstance(block, dict):
                    block = dict(block)
                    if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                        block["id"] = block["id"] + suffix
                    if block.get("type") == "tool_result" and isinstance(
                        block.get("tool_use_id"), str
                    ):
                        block["tool_use_id"] = block["tool_use_id"] + suffix
                blocks.append(block)
            body["content"] = blocks
        out["message"] = body
    return out


def _session_lines(path: Path) -> tuple[list[bytes], int]:
    """A session's complete lines and how many of its messages enter a context log."""
    from ..context.log import enters_log
    from ..readers import read_transcript

    lines = [ln for ln in path.read_bytes().splitlines() if ln.strip()]
    count = sum(1 for m in read_transcript(str(path)).messages if enters_log(m))
    return lines, count


def _pass_lines(lines: Sequence[bytes], copy: int) -> list[bytes]:
    if copy == 0:
        return list(lines)
    suffix = f"~{copy}"
    out = []
    for line in lines:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(line)
            continue
        out.append(orjson.dumps(_suffixed(value, suffix)))
    return out


class _Sessions:
    """Sessions in a fixed order, pass after pass, each pass with its own ids."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.sessions = [_session_lines(p) for p in files]
        if not any(count for _lines, count in self.sessions):
            raise InputError("no message of these transcripts enters a context log")
        self.at = 0

    def next(self) -> tuple[list[bytes], int]:
        lines, count = self.sessions[self.at % len(self.sessions)]
        copy = self.at // len(self.sessions)
        self.at += 1
        return _pass_lines(lines, copy), count


def _write(path: Path, sessions: _Sessions, size: int) -> int:
    """Write sessions to `path` until it holds about `size` log messages; how many it holds."""
    held = 0
    with path.open("wb") as out:
        while held < size:
            lines, count = sessions.next()
            if held + count > size:  # the session's first lines, in proportion
                lines = lines[: max(1, len(lines) * (size - held) // max(1, count))]
                count = size - held
            out.write(b"\n".join(lines) + b"\n")
            held += count
    return held


def _run(argv: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    """One process: its CPU (user + system), wall time, peak RSS and exit status, stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        return {"exit": proc.returncode, "error": err.decode(errors="replace").strip()[-300:]}
    return {
        "cpu_ms": round((usage.ru_utime + usage.ru_stime) * 1000, 1),
        "wall_ms": round(wall, 1),
        "rss_mb": round(usage.ru_maxrss / 1024, 1),
        "stdout": out,
    }


def _stats(done: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """CPU, wall time and RSS of the calls that succeeded; how many failed, and why the
    first did (a log that does not fit its budget exits 6)."""
    runs = [r for r in done if "exit" not in r]
    failed = [r for r in done if "exit" in r]
    out: dict[str, Any] = {"failed": len(failed)}
    if failed:
        out["first_failure"] = failed[0]
    if not runs:
        return out

    def pct(key: str, q: float) -> float:
        values = sorted(r[key] for r in runs)
        return round(float(values[min(len(values) - 1, int(q * len(values)))]), 1)

    return {
        **out,
        "runs": len(runs),
        "cpu_ms": {"p50": round(statistics.median(r["cpu_ms"] for r in runs), 1),
                   "p95": pct("cpu_ms", 0.95), "max": pct("cpu_ms", 1.0)},
        "wall_ms": {"p50": round(statistics.median(r["wall_ms"] for r in runs), 1),
                    "p95": pct("wall_ms", 0.95)},
        "rss_mb_max": max(r["rss_mb"] for r in runs),
    }  # fmt: skip


def _one_size(
    root: Path, sessions: _Sessions, size: int, runs: int, budget: int, env: dict[str, str]
) -> dict[str, Any]:
    folder = root / f"n{size}"
    folder.mkdir()
    file = folder / "session.jsonl"
    held = _write(file, sessions, size)
    env = {**env, "LAMINA_HOME": str(folder / "home")}
    argv = [sys.executable, "-m", "lamina", "compile", str(file), "--bank", "bench",
            "--budget", str(budget), "--json"]  # fmt: skip
    first = _run(argv, env)
    if "exit" in first:
        return {"written_messages": held, "first": first}
    report = orjson.loads(first.pop("stdout"))["report"]
    second = [_run(argv, env) for _ in range(runs)]
    requests = [orjson.loads(s.pop("stdout"))["request"] for s in second if "stdout" in s]
    same = all(r == requests[0] for r in requests)
    appended: list[dict[str, Any]] = []
    for _ in range(runs):
        lines, _count = sessions.next()
        with file.open("ab") as out:
            out.write(b"\n".join(lines[:40]) + b"\n")
        one = _run(argv, env)
        one.pop("stdout", None)
        appended.append(one)
    return {
        "messages": report["log_messages"],
        "written_messages": held,
        "file_bytes": file.stat().st_size,
        "first": first,
        "second": _stats(second),
        "appended_40_lines": _stats(appended),
        "second_outputs_identical": same,
    }


def _warm_up(root: Path, file: Path, env: dict[str, str]) -> None:
    """One untimed compile, so the modules it imports are compiled to bytecode."""
    env = {**env, "LAMINA_HOME": str(root / "warm-home")}
    _run([sys.executable, "-m", "lamina", "compile", str(file), "--bank", "warm", "--json"], env)


def process_bench(
    files: Sequence[Path], sizes: Sequence[int], runs: int, budget: int
) -> dict[str, Any]:
    """See the module's doc."""
    sessions = _Sessions(files)
    with tempfile.TemporaryDirectory(prefix="lamina-bench-compile-") as tmp:
        root = Path(tmp)
        # Bytecode cached (in the run's folder) as an installed package has it.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("LAMINA_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        _warm_up(root, files[0], env)
        base_env = {**env, "LAMINA_HOME": str(root / "base-home")}
        baseline = {
            "python_c_pass": _stats([_run([sys.executable, "-c", "pass"], env)
                                     for _ in range(runs)]),
            "lamina_version": _stats([_run([sys.executable, "-m", "lamina", "--version"],
                                           base_env) for _ in range(runs)]),
        }  # fmt: skip
        results = [_one_size(root, sessions, n, runs, budget, env) for n in sizes]
    return {
        "benchmark": "compile --process",
        "budget": budget,
        "what": "lamina compile FILE --bank B --json, each call a new process",
        "sources": [p.name for p in files],
        "baseline": baseline,
        "sizes": results,
        "machine": {"cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)},
    }
