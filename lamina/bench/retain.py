"""`lamina bench retain`: `lamina retain` as whole processes, its CPU time and peak memory.

Each input (by default the shared Claude Code folder and its largest transcript) is retained
`runs` times, each time into a new bank by a new process: once into a fresh data directory
(**cold**: the process also optimises the embedding model and keeps it in the data directory's
cache, as a user's first retain does) and once into a data directory whose model cache is
already there (**warm**: what every later retain, and every Stop hook's worker, pays). Each
process's CPU time (user + system, from `wait4`), wall time and peak RSS are reported. The
**baseline**, measured in the same run: the interpreter doing nothing (`python -c pass`),
starting Lamina's CLI (`lamina --version`), and loading the embedding model from its cache to
embed one text (the floor under any retain that embeds). With `--against DIR`, the same
retains run on the Lamina source tree in DIR (another checkout, e.g. the main branch), one
after the other with this one's, so that both see the same load.
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
from typing import Any, Final

import click

from ..errors import InputError
from .common import count_option, emit, json_option, shared_data_dir

__all__ = ["retain_bench"]

_MODEL_FLOOR = (
    "from lamina.embed import get_embedder, set_model_cache\n"
    "import pathlib, sys\n"
    "set_model_cache(pathlib.Path(sys.argv[1]))\n"
    "get_embedder('default').embed_documents(['a short text'])\n"
)


def _run(argv: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    """One process: its CPU (user + system), wall time and peak RSS; or its exit status and
    the end of its error output."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return {"exit": code, "error": err.decode(errors="replace").strip()[-300:]}
    return {
        "cpu_ms": round((usage.ru_utime + usage.ru_stime) * 1000, 1),
        "wall_ms": round((time.perf_counter() - started) * 1000, 1),
        "rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def _summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "exit" not in r]
    out: dict[str, Any] = {"runs": len(good), "failed": len(runs) - len(good)}
    if len(good) < len(runs):
        out["first_failure"] = next(r for r in runs if "exit" in r)
    if good:
        for key in ("cpu_ms", "wall_ms", "rss_mb"):
            values = [r[key] for r in good]
            out[key] = {"p50": round(statistics.median(values), 1), "max": max(values)}
    return out


def _default_inputs() -> list[Path]:
    folder = shared_data_dir("claude-code")
    if folder is None:
        raise InputError("no input given and ../shared/data/claude-code not found")
    largest = max(folder.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    return [folder, largest]


_THIS: Final = Path(__file__).resolve().parents[2]
"""The source tree of the Lamina running this benchmark (the folder holding `lamina/`)."""


def _env(source: Path | None) -> dict[str, str]:
    """The environment of a measured process: no Lamina settings, and `source` (default: this
    Lamina's tree) first on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env["PYTHONPATH"] = str(source or _THIS)
    return env


def _retains(
    inputs: Sequence[Path], runs: int, variants: dict[str, Path | None], root: Path
) -> dict[str, Any]:
    """Every input, cold and warm, `runs` times, the variants alternating."""
    python = [sys.executable, "-P", "-m", "lamina"]
    found: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
        name: {str(path): {"cold": [], "warm": []} for path in inputs} for name in variants
    }
    for name, source in variants.items():  # a warm data directory per variant
        warm = root / f"{name}-warm"
        _run([*python, "--home", str(warm), "retain", str(inputs[-1]), "--bank", "warmup"],
             _env(source))  # fmt: skip
    for run in range(runs):
        for path in inputs:
            for name, source in variants.items():
                env = _env(source)
                cold = root / f"{name}-cold-{run}-{path.name}"
                argv = ["retain", str(path), "--bank", "b"]
                found[name][str(path)]["cold"].append(
                    _run([*python, "--home", str(cold), *argv], env)
                )
                again = [*python, "--home", str(root / f"{name}-warm"), "retain", str(path)]
                found[name][str(path)]["warm"].append(
                    _run([*again, "--bank", f"b{run}-{path.name}"], env)
                )
    return {
        name: {
            path: {phase: _summary(done) for phase, done in phases.items()}
            for path, phases in by_path.items()
        }
        for name, by_path in found.items()
    }


def _baseline(runs: int, root: Path) -> dict[str, Any]:
    env = _env(None)
    cache = root / "floor-cache"
    cache.mkdir(mode=0o700)
    _run([sys.executable, "-P", "-c", _MODEL_FLOOR, str(cache)], env)  # keeps the model
    commands = {
        "python -c pass": [sys.executable, "-P", "-c", "pass"],
        "lamina --version": [sys.executable, "-P", "-m", "lamina", "--version"],
        "model loaded, one text embedded": [sys.executable, "-P", "-c", _MODEL_FLOOR, str(cache)],
    }
    return {
        name: _summary([_run(argv, env) for _ in range(runs)]) for name, argv in commands.items()
    }


@click.command("retain")
@click.argument("inputs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@count_option("--runs", at_least=1, default=2, help="Processes per input and phase.")
@click.option(
    "--against",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A Lamina source tree (the folder holding `lamina/`) to measure beside this one.",
)
@json_option
def retain_bench(inputs: tuple[Path, ...], runs: int, against: Path | None, as_json: bool) -> None:
    """Peak memory and CPU of `lamina retain` as whole processes, cold and warm, with baselines.

    Inputs default to the shared Claude Code folder and its largest transcript.

    Example: lamina bench retain --against ../main --json
    """
    chosen = list(inputs) or _default_inputs()
    variants: dict[str, Path | None] = {"this": None}
    if against is not None:
        if not (against / "lamina" / "__init__.py").is_file():
            raise InputError(f"{against}: no lamina/ package in this folder")
        variants["against"] = against.resolve()
    with tempfile.TemporaryDirectory(prefix="lamina-bench-retain-") as tmp:
        root = Path(tmp)
        result = {
            "inputs": [str(p) for p in chosen],
            "runs": runs,
            "against": str(against) if against is not None else None,
            "baseline": _baseline(runs, root),
            "retain": _retains(chosen, runs, variants, root),
        }
    emit(result, as_json)
