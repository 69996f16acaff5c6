"""Format detection picks the same reader whether it loads every built-in reader or, for a
Claude Code transcript (what the prompt hook reads on every prompt), only the Claude Code one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.readers import _only_claude_code, base, best_reader, registered_readers
from lamina.readers.base import read_head

from .conftest import CLAUDE_CODE, EXAMPLE, LOCOMO, needs_shared

pytestmark = needs_shared


def sources(tmp_path: Path) -> list[Path]:
    """The real transcripts, and message lists in both formats written from them."""
    lists = tmp_path / "openai.json"
    lists.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant",
                                 "content": "hello", "tool_calls": []}]))  # fmt: skip
    anthropic = tmp_path / "anthropic.jsonl"
    tool = {"type": "tool_use", "id": "t", "name": "x", "input": {}}
    records = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [tool]},
    ]
    anthropic.write_text("".join(json.dumps(r) + "\n" for r in records))
    return [*sorted(CLAUDE_CODE.glob("*.jsonl")), EXAMPLE, LOCOMO, lists, anthropic]


def test_detection_agrees_with_every_reader_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    everyone = registered_readers()
    assert {"claude-code", "anthropic", "openai", "locomo"} <= set(everyone)
    names = set()
    for path in sources(tmp_path):
        if not path.exists():
            continue
        head = read_head(str(path))
        expected = best_reader(head, str(path))
        assert expected is not None, path
        names.add(expected.name)
        with monkeypatch.context() as patch:  # as in a process where no reader is loaded yet
            patch.setattr(base, "_REGISTRY", {})
            alone = _only_claude_code(head, str(path))
        assert (alone.name if alone else None) == (
            "claude-code" if expected.name == "claude-code" else None
        ), path
    assert {"claude-code", "locomo", "openai", "anthropic"} <= names


def test_a_claude_code_transcript_loads_only_its_reader(tmp_path: Path) -> None:
    code = (
        "import sys; from lamina.readers import detect_format; "
        f"print(detect_format({str(EXAMPLE)!r}).name, "
        "sorted(m for m in sys.modules if m.startswith('lamina.readers.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    name, loaded = done.stdout.split(" ", 1)
    assert name == "claude-code"
    for other in ("anthropic", "openai", "locomo", "_builtin_readers"):
        assert f"lamina.readers.{other}'" not in loaded


@pytest.mark.parametrize("name", ["openai.json", "anthropic.jsonl"])
def test_other_formats_are_still_detected_in_a_fresh_process(tmp_path: Path, name: str) -> None:
    path = next(p for p in sources(tmp_path) if p.name == name)
    code = f"from lamina.readers import detect_format; print(detect_format({str(path)!r}).name)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == name.split(".")[0]
