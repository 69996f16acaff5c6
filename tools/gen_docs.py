"""Write the parts of the docs that come from the code, so that they cannot drift from it.

- docs/cli.md: the `--help` of every command, walked from the click command tree;
- docs/configuration.md: the settings table (names checked against the code and defaults read
  from it) and the environment variables declared on command-line options.

Each generated part sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`;
the text around it is written by hand and kept.

    python tools/gen_docs.py           # rewrite the generated parts
    python tools/gen_docs.py --check   # exit 1 naming the stale pages (tests/test_docs.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from lamina import config
from lamina.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WIDTH = 88
"""The width help is formatted at: the same on every machine, whatever its terminal."""

# The CLI reference ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One command of the tree, as `lamina --help` and `lamina PATH --help` show it."""

    path: tuple[str, ...]
    """The words after `lamina` (empty for `lamina` itself)."""
    command: click.Command
    context: click.Context
    alias_of: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return " ".join(("lamina", *self.path))


def walk(
    command: click.Command = cli,
    path: tuple[str, ...] = (),
    parent: click.Context | None = None,
) -> Iterator[Entry]:
    """Every visible command, depth first, in `--help` order. A name under which its group gives
    a command registered under another name (`doctor` for `status`) is an alias."""
    context = click.Context(
        command,
        info_name=path[-1] if path else "lamina",
        parent=parent,
        **{**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH},
    )
    yield Entry(path, command, context)
    if not isinstance(command, click.Group):
        return
    subs = {name: command.get_command(context, name) for name in command.list_commands(context)}
    for name, sub in subs.items():
        if sub is None or sub.hidden:
            continue
        if sub.name != name and sub.name is not None and subs.get(sub.name) is sub:
            yield Entry((*path, name), sub, context, alias_of=(*path, sub.name))
            continue
        yield from walk(sub, (*path, name), context)


def help_text(entry: Entry) -> str:
    return entry.command.get_help(entry.context).rstrip()


def anchor(name: str) -> str:
    """The id mkdocs gives a heading `## lamina keys create`: lamina-keys-create."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def cli_reference() -> str:
    entries = list(walk())
    rows = ["| command | what it does |", "|---|---|"]
    for entry in entries[1:]:
        summary = (
            f"alias of `{' '.join(('lamina', *entry.alias_of))}`"
            if entry.alias_of
            else entry.command.get_short_help_str(limit=200)
        )
        cell = summary.replace("|", "\\|")
        rows.append(f"| [`{entry.name}`](#{anchor(entry.name)}) | {cell} |")
    parts = ["\n".join(rows)]
    for entry in entries:
        level = "#" * min(2 + max(len(entry.path) - 1, 0), 4)
        if entry.alias_of:
            target = " ".join(("lamina", *entry.alias_of))
            link = f"[`{target}`](#{anchor(target)})"
            parts.append(f"{level} {entry.name}\n\nThe same command as {link}.")
            continue
        parts.append(f"{level} {entry.name}\n\n```text\n{help_text(entry)}\n```")
    return "\n\n".join(parts)


def missing_examples() -> list[str]:
    """Commands that run something (not groups, not aliases) whose help has no `Example:`."""
    return [
        entry.name
        for entry in walk()
        if not isinstance(entry.command, click.Group)
        and entry.alias_of is None
        and "Example:" not in (entry.command.help or "")
    ]


# The settings ----------------------------------------------------------------------------------


SETTINGS = config.SETTINGS
"""The documented settings: lamina.config's table, in its order."""


def read(setting: config.Setting, env: Mapping[str, str]) -> object:
    """The setting as the entry points resolve it from `env` (whose LAMINA_CONFIG names the
    config file): its field of `lamina.config.Settings` (the bank: the one of this
    repository's directory); None for a setting that is no field."""
    if setting.field is None:
        return None
    resolved = config.resolve_settings(env)
    if setting.field == "bank":
        return config.default_bank(ROOT, resolved)
    value: object = resolved
    for part in setting.field.split("."):
        value = getattr(value, part)
    return list(value) if isinstance(value, tuple) else value


def no_config(folder: Path) -> dict[str, str]:
    """An environment with no Lamina variable and a config file that does not exist."""
    return {"LAMINA_CONFIG": str(folder / "absent.toml")}


def shown(value: object) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"`{value:_}`".replace("_", ",") if value >= 10_000 else f"`{value}`"
    return f"`{value}`"


def settings_table() -> str:
    rows = [
        "| config file | environment | default | meaning |",
        "|---|---|---|---|",
    ]
    absent = no_config(DOCS / "does-not-exist")
    for setting in SETTINGS:
        if setting.default is not None or setting.field is None:
            default = setting.default or ""
        else:
            default = shown(read(setting, absent))
        key = ""
        if setting.key:
            table, _, name = setting.key.rpartition(".")
            key = f"`{name}` under `[{table}]`" if table else f"`{name}`"
        variable = f"`{setting.variable}`" if setting.variable else ""
        rows.append(f"| {key} | {variable} | {default} | {setting.meaning} |")
    return "\n".join(rows)


def option_variables() -> list[tuple[str, str, list[str]]]:
    """(variable, option, commands) for every command-line option that reads a variable."""
    found: dict[tuple[str, str], list[str]] = {}
    for entry in walk():
        if entry.alias_of:
            continue
        for param in entry.command.params:
            if isinstance(param, click.Option) and isinstance(param.envvar, str):
                option = max(param.opts, key=len)
                found.setdefault((param.envvar, option), []).append(entry.name)
    return [(variable, option, names) for (variable, option), names in sorted(found.items())]


def options_table() -> str:
    rows = ["| environment | option | commands |", "|---|---|---|"]
    for variable, option, names in option_variables():
        commands = ", ".join(f"`{name}`" for name in names)
        rows.append(f"| `{variable}` | `{option}` | {commands} |")
    return "\n".join(rows)


# Writing --------------------------------------------------------------------------------------

GENERATED: dict[str, tuple[str, Callable[[], str]]] = {
    "cli": ("cli.md", cli_reference),
    "settings": ("configuration.md", settings_table),
    "option-variables": ("configuration.md", options_table),
}
"""Generated part -> (page under docs/, what writes it)."""


def fill(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{name}: the page has no `{begin}` ... `{end}` block")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def render(docs: Path = DOCS) -> dict[Path, str]:
    """Each page with a generated part, as it should read."""
    pages: dict[Path, str] = {}
    for name, (page, write) in GENERATED.items():
        path = docs / page
        text = pages.get(path) or path.read_text(encoding="utf-8")
        pages[path] = fill(text, name, write())
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only say which pages are stale")
    args = parser.parse_args(argv)
    stale = {
        path: text for path, text in render().items() if path.read_text(encoding="utf-8") != text
    }
    for path, text in stale.items():
        if args.check:
            print(f"{path.relative_to(ROOT)} is stale: run python tools/gen_docs.py")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
