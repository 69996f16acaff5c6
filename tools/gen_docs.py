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
from lamina.integrations.claude_code.hook import HookSettings

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


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of the config file and the environment.

    `read` resolves it as the entry points do, from an environment (whose `LAMINA_CONFIG` names
    the config file); the generator prints what it gives with no variable and no file as the
    default, unless `default` describes a default that depends on the machine. The tests set
    `variable`, and `key` in a config file, to `sample` and check that `read` gives it.
    """

    key: str | None
    """The config file's key; `hook.turns` is `turns` under `[hook]`. None: no key."""
    variable: str | None
    meaning: str
    read: Callable[[Mapping[str, str]], object] | None = None
    sample: str = ""
    default: str | None = None


def _hook(field: str) -> Callable[[Mapping[str, str]], object]:
    return lambda env: getattr(HookSettings.from_env(env), field)


def _summariser(field: str) -> Callable[[Mapping[str, str]], object]:
    return lambda env: getattr(config.summariser_settings(env), field)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        None,
        "LAMINA_CONFIG",
        "The config file (TOML).",
        default="`~/.config/lamina/config.toml` (the platform's user config folder)",
    ),
    Setting(
        "home",
        "LAMINA_HOME",
        "The data directory: the SQLite database, vector files, logs, the warm server's "
        "socket. `--home DIR` on the command line.",
        lambda env: str(config.data_home(env=env)),
        "/srv/lamina",
        "`~/.local/share/lamina` (the platform's user data folder)",
    ),
    Setting(
        "database_url",
        "LAMINA_DATABASE_URL",
        "The database: `postgresql://...` for PostgreSQL, `sqlite:///PATH` or a path for "
        "SQLite. `--database-url URL` on the command line.",
        lambda env: str(config.database_target(env=env)),
        "postgresql://lamina@db.internal/lamina",
        "`lamina.db` in the data directory",
    ),
    Setting(
        "embedder",
        "LAMINA_EMBEDDER",
        "The embedding model for every bank: `minilm-l6` (all-MiniLM-L6-v2) or `minilm-l3` "
        "(paraphrase-MiniLM-L3-v2).",
        config.embedder_choice,
        "minilm-l3",
        "each bank's own model; `minilm-l6` for a new bank",
    ),
    Setting(
        None,
        "LAMINA_BANK",
        "The bank every command, hook and server uses when none is named (`--bank`). The "
        'config file\'s `[banks]` table maps a project root to a bank: `"~/src/inkwell" = '
        '"inkwell"`.',
        lambda env: config.default_bank(ROOT, env),
        "inkwell",
        "the project's bank, named after its git root: `inkwell-3f2a91c0`",
    ),
    Setting(
        "summariser",
        "LAMINA_SUMMARISER",
        "The context compiler's summariser, `PROVIDER:MODEL` (`anthropic:claude-haiku-4-5`, "
        "`openai:gpt-4.1-mini`).",
        _summariser("summariser"),
        "anthropic:claude-haiku-4-5",
        "none: the offline extractive summariser",
    ),
    Setting(
        "compression_context_budget",
        "LAMINA_COMPRESSION_CONTEXT_BUDGET",
        "The summariser's window in tokens: every request, its longest retry and its output fit.",
        _summariser("compression_context_budget"),
        "16000",
    ),
    Setting(
        "summariser_tokens_per_hour",
        "LAMINA_SUMMARISER_TOKENS_PER_HOUR",
        "Spend cap per model, tokens in and out: summaries, facts and query expansions count "
        "alike, across processes.",
        _summariser("tokens_per_hour"),
        "20000",
    ),
    Setting(
        "summariser_tokens_per_day",
        "LAMINA_SUMMARISER_TOKENS_PER_DAY",
        "The same cap per day.",
        _summariser("tokens_per_day"),
        "100000",
    ),
    Setting(
        "retain_days",
        "LAMINA_RETAIN_DAYS",
        "Memories that happened more than this many days ago are forgotten after each retain "
        "(the hooks' and `lamina retain`); `lamina forget --older-than` does it on demand.",
        config.retain_days,
        "90",
        "none: kept for ever",
    ),
    Setting(
        "exclude",
        "LAMINA_EXCLUDE",
        "Directories (`~/secret-project`, covering everything under them) or shell patterns "
        "(`*/clients/*`) where the hooks do nothing: no recall, no retain. A list in the "
        "config file; separated by `:` in the variable.",
        lambda env: list(config.exclude_patterns(env)),
        "~/secret-project",
        "none",
    ),
    Setting(
        "hook.turns",
        "LAMINA_HOOK_TURNS",
        "Turns before the prompt that go into the recall query.",
        _hook("context_turns"),
        "5",
    ),
    Setting(
        "hook.max_chars",
        "LAMINA_HOOK_MAX_CHARS",
        "The recall query's length cap, in characters.",
        _hook("max_query_chars"),
        "600",
    ),
    Setting(
        "hook.min_prompt",
        "LAMINA_HOOK_MIN_PROMPT",
        "Shorter prompts recall nothing.",
        _hook("min_prompt_chars"),
        "12",
    ),
    Setting(
        "hook.time_limit",
        "LAMINA_HOOK_TIME_LIMIT",
        "Seconds of wall time a prompt's recall may take, from the hook process's start.",
        _hook("time_limit"),
        "1.5",
    ),
    Setting(
        "hook.budget",
        "LAMINA_HOOK_BUDGET",
        "Tokens the injected memory block may take, heading and dates included.",
        _hook("budget"),
        "512",
    ),
    Setting(
        "hook.session_digest",
        "LAMINA_HOOK_SESSION_DIGEST",
        "At SessionStart, inject a short digest of the project's recent sessions.",
        _hook("session_digest"),
        "true",
    ),
    Setting(
        "hook.digest_sessions",
        "LAMINA_HOOK_DIGEST_SESSIONS",
        "How many recent sessions the digest covers.",
        _hook("digest_sessions"),
        "3",
    ),
    Setting(
        "hook.warm",
        "LAMINA_HOOK_WARM",
        "At SessionStart, start the data directory's warm server if none runs.",
        _hook("warm"),
        "true",
    ),
    Setting(
        "hook.warm_idle",
        "LAMINA_HOOK_WARM_IDLE",
        "Seconds without a prompt after which that warm server exits.",
        _hook("warm_idle"),
        "600",
    ),
    Setting(
        "hook.floor",
        "LAMINA_HOOK_FLOOR",
        "Inject nothing unless some memory found is this close to the prompt (the cosine of "
        "the default model's vectors) or holds `floor_coverage` of the prompt's terms: a "
        "prompt nothing in the bank answers gets no memories. `0`: off.",
        _hook("floor"),
        "0.3",
    ),
    Setting(
        "hook.floor_coverage",
        "LAMINA_HOOK_FLOOR_COVERAGE",
        "The floor's other test: the share of the prompt's terms (weighted by how rare they "
        "are in the bank) one memory must hold. `0`: off.",
        _hook("floor_coverage"),
        "0.6",
    ),
)


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
        if setting.default is not None or setting.read is None:
            default = setting.default or ""
        else:
            default = shown(setting.read(absent))
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
