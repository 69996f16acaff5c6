"""The README stays true: every command is documented, the Quick start is what CI runs, and
the public API is what `__all__` says."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import click

import lamina
from lamina.bench import BENCHMARKS, bench
from lamina.cli import cli

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_command_is_in_the_readme() -> None:
    for name in cli.list_commands(click.Context(cli)):
        command = cli.get_command(click.Context(cli), name)
        assert command is not None, name
        if name == "bench" or command.hidden:
            continue
        assert f"lamina {name}" in README, f"`lamina {name}` is not documented"
    assert BENCHMARKS, "no benchmarks registered"
    for name in BENCHMARKS:
        # Benchmarks load on demand; each must load and be documented.
        assert bench.get_command(click.Context(bench), name) is not None, name
        assert re.search(rf"lamina bench (\w+ / )*{name}\b", README), f"bench {name} undocumented"


def test_quick_start_is_two_commands_and_ci_runs_them() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.+?)\n```", section)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in commands:
        assert command in ci


def test_public_api_is_pinned() -> None:
    # Submodules show up as attributes too; the curated API is __all__.
    exported = {
        name
        for name in dir(lamina)
        if not name.startswith("_") and not inspect.ismodule(getattr(lamina, name))
    }
    assert exported == set(lamina.__all__) - {"__version__"}
    assert all(hasattr(lamina, name) for name in lamina.__all__)


def test_the_changelog_keeps_a_changelog_form_for_this_version() -> None:
    import tomllib

    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert releases[0] == ("Unreleased", "")
    assert (version, releases[1][1]) == releases[1] and releases[1][1]
    for name, _date in releases:
        assert re.search(rf"^\[{re.escape(name)}\]: https://", changelog, re.M), name
    sections = re.findall(r"^### (.+)$", changelog, re.M)
    assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.+?)\n```", section, re.S)[0]
    env = {**os.environ, "LAMINA_HOME": str(tmp_path / "home")}
    for key in ("LAMINA_DATABASE_URL", "LAMINA_CONFIG", "LAMINA_SUMMARISER"):
        env.pop(key, None)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    command = [sys.executable, str(script)]
    runs = [
        subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    first, again = (run.stdout.splitlines() for run in runs)
    assert first[0].startswith("retained ") and again[0] == "unchanged 0"
    assert "PostgreSQL" in runs[0].stdout  # recalled
    assert re.fullmatch(r"\d+ tokens, 6 messages", first[-1])  # compiled
    assert (tmp_path / "home").is_dir()
