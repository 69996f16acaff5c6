"""Commands that never touch a vector do not pay for numpy, onnxruntime or the tokenizer.

Each command runs for real, as a fresh `python -X importtime -m lamina ...` process; the
interpreter reports every module it imports on stderr as it imports it, so what a command
loaded is known however it exits (the hook leaves with os._exit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXAMPLE, needs_shared, shared_transcripts

HEAVY = ("numpy", "onnxruntime", "tiktoken", "tokenizers")

SESSION = "0b6f7a52-imports"


def imported(
    home: Path, *args: str, stdin: str = "", **extra: str
) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    env = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj", **extra}
    env.pop("LAMINA_HOOK_WARM", None)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lamina", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", result.stderr, re.M))
    assert "lamina" in modules or "lamina.entry" in modules, result.stderr[-2000:]
    return modules, result


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_help_imports_no_numeric_stack(tmp_path: Path) -> None:
    modules, result = imported(tmp_path, "--help")
    assert result.returncode == 0 and "retain" in result.stdout
    assert heavy_in(modules) == []


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
@pytest.mark.parametrize(
    "event", ["Stop", "SubagentStop", "PreCompact", "SessionEnd", "SessionStart"]
)
def test_hooks_that_start_a_worker_stay_light(tmp_path: Path, event: str) -> None:
    payload = {"hook_event_name": event, "session_id": SESSION,
               "transcript_path": str(EXAMPLE), "cwd": str(tmp_path)}  # fmt: skip
    modules, result = imported(tmp_path / "home", "hook", stdin=json.dumps(payload))
    assert result.returncode == 0 and result.stdout == ""
    assert heavy_in(modules) == []


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_retain_of_an_unchanged_file_stays_light(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "retain", str(EXAMPLE),
         "--bank", "proj"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert first.returncode == 0 and "retained" in first.stdout, first.stderr
    modules, again = imported(home, "retain", str(EXAMPLE), "--bank", "proj")
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stderr[-2000:]
    assert heavy_in(modules) == []


@needs_shared
def test_the_stemmer_is_the_english_one_alone_and_stems_as_the_package_does() -> None:
    """lamina.text.lexical loads snowballstemmer's English stemmer without the other 30
    languages; its stems are the package's own, word for word."""
    import snowballstemmer  # type: ignore[import-untyped]

    from lamina.readers import read_transcript
    from lamina.text import lexical

    assert type(lexical._stemmer).__name__ == "EnglishStemmer"
    words: set[str] = set()
    for path in shared_transcripts()[:4]:
        for message in read_transcript(str(path)).messages:
            for block in message.blocks:
                words.update(re.findall(r"[^\W_]+", str(getattr(block, "text", "")).lower()))
    words |= {"running", "generously", "organizations", "caresses", "ponies", "sky", "dying"}
    package = snowballstemmer.stemmer("english")
    assert [lexical._stem(w) for w in sorted(words)] == package.stemWords(sorted(words))


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_a_cold_prompt_loads_one_stemmer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    retained = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "retain", str(EXAMPLE),
         "--bank", "proj"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert retained.returncode == 0, retained.stderr
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": SESSION,
               "prompt": "which database did we choose?", "cwd": str(tmp_path)}  # fmt: skip
    modules, result = imported(home, "hook", stdin=json.dumps(payload), LAMINA_HOOK_TIME_LIMIT="60")
    assert result.returncode == 0 and "lamina_memories" in result.stdout
    assert "lamina._snowball_english.basestemmer" in modules
    assert not [m for m in modules if m.startswith("snowballstemmer")]
    # Nor what only other events, other commands or other texts need (the query is embedded
    # without the tokenizers package: see lamina.wordpiece).
    unneeded = {"tokenizers", "subprocess", "importlib.resources", "calendar", "tempfile"}
    assert not unneeded & modules


COMMAND_MODULES = {
    f"lamina.cli.{m}"
    for m in ("admin", "bank", "inspector", "logs", "pins", "store", "transcripts", "warm")
}


def test_help_imports_no_command_module(tmp_path: Path) -> None:
    modules, result = imported(tmp_path, "--help")
    assert result.returncode == 0 and "recall-query" in result.stdout
    assert not modules & COMMAND_MODULES and "lamina.bench" not in modules


def test_a_command_imports_its_own_module_alone(tmp_path: Path) -> None:
    modules, result = imported(tmp_path, "recall", "which database?", "--bank", "proj")
    assert result.returncode == 2 and "no bank named 'proj'" in result.stderr
    assert modules & COMMAND_MODULES == {"lamina.cli.bank"} and "lamina.bench" not in modules
    # Nor the retain pipeline (redaction and its rules) or the MCP relay's subprocess.
    assert not {"lamina.bank.retain", "lamina.text.redact", "subprocess"} & modules
    assert "lamina.readers" not in modules  # a recall reads no transcript
