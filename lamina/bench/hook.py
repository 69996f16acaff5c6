"""`lamina bench hook`: what one prompt costs, measured the way Claude Code pays it.

For each bank size a data directory with one SQLite bank is built from the shared real turns
(`latency.build`: texts recombined from two real turns, vectors the normalised mean of theirs,
so 100k memories need no hour of embedding), plus the current session: the largest shared Claude
Code transcript, retained as a document of its own (with `--agent`, the current session is
instead that agent's largest real session file, retained beside it, so the hook reads the
format it reads under that agent). Then the real `lamina hook` runs as a fresh
process per prompt, a UserPromptSubmit payload on stdin naming that transcript and, as
`session_id`, its document (so the current-session exclusion is exercised), once per run on
the cold path and once with a warm server running (whose own CPU per prompt is reported too).
Each child is reaped with os.wait4, which gives its own CPU time (user + sys) and peak RSS. The
baselines are measured the same way in the same run: `python -c pass` (the floor of any hook)
and `python -c "import numpy, onnxruntime"` (the floor of a hook that loads the model's
runtime), and `python -S -c pass` (the interpreter without `site`: the difference is what the
installation's .pth files cost every process). The hook runs as Claude Code runs it, through the
installed `lamina` script beside this Python (`--via module`: `python -P -m lamina`), and the JSON
says whether this Lamina is an editable install (a development checkout: its import finder costs
every process several milliseconds that a user's install does not pay; a warning says so).
Beside the hook, per bank: `lamina recall` as a fresh process, a fresh `lamina serve`'s first
recall and the ones after it (`lamina.bench.commands`), and (Claude Code) what a turn costs
after the prompt: the retain worker the Stop hook starts, run as its own process once per real
turn appended to a session on a copy of the bank, and the same handed to a warm server (`turn`).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import orjson

from ..bank.bank import MemoryBank
from ..store.sqlite import SQLiteStore
from .commands import measure_serve
from .common import count_option, emit, json_option, percentiles, process_cpu_ms, shared_data_dir
from .latency import _base_texts, build

__all__ = ["hook_bench"]

BANK = "bench"
SESSION = "bench-session"
"""The current session's document in every bank built."""
LARGE = 50_000


def _progress(message: str) -> None:
    click.echo(message, err=True)


_RUNNER = """
import json, os, subprocess, sys, time
out = []
for command, stdin, env in json.loads(sys.stdin.read()):
    started = time.perf_counter()
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, cwd="/")
    try:
        child.stdin.write(stdin.encode())
        child.stdin.close()
    except BrokenPipeError:
        pass
    output = child.stdout.read()
    child.stdout.close()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    out.append({"wall_ms": (time.perf_counter() - started) * 1000,
                "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
                "rss_mb": usage.ru_maxrss / 1024, "exit": child.returncode,
                "memories": "lamina_memories" in output.decode(errors="replace")})
print(json.dumps(out))
"""
"""Runs the measured children. A child's peak RSS (ru_maxrss) includes the memory of the process
that started it, as it was when the child was forked, so the children are started by this small
runner rather than by the benchmark, which holds the embedding model and the banks."""


def _default_model_bank(db: Path) -> bool:
    """Whether a kept bank was embedded by the default model (one an earlier version built with
    its default is built again, so the hook is timed with the model new banks get)."""
    from ..embed import DEFAULT_MODEL, bank_embedder

    if not db.is_file():
        return False
    store = SQLiteStore(db)
    try:
        return bank_embedder(store.bank_embedders(BANK)).name == DEFAULT_MODEL
    finally:
        store.close()


def _run_all(jobs: list[tuple[list[str], bytes, dict[str, str]]]) -> list[dict[str, Any]]:
    """Run each child to its end, one after the other, and measure it: wall time, its own CPU
    time (user + sys, from os.wait4) and its peak RSS."""
    spec = [(command, stdin.decode(), env) for command, stdin, env in jobs]
    done = subprocess.run(
        [sys.executable, "-I", "-c", _RUNNER],
        input=orjson.dumps(spec),
        capture_output=True,
        check=True,
        cwd="/",
    )
    results: list[dict[str, Any]] = orjson.loads(done.stdout)
    return results


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": len(runs),
        "cpu_ms": percentiles([r["cpu_ms"] for r in runs]),
        "wall_ms": percentiles([r["wall_ms"] for r in runs]),
        "peak_rss_mb": round(max((r["rss_mb"] for r in runs), default=0.0), 1),
        "returned_memories": round(sum(r["memories"] for r in runs) / max(1, len(runs)), 3),
        "nonzero_exits": sum(r["exit"] != 0 for r in runs),
    }


AGENT_ENV: dict[str, dict[str, str]] = {
    "claude-code": {},
    "codex": {"LAMINA_HOOK_ORIGIN": "codex-user"},
    "gemini": {"LAMINA_HOOK_ORIGIN": "gemini-user"},
    "copilot": {"LAMINA_HOOK_ORIGIN": "copilot-user", "COPILOT_HOOK_DIR": "/nonexistent/hooks"},
}
"""What each agent's installed hook has in its environment besides Claude Code's (`--agent`)."""


def _hook_env(
    home: Path, time_limit: float, pycache: Path, agent: str = "claude-code"
) -> dict[str, str]:
    """The measured children's environment. They use compiled byte code, as an installed
    package does (pip compiles it at install): PYTHONDONTWRITEBYTECODE is dropped and the byte
    code kept in a folder of this run (PYTHONPYCACHEPREFIX), compiled by `_compile` before
    anything is measured, so no child compiles Lamina's modules from source."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LAMINA_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(LAMINA_HOME=str(home), LAMINA_BANK=BANK, LAMINA_HOOK_TIME_LIMIT=f"{time_limit:g}")
    env.update(AGENT_ENV[agent])
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _compile(env: dict[str, str]) -> None:
    """Compile Lamina's modules into the children's byte-code folder."""
    package = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(package)],
        env=env, capture_output=True, check=False, timeout=600,
    )  # fmt: skip


_MODULE = [sys.executable, "-P", "-m", "lamina"]


def _script() -> Path | None:
    """The installed `lamina` script beside this Python (what Claude Code's hooks run)."""
    script = Path(sys.executable).parent / "lamina"
    return script if script.is_file() and os.access(script, os.X_OK) else None


def _plugin_launcher() -> Path | None:
    """The Claude Code plugin's launcher: of the checkout this Lamina runs from, else of the
    checkout in the working directory (an installed copy has none: the plugin is installed
    from the repository)."""
    where = Path("plugins") / "lamina" / "scripts" / "run-lamina"
    for launcher in (Path(__file__).resolve().parents[2] / where, Path.cwd() / where):
        if launcher.is_file():
            return launcher.resolve()
    return None


def hook_launcher(via: str) -> list[str]:
    """The measured hook command: the installed script (`via` "script", when there is one),
    the plugin's launcher running that script as the plugin's hooks do ("plugin"), else
    `python -P -m lamina hook`."""
    script = _script() if via in ("script", "plugin") else None
    if script is None:
        return [*_MODULE, "hook"]
    if via == "plugin":
        launcher = _plugin_launcher()
        if launcher is None:
            raise click.ClickException(
                "--via plugin needs the plugin's launcher (plugins/lamina/scripts/run-lamina) "
                "beside this Lamina or in the working directory: run it from a checkout"
            )
        return ["env", f"LAMINA_BIN={script}", "sh", str(launcher), "hook"]
    return [str(script), "hook"]


def install_info() -> dict[str, Any]:
    """Where the measured Lamina comes from, and whether it is an editable install (a
    development checkout: every process runs its import finder, which a user's install from
    a wheel or sdist, by pip or pipx, does not)."""
    import importlib.metadata

    from .. import __file__ as package_file

    editable = False
    try:
        dist = importlib.metadata.distribution("lamina")
        files = [str(f) for f in dist.files or []]
        editable = any(Path(f).name.startswith("__editable__") for f in files)
        direct = dist.read_text("direct_url.json")
        if direct:
            editable = editable or bool(orjson.loads(direct).get("dir_info", {}).get("editable"))
        located = Path(str(dist.locate_file(""))).resolve()
        package = Path(package_file).resolve().parent
        editable = editable or located not in package.parents
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        editable = True  # not installed at all: run from a checkout
    return {"editable": editable, "package": str(Path(package_file).resolve().parent)}


def _session(agent: str) -> str:
    """The current session's document under `agent` (Claude Code's is `SESSION`)."""
    return SESSION if agent == "claude-code" else f"{SESSION}-{agent}"


def agent_transcript(agent: str, given: Path | None = None) -> Path:
    """The session file the measured prompts belong to: `given`, else the largest real
    session of that agent in ../shared/data (Claude Code's, Codex's and Copilot's are JSON
    Lines; Gemini's current JSON Lines form is chosen over its older single document)."""
    if given is not None:
        return given
    folder = shared_data_dir(agent)
    if folder is None:
        raise click.ClickException(f"../shared/data/{agent} is needed for this benchmark")
    files = list(folder.glob("*.jsonl"))
    if not files:
        raise click.ClickException(f"no session file (*.jsonl) in {folder}")
    return max(files, key=lambda p: p.stat().st_size)


def _prompt_payload(home: Path, transcript: Path, prompt: str, agent: str = "claude-code") -> bytes:
    """A UserPromptSubmit as Claude Code sends it (Codex and Copilot send the same shape;
    Gemini names it BeforeAgent), in the current session (so its exclusion is exercised),
    naming the transcript that session writes."""
    return orjson.dumps(
        {
            "hook_event_name": "BeforeAgent" if agent == "gemini" else "UserPromptSubmit",
            "session_id": _session(agent),
            "transcript_path": str(transcript),
            "cwd": str(home),
            "prompt": prompt,
        }
    )


def deadline_spread(runs: int, low: float = 0.3, high: float = 3.0) -> list[float]:
    """`runs` hook time limits from `low` to `high` seconds, denser at the low end (where the
    deadline falls inside the model load and the search), in a shuffled but fixed order."""
    limits = [round(low + (high - low) * (i / max(1, runs - 1)) ** 2, 3) for i in range(runs)]
    random.Random(11).shuffle(limits)
    return limits


def _measure_deadlines(
    home: Path,
    transcript: Path,
    prompts: list[str],
    limits: list[float],
    pycache: Path,
    hook: list[str],
    agent: str = "claude-code",
) -> dict[str, Any]:
    """The cold hook run once per time limit: every run must exit 0 (an abort is a crash:
    exit 134, or -6 when the signal is reported), with memories or without."""
    done = _run_all(
        [
            (hook, _prompt_payload(home, transcript, prompts[i % len(prompts)], agent),
             _hook_env(home, limit, pycache, agent))
            for i, limit in enumerate(limits)
        ]
    )  # fmt: skip
    late = [
        r["wall_ms"] / 1000 - limit for r, limit in zip(done, limits, strict=True) if r["exit"] == 0
    ]
    return {
        "runs": len(done),
        "time_limits_s": {"min": min(limits), "max": max(limits)},
        "aborts": sum(r["exit"] in (134, -6) for r in done),
        "nonzero_exits": sum(r["exit"] != 0 for r in done),
        "exit_codes": sorted({r["exit"] for r in done}),
        "returned_memories": round(sum(r["memories"] for r in done) / max(1, len(done)), 3),
        "wall_past_limit_ms": percentiles([1000 * x for x in late]) if late else {},
    }


def _measure_size(
    home: Path,
    transcript: Path,
    prompts: list[str],
    runs: int,
    time_limit: float,
    pycache: Path,
    hook: list[str],
    agent: str = "claude-code",
) -> dict[str, Any]:
    env = _hook_env(home, time_limit, pycache, agent)
    lamina = [sys.executable, "-P", "-m", "lamina"]

    def payload(i: int) -> bytes:
        return _prompt_payload(home, transcript, prompts[i % len(prompts)], agent)

    cold = _run_all([(hook, payload(i), env) for i in range(runs)])
    _progress(f"  cold path: {runs} runs, cpu p50 {_summary(cold)['cpu_ms']['p50']} ms")
    recall_command = _summary(
        _run_all([([*lamina, "recall", prompts[i % len(prompts)], "--block"], b"", env)
                  for i in range(runs)])
    )  # fmt: skip
    _progress(f"  lamina recall: cpu p50 {recall_command['cpu_ms']['p50']} ms")
    try:
        serve: dict[str, Any] = measure_serve(env, BANK, prompts, runs)
        _progress(f"  lamina serve: first recall {serve['first_recall']['wall_ms']} ms")
    except RuntimeError as exc:  # the `server` extra not installed, say
        serve = {"error": str(exc)}
    pid = _start_warm(home, env)
    try:
        # The server's first recall of a bank loads it; that is start-up, not a prompt.
        _run_all([(hook, payload(runs), env)])
        before = process_cpu_ms(pid)
        warm = _run_all([(hook, payload(i), env) for i in range(runs)])
        server_cpu = (process_cpu_ms(pid) - before) / max(1, runs)
    finally:
        _stop_warm(home, env)
    _progress(f"  warm path: {runs} runs, cpu p50 {_summary(warm)['cpu_ms']['p50']} ms")
    turn = None
    if agent == "claude-code":  # turns are found by Claude Code's record shapes
        turn = _measure_turns(home, runs, time_limit, pycache, hook)
        _progress(
            f"  a turn's retain: worker cpu p50 {turn['worker']['cpu_ms']['p50']} ms; warm: "
            f"hook {turn['warm']['hook_cpu_ms']['p50']} + server "
            f"{turn['warm']['server_cpu_ms']['p50']} ms"
        )
    return {
        "cold": _summary(cold),
        "turn": turn,
        "warm": {**_summary(warm), "server_cpu_ms_per_prompt": round(server_cpu, 1)},
        "recall_command": recall_command,
        "serve": serve,
    }


def turn_starts(lines: list[bytes]) -> list[int]:
    """Where the turns of a Claude Code transcript start: the user records that hold the user's
    own words (a string, or a text block), not a tool's result or a meta record."""
    starts = []
    for i, line in enumerate(lines):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict) or record.get("type") != "user" or record.get("isMeta"):
            continue
        content = (record.get("message") or {}).get("content")
        if isinstance(content, str) or (
            isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "text" for b in content)
        ):
            starts.append(i)
    return starts


TURN_WORKER = "bench-turns"
"""The document the measured turns are retained into (the built bank's session stays as is)."""


def turns_session() -> Path:
    """The shared Claude Code session with the most turns: whose turns the worker is timed on."""
    folder = shared_data_dir("claude-code")
    files = sorted(folder.glob("*.jsonl")) if folder is not None else []
    if not files:
        raise click.ClickException("../shared/data/claude-code is needed for this benchmark")
    return max(files, key=lambda p: len(turn_starts(p.read_bytes().splitlines())))


def _measure_turns(
    home: Path, runs: int, time_limit: float, pycache: Path, hook: list[str]
) -> dict[str, Any]:
    """What a turn costs after the prompt, on copies of the bank: the retain worker a Stop hook
    starts, as its own process, once per turn (`worker`); and, with a warm server running, the
    Stop hook that hands the retain over plus the server's own CPU for it (`warm`). The last
    `runs` real turns of the shared Claude Code session with the most turns are appended one at
    a time to a file whose earlier turns are retained already (untimed)."""
    transcript = turns_session()
    lines = transcript.read_bytes().splitlines(keepends=True)
    starts = [*turn_starts(lines)[-runs:], len(lines)]
    turns = [b"".join(lines[a:b]) for a, b in itertools.pairwise(starts)]
    with tempfile.TemporaryDirectory(prefix="lamina-turns-") as tmp:
        worker_runs: list[dict[str, Any]] = []
        hook_runs: list[dict[str, Any]] = []
        server_ms: list[float] = []
        for path in ("worker", "warm"):
            scratch = Path(tmp) / path
            shutil.copytree(home, scratch, ignore=shutil.ignore_patterns("*.jsonl", "built"))
            session = scratch / "turns.jsonl"
            session.write_bytes(b"".join(lines[: starts[0]]))
            env = _hook_env(scratch, time_limit, pycache)
            worker = [
                *_MODULE, "--home", str(scratch), "hook-worker", "--transcript", str(session),
                "--session", TURN_WORKER, "--bank", BANK, "--event", "Stop",
            ]  # fmt: skip
            _run_all([(worker, b"", env)])  # the session so far: retained before timing
            if path == "worker":
                for turn in turns:
                    with session.open("ab") as out:
                        out.write(turn)
                    worker_runs.extend(_run_all([(worker, b"", env)]))
                continue
            stop = orjson.dumps({"hook_event_name": "Stop", "session_id": TURN_WORKER,
                                 "transcript_path": str(session), "cwd": str(scratch)})  # fmt: skip
            pid = _start_warm(scratch, env)
            try:
                for done, turn in enumerate(turns, 1):
                    with session.open("ab") as out:
                        out.write(turn)
                    before = process_cpu_ms(pid)
                    hook_runs.extend(_run_all([(hook, stop, env)]))
                    if not _retained(scratch, env, done):
                        raise click.ClickException("the warm server did not retain a turn")
                    server_ms.append(process_cpu_ms(pid) - before)
            finally:
                _stop_warm(scratch, env)
    worker_summary = _summary(worker_runs)
    del worker_summary["returned_memories"]
    return {
        "transcript": transcript.name,
        "records_per_turn": percentiles([float(len(t.splitlines())) for t in turns]),
        "worker": worker_summary,
        "warm": {
            "hook_cpu_ms": percentiles([r["cpu_ms"] for r in hook_runs]),
            "server_cpu_ms": percentiles(server_ms),
            "nonzero_exits": sum(r["exit"] != 0 for r in hook_runs),
        },
    }


def _start_warm(home: Path, env: dict[str, str]) -> int:
    """Start the data directory's warm server; its pid."""
    start = subprocess.run(
        [*_MODULE, "--home", str(home), "warm", "start", "--json", "--idle-timeout", "600"],
        capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    if start.returncode != 0:
        raise click.ClickException(f"the warm server did not start: {start.stderr.decode()}")
    return int(orjson.loads(start.stdout)["pid"])


def _stop_warm(home: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [*_MODULE, "--home", str(home), "warm", "stop"],
        capture_output=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def _retained(home: Path, env: dict[str, str], done: int, timeout: float = 120.0) -> bool:
    """Wait until the warm server has finished `done` handed-over retains."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = subprocess.run(
            [*_MODULE, "--home", str(home), "warm", "status", "--json"],
            capture_output=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        if status.returncode == 0:
            counts = orjson.loads(status.stdout).get("retains") or {}
            if counts.get("done", 0) + counts.get("failed", 0) >= done:
                return bool(counts.get("failed", 0) == 0)
        time.sleep(0.2)
    return False


def _current_session(
    home: Path, agent: str, current: Path, claude_file: Path, repeat: int = 1
) -> Path:
    """The current session's file in `home`: Claude Code's (retained when the bank was
    built), or a copy of another agent's, retained (once: retain is idempotent) as that
    agent's session document, so that the hook leaves it out as it does a live session.
    With `repeat` over 1, the file the hook reads is that session written `repeat` times
    over (`longer_session`), the bank still holding the session once."""
    if agent == "claude-code" and current.name == claude_file.name:
        retained = claude_file
    else:
        folder = home / agent
        folder.mkdir(exist_ok=True)
        retained = folder / current.name
        if not retained.is_file() or retained.stat().st_size != current.stat().st_size:
            shutil.copyfile(current, retained)
        bank = MemoryBank(SQLiteStore(home / "lamina.db"))
        try:
            bank.retain_file(retained, BANK, document=_session(agent))
        finally:
            bank.close()
    if repeat == 1:
        return retained
    longer = home / f"{agent}-x{repeat}" / current.name
    longer.parent.mkdir(exist_ok=True)
    longer.write_bytes(longer_session(current.read_bytes(), repeat, agent))
    return longer


def longer_session(data: bytes, repeat: int, agent: str) -> bytes:
    """A session `repeat` times as long, made of its own real lines: written `repeat` times
    over, as if resumed again and again. Gemini's message ids get a suffix in each later copy
    (the same id appended again would be the same message, rewritten, not a later one)."""
    if agent != "gemini":
        return (data.rstrip(b"\n") + b"\n") * repeat
    lines = data.splitlines()
    out: list[bytes] = []
    for copy in range(repeat):
        for line in lines:
            record = orjson.loads(line) if line.strip() else None
            if copy and isinstance(record, dict) and isinstance(record.get("id"), str):
                record["id"] = f"{record['id']}~{copy}"
                line = orjson.dumps(record)
            out.append(line)
    return b"\n".join(out) + b"\n"


def query_cost(path: Path, prompts: list[str], runs: int = 5) -> dict[str, Any]:
    """CPU per recall query of the hook's prompt on `path`, in this process: read from the
    file's end as the hook reads it, and from a whole read of the file (the baseline), and
    whether the two queries are the same."""
    from ..bank.query import compose_recall_query, recall_query_for_file
    from ..readers import detect_format

    tail: list[float] = []
    whole: list[float] = []
    same = True
    for prompt in prompts[:runs]:
        started = time.process_time()
        fast = recall_query_for_file(str(path), prompt)
        tail.append(1000 * (time.process_time() - started))
        started = time.process_time()
        messages = list(detect_format(str(path)).read(str(path), lambda _w: None))
        slow = compose_recall_query(messages, prompt)
        whole.append(1000 * (time.process_time() - started))
        same = same and (fast.query, fast.prompt) == (slow.query, slow.prompt)
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "query_tail_cpu_ms": percentiles(tail),
        "query_whole_read_cpu_ms": percentiles(whole),
        "same_query": same,
    }


@click.command("hook")
@count_option(
    "--memories",
    "sizes",
    at_least=1,
    multiple=True,
    default=(1_000, 10_000, 100_000),
    help="Bank sizes to measure.",
)
@count_option("--runs", at_least=1, default=10)
@count_option(
    "--large-runs", at_least=1, default=3, help=f"Runs for banks of {LARGE:,} memories or more."
)
@click.option(
    "--time-limit",
    type=float,
    default=60.0,
    show_default=True,
    help="LAMINA_HOOK_TIME_LIMIT for the measured hooks (raised, to see the full cost).",
)
@count_option(
    "--base-texts",
    at_least=10,
    help="Build from only the first N real turns (quicker; the default uses all).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Build the banks in this folder and keep them; banks already built there are reused.",
)
@count_option(
    "--deadline-runs",
    at_least=0,
    default=0,
    help="Also run the cold hook this many times on the largest bank, with time limits spread "
    "from 0.3 to 3 s, and count the runs that did not exit 0 (aborts).",
)
@click.option(
    "--via",
    type=click.Choice(["script", "plugin", "module"]),
    default="script",
    show_default=True,
    help="Run the hook through the installed `lamina` script beside this Python, as settings "
    "hooks do; `plugin`: through the Claude Code plugin's launcher (from a checkout); "
    "`module` (or when there is no script): `python -P -m lamina hook`.",
)
@click.option(
    "--agent",
    type=click.Choice(list(AGENT_ENV)),
    default="claude-code",
    show_default=True,
    help="Whose installed hook to measure: the prompt event and environment that agent's hook "
    "gets (Gemini's BeforeAgent; Codex's and Copilot's origin, Copilot's COPILOT_HOOK_DIR).",
)
@click.option(
    "--transcript",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The current session's file (its agent's format): by default the largest real "
    "session of --agent in ../shared/data.",
)
@count_option(
    "--session-repeat",
    at_least=1,
    default=1,
    help="Measure a session this many times as long: the current session's real lines "
    "written over and over, as if resumed again and again.",
)
@json_option
def hook_bench(
    sizes: tuple[int, ...],
    runs: int,
    large_runs: int,
    time_limit: float,
    base_texts: int | None,
    keep: Path | None,
    deadline_runs: int,
    via: str,
    agent: str,
    transcript: Path | None,
    session_repeat: int,
    as_json: bool,
) -> None:
    """CPU, wall time and peak memory of the real `lamina hook` per prompt, cold and warm, at
    1k, 10k and 100k memories, against `python -c pass` and importing numpy and onnxruntime.
    With --deadline-runs, also whether the hook ever dies when its time limit falls.

    Example: lamina bench hook --memories 1000 --memories 10000 --runs 10 --json
    """
    source = agent_transcript("claude-code")
    if agent == "claude-code" and transcript is not None:
        raise click.ClickException(
            "--transcript names another agent's session; Claude Code's is the largest shared one"
        )
    current = agent_transcript(agent, transcript)
    texts, questions = _base_texts()
    if base_texts is not None:
        texts = texts[:base_texts]
    prompts = [questions[i] for i in random.Random(5).sample(range(len(questions)), 50)]
    hook = hook_launcher(via)
    install = {**install_info(), "hook_command": " ".join(hook)}
    if install["editable"]:
        _progress(
            f"warning: lamina is an editable install here ({install['package']}): every "
            "process pays its import finder, which a user's install does not (compare "
            "baselines python_pass and python_no_site); measure a regular install "
            "(pip install <checkout>, not -e) for the figures users meet"
        )
    pycache = Path(tempfile.mkdtemp(prefix="lamina-pycache-"))
    env = _hook_env(Path(tempfile.gettempdir()), time_limit, pycache)
    _compile(env)
    baselines = {
        "python_pass": _summary(_run_all([([sys.executable, "-c", "pass"], b"", env)] * runs)),
        "python_no_site": _summary(
            _run_all([([sys.executable, "-S", "-c", "pass"], b"", env)] * runs)
        ),
        "python_import_numpy_onnxruntime": _summary(
            _run_all([([sys.executable, "-c", "import numpy, onnxruntime"], b"", env)] * runs)
        ),
    }
    _progress(f"baselines measured ({runs} runs each)")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lamina-hook-") as tmp:
        root = Path(tmp) if keep is None else keep
        root.mkdir(parents=True, exist_ok=True)
        embedder_bank: MemoryBank | None = None
        vectors: Any = None
        for n in sizes:
            home = root / f"m{n}"
            session_file = home / "session.jsonl"
            built = home / "built"
            if built.is_file() and _default_model_bank(home / "lamina.db"):
                build_s = float(built.read_text())
                _progress(f"{n} memories reused from {home}")
            else:
                if embedder_bank is None:
                    embedder_bank = MemoryBank(SQLiteStore(Path(tmp) / "embed.db"))
                    started = time.perf_counter()
                    vectors = embedder_bank.embedder.embed_documents(texts)
                    spent = time.perf_counter() - started
                    _progress(f"embedded {len(texts)} real turns in {spent:.1f}s")
                shutil.rmtree(home, ignore_errors=True)
                home.mkdir()
                shutil.copyfile(source, session_file)
                bank = MemoryBank(SQLiteStore(home / "lamina.db"), embedder_bank.embedder)
                started = time.perf_counter()
                build(bank, BANK, n, texts, vectors)
                bank.retain_file(session_file, BANK, document=SESSION)
                bank.close()
                build_s = time.perf_counter() - started
                built.write_text(f"{build_s:.1f}")
                _progress(f"{n} memories built in {build_s:.1f}s")
            session_file = _current_session(home, agent, current, session_file, session_repeat)
            session = query_cost(session_file, prompts)
            _progress(
                f"  recall query on {session['bytes']:,} bytes: "
                f"{session['query_tail_cpu_ms']['p50']} ms from its end, "
                f"{session['query_whole_read_cpu_ms']['p50']} ms reading it all"
            )
            count = large_runs if n >= LARGE else runs
            results[str(n)] = {
                "memories": n,
                "build_s": round(build_s, 1),
                "session": session,
                **_measure_size(
                    home, session_file, prompts, count, time_limit, pycache, hook, agent
                ),
            }
            if deadline_runs and n == max(sizes):
                limits = deadline_spread(deadline_runs)
                deadlines = _measure_deadlines(
                    home, session_file, prompts, limits, pycache, hook, agent
                )
                results[str(n)]["deadlines"] = deadlines
                _progress(f"  deadlines: {deadline_runs} runs, {deadlines['aborts']} aborts")
        if embedder_bank is not None:
            embedder_bank.close()
    shutil.rmtree(pycache, ignore_errors=True)
    emit(
        {
            "benchmark": "hook",
            "agent": agent,
            "time_limit_s": time_limit,
            "transcript": current.name,
            "transcript_bytes": current.stat().st_size,
            "session_repeat": session_repeat,
            "session_excluded": _session(agent),
            "byte_code": "compiled before measuring, as an installed package has it",
            "install": {
                **install,
                "site_cpu_ms": round(
                    baselines["python_pass"]["cpu_ms"]["p50"]
                    - baselines["python_no_site"]["cpu_ms"]["p50"],
                    2,
                ),
            },
            "baselines": baselines,
            "sizes": results,
            "cpu_count": os.cpu_count(),
        },
        as_json,
    )
