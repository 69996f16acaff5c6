"""The docs stay true: the generated pages are what the code says, every command has an example,
the Quick start is what CI runs, the Python example runs, every variable the package reads is
documented, and the public API is what `__all__` says."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import click
import pytest

import lamina
from lamina import config
from lamina.bench import BENCHMARKS, bench

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


gen_docs = _gen_docs()


def test_the_generated_pages_are_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in gen_docs.render().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"{stale} out of date with the code: run python tools/gen_docs.py"


def test_every_command_has_an_example() -> None:
    assert gen_docs.missing_examples() == []


def test_every_command_and_benchmark_is_in_the_cli_reference() -> None:
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    names = [entry.name for entry in gen_docs.walk()]
    assert {"lamina recall", "lamina keys create", "lamina warm start"} <= set(names)
    for name in names:
        assert f"\n## {name}\n" in reference or f"\n### {name}\n" in reference, name
    assert BENCHMARKS, "no benchmarks registered"
    for name in BENCHMARKS:
        # Benchmarks load on demand; each must load and be documented.
        assert bench.get_command(click.Context(bench), name) is not None, name
        assert f"### lamina bench {name}\n" in reference, f"bench {name} undocumented"


@pytest.mark.parametrize("path", [(), ("recall",), ("keys", "create"), ("bench", "locomo")])
def test_the_cli_reference_is_what_help_prints(path: tuple[str, ...]) -> None:
    from click.testing import CliRunner

    from lamina.cli import cli

    entry = next(entry for entry in gen_docs.walk() if entry.path == path)
    width = {"terminal_width": gen_docs.WIDTH, "max_content_width": gen_docs.WIDTH}
    printed = CliRunner().invoke(cli, [*path, "--help"], prog_name="lamina", **width)
    assert printed.exit_code == 0, printed.output
    assert printed.output == gen_docs.help_text(entry) + "\n"
    assert max(len(line) for line in printed.output.splitlines()) <= gen_docs.WIDTH


def test_the_check_sees_a_page_the_code_no_longer_matches(tmp_path: Path) -> None:
    # The check would catch a command whose help changed: render into a copy, edit, compare.
    copy = tmp_path / "docs"
    copy.mkdir()
    for page in ("cli.md", "configuration.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        (copy / page).write_text(text.replace("Usage: lamina recall", "Usage: lamina old"), "utf-8")
    rendered = gen_docs.render(copy)
    assert rendered[copy / "cli.md"] != (copy / "cli.md").read_text(encoding="utf-8")
    assert rendered[copy / "cli.md"] == (DOCS / "cli.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.md"])
def test_quick_start_is_two_commands_and_ci_runs_them(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    heading = "## Quick start" if page == "README.md" else "## Run it on the bundled example"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.+?)\n```", section)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in commands:
        assert command in ci


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs"
    for link in local:
        assert not link.startswith(".."), f"{link}: outside the repository"
        assert (ROOT / link).exists(), f"{link}: no such file"
    # `mkdocs build --strict` (in .ci/run) holds the pages to the nav; here the README to them.
    linked = {link.removeprefix("docs/") for link in local if link.startswith("docs/")}
    assert {page.name for page in DOCS.glob("*.md")} <= linked


def test_every_variable_the_package_reads_is_documented() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    internal = {"LAMINA_MCP_DIRECT", "LAMINA_RULES"}  # a relay's marker; a constant's name
    sources = [*(ROOT / "lamina").rglob("*.py"), *(ROOT / "plugins").rglob("*")]
    found: set[str] = set()
    for path in sources:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found |= set(re.findall(r"\bLAMINA_[A-Z][A-Z0-9_]*\b(?![{])", text))
    assert {"LAMINA_HOME", "LAMINA_HOOK_TIME_LIMIT", "LAMINA_BIN"} <= found
    assert sorted(found - internal - set(re.findall(r"LAMINA_[A-Z0-9_]+", page))) == []


def _config_literal(sample: str) -> str:
    if sample in ("true", "false") or re.fullmatch(r"\d+(\.\d+)?", sample):
        return sample
    return f'"{sample}"'


@pytest.mark.parametrize("setting", gen_docs.SETTINGS, ids=lambda s: s.variable or s.key)
def test_each_documented_setting_is_read_where_the_table_says(
    setting: object, tmp_path: Path
) -> None:
    assert isinstance(setting, config.Setting)
    if setting.field is None or setting.field == "config_file":
        return
    absent = gen_docs.no_config(tmp_path)
    default = gen_docs.read(setting, absent)
    assert setting.variable
    by_variable = gen_docs.read(setting, {**absent, setting.variable: setting.sample})
    assert by_variable != default, f"{setting.variable} changes nothing"
    if setting.key:
        table, _, key = setting.key.rpartition(".")
        file = tmp_path / "config.toml"
        line = f"{key} = {_config_literal(setting.sample)}\n"
        file.write_text(f"[{table}]\n{line}" if table else line, encoding="utf-8")
        by_file = gen_docs.read(setting, {"LAMINA_CONFIG": str(file)})
        assert by_file == by_variable, f"{setting.key} is not read as {setting.variable} is"


def python_block(page: str, heading: str) -> str:
    """The first Python block under `heading` (a `## ` heading) of `page`."""
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", section, re.S)[0]


def test_the_python_example_runs(tmp_path: Path) -> None:
    code = python_block((DOCS / "python.md").read_text(encoding="utf-8"), "Retain, recall, compile")
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
