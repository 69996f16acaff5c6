"""`lamina bench compile`: how long a compile takes, and how much memory, as the log grows.

The log: the shared Claude Code sessions (not their subagents' files), read with
`read_transcript`, kept as the log rule (`enters_log`) admits them and concatenated; then
again, pass after pass, with every message id and tool id suffixed `~<pass>` so ids stay unique
and each tool call is still answered by its own result, until it holds N messages. Repeated
passes share their texts with the first (nothing is copied that a real log would not also
hold once).

For each size N:

- **live**: the whole log replayed as a live session, one compile before every assistant
  message (as `lamina bench cache` does), the forest and the previous frontier carried from
  call to call; compile times are reported for the compiles of the last `--window` messages,
  where the log is N long (wall clock, and the thread's CPU time, which waiting for a busy
  machine does not inflate), with p99 and p99.9, and how many of them a full garbage
  collection landed in. Between calls the heap is settled (`lamina.heap.settle`, untimed), as
  the HTTP API and the MCP server do after each compile; `live_unsettled` is the same replay
  without it, the baseline (first, the heap unfrozen). `live_ahead` replays it again with
  `Compiler.prefetch` (and the settle) run between calls, untimed, as the background thread
  of a server runs it while the model answers.
- **cold**: a new `Compiler` on the whole log, with the token-count cache emptied as in a new
  process. `cold_stored` starts from the summaries and frontier the live session left, carried
  through their stored form the way `StoredLog.open` loads them; `cold_full` knows nothing and
  writes every summary. `log_build` is the time to build the `ContextLog` itself (a token
  count per message), which opening a stored log also pays.
- **memory** (tracemalloc, in a separate pass so it does not slow the timings): peak and
  retained bytes of building the log and of a cold full compile, the peak of one warm compile,
  and retained bytes per message (the log's counts, the forest, the frontier and the request;
  the messages themselves are the input, `log.input_bytes_per_message` as read);
  `memory.per_message_ratio` divides the largest size's bytes per message by the smallest's
  (about 1 when memory is linear in the log, below 1 while a fixed part still shows).
- **baselines** on the same log, replayed the same way: the sliding window and
  compact-at-threshold of `lamina bench cache`.

Every request is checked by `validate_anthropic` and against the budget, untimed;
`invalid_requests` counts those that break a rule.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click

from ..context.compile import Compiler, request_tokens
from ..context.forest import Forest
from ..context.frontier import CompileOptions
from ..context.log import ContextLog, enters_log
from ..context.stored import frontier_from_json, frontier_to_json
from ..context.summarise import ExtractiveSummariser
from ..context.validate import validate_anthropic
from ..errors import InputError
from ..heap import settle
from ..messages import Block, Message, Role, ToolResultBlock, ToolUseBlock
from ..readers import read_transcript
from ..tokens import _count_default
from .cache import CompactAtThreshold, Lamina, SlidingWindow, Strategy
from .common import (
    compile_budget_options,
    count_option,
    emit,
    json_option,
    percentiles,
    transcript_files,
    transcripts_option,
)

__all__ = ["compile_bench"]

DEFAULT_SIZES = (500, 1_000, 2_000, 4_000)
TARGET_P95_MS = 20.0
TARGET_MESSAGES = 2_000
COLD_RUNS = 3
MAX_PROBLEMS = 5


def _progress(text: str) -> None:
    click.echo(f"bench compile: {text}", err=True)


# -- the log -----------------------------------------------------------------------------------


def _renamed(message: Message, copy: int) -> Message:
    """The message for pass `copy`: its id and tool ids suffixed, everything else shared."""
    if copy == 0:
        return message
    suffix = f"~{copy}"
    blocks: list[Block] = []
    for block in message.blocks:
        if isinstance(block, ToolUseBlock):
            block = replace(block, id=block.id + suffix)
        elif isinstance(block, ToolResultBlock):
            block = replace(block, tool_use_id=block.tool_use_id + suffix)
        blocks.append(block)
    return replace(message, id=message.id + suffix, blocks=tuple(blocks))


def _sessions(files: Sequence[Path]) -> list[Message]:
    out: list[Message] = []
    for path in files:
        out.extend(m for m in read_transcript(str(path)).messages if enters_log(m))
    if not out:
        raise InputError("no message of these transcripts enters a context log")
    return out


def _repeated(base: Sequence[Message], size: int) -> list[Message]:
    return [_renamed(base[i % len(base)], i // len(base)) for i in range(size)]


def _tool_pairs(messages: Sequence[Message]) -> dict[str, int]:
    """Checks the built log keeps tool ids unique and every result after its own call."""
    called: set[str] = set()
    duplicate = orphan = 0
    for message in messages:
        for block in message.blocks:
            if isinstance(block, ToolUseBlock):
                duplicate += block.id in called
                called.add(block.id)
            elif isinstance(block, ToolResultBlock):
                orphan += block.tool_use_id not in called
    return {"tool_uses": len(called), "duplicate_tool_ids": duplicate, "orphan_results": orphan}


# -- replay ------------------------------------------------------------------------------------


@dataclass
class Checked:
    """Requests checked against the provider's rules and the budget."""

    available: int
    requests: int = 0
    invalid: int = 0
    over_budget: int = 0
    problems: list[str] = field(default_factory=list)

    def check(self, request: dict[str, Any]) -> int:
        self.requests += 1
        problems = validate_anthropic(request)
        if problems:
            self.invalid += 1
            self.problems.extend(problems[: MAX_PROBLEMS - len(self.problems)])
        tokens = request_tokens(request)
        if tokens > self.available:
            self.over_budget += 1
        return tokens


def _times(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values) or [0.0]

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {**percentiles(values), "p99": at(0.99), "p99.9": at(0.999), "max": at(1.0)}


class _FullWalks:
    """Counts the garbage collector's full (generation-2) collections."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info.get("generation") == 2:
            self.count += 1

    def __enter__(self) -> _FullWalks:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def _settle(_log: ContextLog) -> None:
    settle()


def _replay(
    messages: Sequence[Message],
    strategy: Strategy,
    window_from: int,
    checked: Checked,
    between: Callable[[ContextLog], None] | None = None,
    written: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """Compile before every assistant message; times of the compiles on a log of at least
    `window_from` messages. `between` runs untimed after each compile (a background
    prefetch); `written` counts summaries written so far (to tell compiles that wrote one)."""
    log = ContextLog()
    times: list[float] = []
    cpu: list[float] = []
    quiet: list[float] = []
    peak = writing = walked = 0
    with _FullWalks() as walks:
        for message in messages:
            if message.role is Role.ASSISTANT and len(log):
                before = written() if written else 0
                walks_before = walks.count
                started, started_cpu = time.perf_counter(), time.thread_time()
                request = strategy(log)
                elapsed = (time.perf_counter() - started) * 1000
                elapsed_cpu = (time.thread_time() - started_cpu) * 1000
                wrote = (written() if written else 0) > before
                tokens = checked.check(request)
                if len(log) >= window_from:
                    times.append(elapsed)
                    cpu.append(elapsed_cpu)
                    peak = max(peak, tokens)
                    writing += wrote
                    walked += walks.count > walks_before
                    if not wrote:
                        quiet.append(elapsed)
                if between is not None:
                    between(log)
            log.append(message)
    out: dict[str, Any] = {
        "compiles": len(times),
        "compile_ms": _times(times),
        "compile_cpu_ms": _times(cpu),
        "peak_request_tokens": peak,
        "compiles_with_full_gc": walked,
    }
    if written is not None:
        out["compiles_writing_summaries"] = writing
        out["compile_ms_without_writes"] = _times(quiet)
    return out


def _lamina_live(
    messages: Sequence[Message],
    options: CompileOptions,
    window_from: int,
    checked: Checked,
    settled: bool = True,
) -> tuple[dict[str, Any], Compiler]:
    lamina = Lamina(options)
    forest = lamina.compiler.forest
    live = _replay(
        messages,
        lamina,
        window_from,
        checked,
        between=_settle if settled else None,
        written=lambda: forest.written,
    )
    live["summaries_in_forest"] = len(forest.nodes)
    return live, lamina.compiler


def _lamina_ahead(
    messages: Sequence[Message], options: CompileOptions, window_from: int, checked: Checked
) -> dict[str, Any]:
    lamina = Lamina(options)
    compiler = lamina.compiler

    def prefetch(log: ContextLog) -> None:
        compiler.prefetch(log, options)
        settle()

    return _replay(
        messages,
        lamina,
        window_from,
        checked,
        between=prefetch,
        written=lambda: compiler.forest.written,
    )


# -- cold compiles -----------------------------------------------------------------------------


def _stored_compiler(warm: Compiler, log: ContextLog) -> Compiler:
    """A compiler as `StoredLog.open` makes one: the summaries known, the last frontier read
    back from its stored form."""
    forest = Forest(ExtractiveSummariser(), list(warm.forest.nodes.values()))
    state = frontier_to_json(warm.previous) if warm.previous else None
    previous = frontier_from_json(state, forest, len(log)) if state else None
    return Compiler(ExtractiveSummariser(), forest=forest, previous=previous)


def _cold(
    log: ContextLog,
    options: CompileOptions,
    make: Callable[[], Compiler],
    checked: Checked,
) -> dict[str, Any]:
    runs: list[float] = []
    cpu: list[float] = []
    written = 0
    for _ in range(COLD_RUNS):
        compiler = make()
        _count_default.cache_clear()  # a new process has counted nothing yet
        started, started_cpu = time.perf_counter(), time.thread_time()
        result = compiler.compile(log, options)
        runs.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        written = compiler.forest.written
        checked.check(result.request)
    return {
        "compile_ms": round(statistics.median(runs), 2),
        "compile_cpu_ms": round(statistics.median(cpu), 2),
        "runs_ms": [round(r, 2) for r in runs],
        "summaries_written": written,
    }


def _log_build(messages: Sequence[Message]) -> dict[str, float]:
    """Median wall-clock and CPU milliseconds of building the log (a token count each)."""
    runs: list[float] = []
    cpu: list[float] = []
    for _ in range(COLD_RUNS):
        started, started_cpu = time.perf_counter(), time.thread_time()
        ContextLog.from_messages(messages)
        runs.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    return {
        "ms": round(statistics.median(runs), 2),
        "cpu_ms": round(statistics.median(cpu), 2),
    }


# -- memory ------------------------------------------------------------------------------------


def _traced(work: Callable[[], object]) -> tuple[object, dict[str, int]]:
    """Run `work` under tracemalloc: its peak, and what it left allocated while its result
    is kept."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        result = work()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, {"peak_bytes": peak - base, "retained_bytes": current - base}


def _memory(messages: Sequence[Message], options: CompileOptions) -> dict[str, Any]:
    log_obj, build = _traced(lambda: ContextLog.from_messages(messages))
    assert isinstance(log_obj, ContextLog)
    log = log_obj
    compiler = Compiler(ExtractiveSummariser())
    _count_default.cache_clear()
    _, cold = _traced(lambda: compiler.compile(log, options))
    _, warm = _traced(lambda: compiler.compile(log, options))
    retained = build["retained_bytes"] + cold["retained_bytes"]
    return {
        "log_build": build,
        "cold_compile": cold,
        "warm_compile": {"peak_bytes": warm["peak_bytes"]},
        "retained_bytes": retained,
        "bytes_per_message": round(retained / len(messages)),
    }


# -- one size ----------------------------------------------------------------------------------


def _one_size(
    base: Sequence[Message], size: int, options: CompileOptions, window: int
) -> dict[str, Any]:
    messages = _repeated(base, size)
    window_from = max(1, size - min(window, size // 2))
    checked = Checked(options.available)
    _progress(f"{size} messages: live replay, the heap left to the collector")
    gc.unfreeze()  # as a process that never settled (an earlier size may have)
    unsettled, _ = _lamina_live(messages, options, window_from, checked, settled=False)
    _progress(f"{size} messages: live replay, the heap settled between calls")
    live, warm = _lamina_live(messages, options, window_from, checked)
    _progress(f"{size} messages: live replay with prefetch between calls")
    ahead = _lamina_ahead(messages, options, window_from, checked)
    _progress(f"{size} messages: cold compiles")
    log = ContextLog.from_messages(messages)
    cold_stored = _cold(log, options, lambda: _stored_compiler(warm, log), checked)
    cold_full = _cold(log, options, lambda: Compiler(ExtractiveSummariser()), checked)
    _progress(f"{size} messages: baselines")
    baselines = {
        strategy.name: _replay(messages, strategy, window_from, checked)
        for strategy in (SlidingWindow(options), CompactAtThreshold(options))
    }
    _progress(f"{size} messages: memory")
    memory = _memory(messages, options)
    return {
        "messages": size,
        "log_tokens": sum(log.tokens),
        "timed_from_message": window_from,
        "log_build": _log_build(messages),
        "tool_pairs": _tool_pairs(messages),
        "lamina": {
            "live": live,
            "live_unsettled": unsettled,
            "live_ahead": ahead,
            "cold_stored": cold_stored,
            "cold_full": cold_full,
        },
        **baselines,
        "memory": memory,
        "requests_checked": checked.requests,
        "invalid_requests": checked.invalid,
        "over_budget_requests": checked.over_budget,
        "problems": checked.problems,
    }


def _target(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    at = [r["lamina"]["live"] for r in runs if r["messages"] == TARGET_MESSAGES]
    p95 = at[0]["compile_ms"]["p95"] if at else None
    return {
        "what": f"live compile p95 <= {TARGET_P95_MS:g} ms at {TARGET_MESSAGES:,} messages",
        "p95_ms": p95,
        "cpu_p95_ms": at[0]["compile_cpu_ms"]["p95"] if at else None,
        "met": None if p95 is None else p95 <= TARGET_P95_MS,
    }


def _linearity(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    per = {str(r["messages"]): r["memory"]["bytes_per_message"] for r in runs}
    small, large = runs[0], runs[-1]
    ratio = large["memory"]["bytes_per_message"] / max(1, small["memory"]["bytes_per_message"])
    return {
        "bytes_per_message": per,
        "per_message_ratio": round(ratio, 2),
        "sizes_ratio": round(large["messages"] / small["messages"], 2),
    }


def _summary(out: dict[str, Any]) -> str:
    lines = [
        f"lamina bench compile: budget {out['budget']:,}, reserve {out['reserve']:,}; "
        f"log of {out['log']['messages_per_pass']} messages a pass from "
        f"{len(out['log']['sources'])} sessions",
        f"{'messages':>8} {'live p50':>9} {'p95':>7} {'max':>7} {'CPU p95':>7} {'ahead p95':>9} "
        f"{'cold stored':>11} {'cold full':>9} {'log build':>9} {'sliding p95':>11} "
        f"{'compact p95':>11} {'B/message':>9}",
    ]
    for r in out["runs"]:
        live = r["lamina"]["live"]["compile_ms"]
        lines.append(
            f"{r['messages']:>8} {live['p50']:>9} {live['p95']:>7} {live['max']:>7} "
            f"{r['lamina']['live']['compile_cpu_ms']['p95']:>7} "
            f"{r['lamina']['live_ahead']['compile_ms']['p95']:>9} "
            f"{r['lamina']['cold_stored']['compile_ms']:>11} "
            f"{r['lamina']['cold_full']['compile_ms']:>9} {r['log_build']['ms']:>9} "
            f"{r['sliding_window']['compile_ms']['p95']:>11} "
            f"{r['compact_at_threshold']['compile_ms']['p95']:>11} "
            f"{r['memory']['bytes_per_message']:>9}"
        )
    target = out["target"]
    verdict = "not measured" if target["met"] is None else ("met" if target["met"] else "NOT met")
    lines.append(
        f"target: {target['what']}: {verdict} (p95 {target['p95_ms']} ms, "
        f"CPU time p95 {target['cpu_p95_ms']} ms)"
    )
    memory = out["memory"]
    lines.append(
        f"memory: bytes per message x{memory['per_message_ratio']} from the smallest to the "
        f"largest log (x{memory['sizes_ratio']} messages)"
    )
    lines.append(
        f"invalid requests: {out['invalid_requests']}; times in ms; load average "
        f"{out['machine']['load_average_1m']} on {out['machine']['cpus']} CPUs"
    )
    return "\n".join(lines)


@click.command("compile")
@count_option(
    "--messages",
    "sizes",
    at_least=20,
    multiple=True,
    help="Log size(s) in messages (default: 500, 1000, 2000, 4000).",
)
@transcripts_option(
    "Transcript(s) the log is built from (default: the shared Claude Code sessions)."
)
@compile_budget_options
@count_option(
    "--window",
    at_least=1,
    default=400,
    help="Time the compiles of the last this many messages (at most half the log).",
)
@click.option(
    "--process",
    is_flag=True,
    help="Time `lamina compile FILE --bank B` as whole processes instead (first call, second "
    "call, call after an append; default sizes 323, 1910, 20055 messages).",
)
@count_option(
    "--runs",
    "process_runs",
    at_least=1,
    default=5,
    help="With --process: processes timed per size and call.",
)
@json_option
def compile_bench(
    sizes: tuple[int, ...],
    transcripts: tuple[str, ...],
    budget: int,
    reserve: int,
    window: int,
    process: bool,
    process_runs: int,
    as_json: bool,
) -> None:
    """Compile time (live, cold) and memory as the log grows, with baselines.

    With --process, `lamina compile FILE --bank B` is timed as whole processes (CPU, wall
    time, RSS), beside an interpreter baseline.

    Example: lamina bench compile --messages 2000 --budget 32000 --json
    """
    if reserve >= budget:
        raise InputError("--reserve must be smaller than --budget")
    if transcripts:
        files = [Path(t) for t in transcripts]
    else:
        files = [p for p in transcript_files(None) if ".subagent-" not in p.name]
    if process:
        from .compile_process import DEFAULT_PROCESS_SIZES, process_bench

        emit(process_bench(files, sizes or DEFAULT_PROCESS_SIZES, process_runs, budget), True)
        return
    options = CompileOptions(budget=budget, reserve=reserve)
    load_before = os.getloadavg()[0]
    tracemalloc.start()
    base = _sessions(files)
    input_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    runs = [_one_size(base, n, options, window) for n in sorted(set(sizes or DEFAULT_SIZES))]
    out: dict[str, Any] = {
        "benchmark": "compile",
        "budget": budget,
        "reserve": reserve,
        "available": options.available,
        "log": {
            "sources": [p.name for p in files],
            "rule": "read_transcript, kept where lamina.context.enters_log admits",
            "messages_per_pass": len(base),
            "repeated": "passes concatenated; pass k suffixes message and tool ids with ~k",
            "input_bytes_per_message": round(input_bytes / len(base)),
        },
        "target": _target(runs),
        "runs": runs,
        "memory": _linearity(runs),
        "invalid_requests": sum(r["invalid_requests"] for r in runs),
        "over_budget_requests": sum(r["over_budget_requests"] for r in runs),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # Wall-clock times count waiting for a busy CPU; `compile_cpu_ms` does not.
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        },
    }
    if as_json:
        emit(out, True)
    else:
        click.echo(_summary(out))
