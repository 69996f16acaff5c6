"""Lamina's settings, resolved once per entry point into one frozen `Settings`, and which
bank a directory uses.

Only entry points (the CLI, the hooks, the warm server and its client, the HTTP and MCP
servers) call `resolve_settings`; they hand what they resolved to the library, which reads
neither the environment nor the config file. The standard library is all this module imports
(tomllib only when there is a file), so the warm client, which answers a prompt in a few
milliseconds, resolves with the same rules as everything else.

Order of precedence, first that is set: a command-line option (`home`, `database_url`), then
an environment variable, then the user's config file, then the default. The config file is
TOML at `$LAMINA_CONFIG`, else the platform's user config folder
(`~/.config/lamina/config.toml` on Linux). `SETTINGS` describes each setting: its key in the
file, its variable, what it means; the configuration page's table is generated from it
(tools/gen_docs.py), with the defaults a resolve gives with no variable and no file.

A config file that is not valid TOML, or a setting of the wrong type, raises
`lamina.errors.ConfigError` naming the file and the key. The `[hook]` table is read leniently:
a value that is not a number leaves the default (a hook must never fail on it).

Default bank for a directory (the rule the Claude Code plugin uses too): the project's root is
the top of its git repository, and all worktrees of one repository share the main worktree's
root (a `.git` file is followed only to a repository of this user's that lists the worktree
back; any other `.git` file leaves the directory its own project); outside git it is the
directory itself. The bank is named after the root's folder name
plus a short hash of its absolute path (`inkwell-3f2a91c0`), so two projects called `api` in
different places never share a bank. `LAMINA_BANK`, then the config file's `[banks]`, override
it.

Exclusion: `exclude` (`LAMINA_EXCLUDE`, paths separated by `os.pathsep`) lists directories, or
shell patterns (`*/clients/*`), in which the hooks neither recall nor retain; a directory covers
everything under it, and a session is excluded when its project directory or the project's
root is.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and dataclasses would cost every warm prompt several ms
    from collections.abc import Mapping
    from typing import Any, Self

    from .errors import ConfigError

__all__ = [
    "DATABASE_NAME",
    "SETTINGS",
    "HookSettings",
    "Setting",
    "Settings",
    "SummariserSettings",
    "config_path",
    "default_bank",
    "excluded",
    "project_root",
    "resolve_settings",
]

DATABASE_NAME = "lamina.db"


class _Frozen:
    """A frozen record: built by position or keyword from the class's annotated fields (a
    class value is the field's default), compared and shown by value, changed by `replace`
    into a copy. Not a dataclass: importing dataclasses costs a warm prompt's process about
    7 ms."""

    __slots__ = ("__dict__",)
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        cls._fields = tuple(cls.__annotations__)  # its own (every subclass declares fields)

    def __init__(self, *given: object, **values: Any) -> None:
        if len(given) > len(self._fields):
            raise TypeError(f"{type(self).__name__} takes {len(self._fields)} values")
        for name, value in zip(self._fields, given, strict=False):
            if name in values:
                raise TypeError(f"{type(self).__name__} got {name} twice")
            values[name] = value
        for name in self._fields:
            if name in values:
                value = values.pop(name)
            elif hasattr(type(self), name):
                value = getattr(type(self), name)
            else:
                raise TypeError(f"{type(self).__name__} needs {name}")
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__} has no field {sorted(values)[0]}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Frozen)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`."""
        return type(self)(**{**dict(zip(self._fields, self._values(), strict=True)), **changes})


class SummariserSettings(_Frozen):
    """Which summariser the context compiler uses, and what it may spend."""

    summariser: str | None = None
    """`provider:model` (`anthropic:claude-haiku-4-5`, `openai:gpt-4.1-mini`); None: offline."""
    compression_context_budget: int = 32_000
    """The summariser's window: every request, with its longest retry and its output, fits."""
    tokens_per_hour: int = 1_000_000
    tokens_per_day: int = 5_000_000


class HookSettings(_Frozen):
    """What the agents' hooks do on each event (the config file's `[hook]` table)."""

    context_turns: int = 3
    max_query_chars: int = 800
    min_prompt_chars: int = 5
    time_limit: float = 3.0
    budget: int = 1024
    session_digest: bool = False
    """On SessionStart, inject a short digest of the project's recent sessions."""
    digest_sessions: int = 5
    warm: bool = False
    """On SessionStart, start the data directory's warm server if none runs."""
    warm_idle: float = 1800.0
    """Seconds without a prompt after which a warm server started by SessionStart exits."""
    floor: float = 0.28
    """Inject nothing unless some memory's dense score reaches this, or its coverage of the
    prompt's terms `floor_coverage`: lamina.bank.recall.Floor, whose defaults these are
    (written out, so that the hook need not import recall to read its settings); 0: off."""
    floor_coverage: float = 0.5


class Settings(_Frozen):
    """Every setting, as one entry point resolved it (`resolve_settings`)."""

    config_file: Path
    """Where the config file is, or would be."""
    home: Path
    """The data directory."""
    database_url: str | None = None
    """The database configured (a URL or a path); None: `lamina.db` in `home`."""
    embedder: str | None = None
    """The embedder for every bank; None: each bank's own model."""
    bank: str | None = None
    """LAMINA_BANK: the bank used when none is named, wherever the command runs."""
    banks: tuple[tuple[str, str], ...] = ()
    """The config file's `[banks]`: (project root as written, bank)."""
    retain_days: int | None = None
    exclude: tuple[str, ...] = ()
    summariser: SummariserSettings = SummariserSettings()
    hook: HookSettings = HookSettings()

    @property
    def database(self) -> str | Path:
        """The database to open: the configured URL, else the data directory's file."""
        return self.database_url if self.database_url else self.home / DATABASE_NAME


class Setting(_Frozen):
    """One documented setting of the config file and the environment."""

    key: str | None
    """The config file's key; `hook.turns` is `turns` under `[hook]`. None: no key."""
    variable: str | None
    meaning: str
    field: str | None = None
    """Where `Settings` holds it (`hook.context_turns`); None: not a field."""
    sample: str = ""
    """A value to set it to (the tests set it and read it back)."""
    default: str | None = None
    """The default in words, where it depends on the machine (else a resolve gives it)."""


def _error(message: str) -> ConfigError:
    from .errors import ConfigError  # only on the way out: the import path stays stdlib

    return ConfigError(message)


def _user_folder(kind: str, environ: Mapping[str, str]) -> Path:
    """platformdirs' user config or data folder for Lamina. On Linux it is the XDG rule,
    followed here without importing platformdirs (every hook process asks for it)."""
    if sys.platform == "linux" and "ANDROID_DATA" not in environ:
        variable, default = {
            "config": ("XDG_CONFIG_HOME", "~/.config"),
            "data": ("XDG_DATA_HOME", "~/.local/share"),
        }[kind]
        folder = environ.get(variable, "")
        return (Path(folder) if folder.strip() else Path(default).expanduser()) / "lamina"
    from platformdirs import user_config_path, user_data_path

    found = user_config_path if kind == "config" else user_data_path
    return found("lamina", appauthor=False)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if environ.get("LAMINA_CONFIG"):
        return Path(environ["LAMINA_CONFIG"]).expanduser()
    return _user_folder("config", environ) / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    """The config file as a dict ({} when there is none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _error(f"{path}: cannot read the config file ({exc.strerror})") from None
    import tomllib  # only when there is a file to parse

    try:
        return tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise _error(f"{path}: not valid TOML ({exc})") from None


class _Reader:
    """Looks a setting up: the environment first, then the config file."""

    def __init__(self, environ: Mapping[str, str], path: Path, configured: dict[str, Any]):
        self.environ, self.path, self.configured = environ, path, configured

    def text(self, key: str, variable: str) -> str | None:
        if self.environ.get(variable):
            return self.environ[variable]
        value = self.configured.get(key)
        if value is not None and not (isinstance(value, str) and value):
            raise _error(f"{self.path}: {key} must be a non-empty string")
        return value

    def found(self, key: str, variable: str) -> tuple[object, str] | None:
        if self.environ.get(variable):
            return self.environ[variable], variable
        if self.configured.get(key) not in (None, ""):
            return self.configured[key], f"{self.path}: {key}"
        return None

    def positive(self, key: str, variable: str, unit: str) -> int | None:
        found = self.found(key, variable)
        if found is None:
            return None
        raw, where = found
        try:
            parsed = int(str(raw).replace("_", "")) if not isinstance(raw, bool) else 0
        except ValueError:
            parsed = 0
        if parsed <= 0:
            raise _error(f"{where} must be a positive whole number of {unit}, not {raw!r}")
        return parsed


def _flag(*values: object) -> bool:
    for value in values:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip():
            return value.strip().lower() in ("1", "true", "yes", "on")
    return False


def _hook(environ: Mapping[str, str], configured: Mapping[str, Any]) -> HookSettings:
    table = configured.get("hook")
    hook = table if isinstance(table, dict) else {}

    def number(key: str, default: float) -> float:
        for raw in (environ.get(f"LAMINA_HOOK_{key.upper()}"), hook.get(key)):
            try:
                if raw is not None and raw != "":
                    return float(raw)
            except (TypeError, ValueError):
                continue
        return default

    return HookSettings(
        context_turns=int(number("turns", 3)),
        max_query_chars=int(number("max_chars", 800)),
        min_prompt_chars=int(number("min_prompt", 5)),
        time_limit=number("time_limit", 3.0),
        budget=int(number("budget", 1024)),
        session_digest=_flag(environ.get("LAMINA_HOOK_SESSION_DIGEST"), hook.get("session_digest")),
        digest_sessions=int(number("digest_sessions", 5)),
        warm=_flag(environ.get("LAMINA_HOOK_WARM"), hook.get("warm")),
        warm_idle=number("warm_idle", 1800.0),
        floor=number("floor", 0.28),
        floor_coverage=number("floor_coverage", 0.5),
    )


def _summariser(read: _Reader) -> SummariserSettings:
    found = read.found("summariser", "LAMINA_SUMMARISER")
    if found is not None and not isinstance(found[0], str):
        raise _error(f"{found[1]} must be a string such as 'anthropic:claude-haiku-4-5'")
    defaults = SummariserSettings()

    def tokens(key: str, default: int) -> int:
        return read.positive(key, f"LAMINA_{key.upper()}", "tokens") or default

    return SummariserSettings(
        summariser=str(found[0]).strip() or None if found else None,
        compression_context_budget=tokens(
            "compression_context_budget", defaults.compression_context_budget
        ),
        tokens_per_hour=tokens("summariser_tokens_per_hour", defaults.tokens_per_hour),
        tokens_per_day=tokens("summariser_tokens_per_day", defaults.tokens_per_day),
    )


def _exclude(read: _Reader) -> tuple[str, ...]:
    if read.environ.get("LAMINA_EXCLUDE"):
        return tuple(p for p in read.environ["LAMINA_EXCLUDE"].split(os.pathsep) if p.strip())
    configured = read.configured.get("exclude")
    if configured is None:
        return ()
    if isinstance(configured, str):
        configured = [configured]
    if not isinstance(configured, list) or not all(isinstance(p, str) for p in configured):
        raise _error(f"{read.path}: exclude must be a list of paths or patterns")
    return tuple(p for p in configured if p.strip())


def resolve_settings(
    env: Mapping[str, str] | None = None,
    *,
    home: str | Path | None = None,
    database_url: str | None = None,
) -> Settings:
    """Every setting from the command line's `home` and `database_url`, the environment
    (`env`, default this process's) and the config file it names, read once."""
    environ = os.environ if env is None else env
    path = config_path(environ)
    configured = _read(path)
    read = _Reader(environ, path, configured)
    if home:
        base = Path(home).expanduser()
    elif environ.get("LAMINA_HOME"):
        base = Path(environ["LAMINA_HOME"]).expanduser()
    elif isinstance(configured.get("home"), str) and configured["home"]:
        base = Path(configured["home"]).expanduser()
    else:
        base = _user_folder("data", environ)
    banks = configured.get("banks")
    return Settings(
        config_file=path,
        home=base,
        database_url=database_url or read.text("database_url", "LAMINA_DATABASE_URL"),
        embedder=read.text("embedder", "LAMINA_EMBEDDER"),
        bank=environ.get("LAMINA_BANK") or None,
        banks=tuple(
            (str(root), name)
            for root, name in (banks.items() if isinstance(banks, dict) else ())
            if isinstance(name, str)
        ),
        retain_days=read.positive("retain_days", "LAMINA_RETAIN_DAYS", "days"),
        exclude=_exclude(read),
        summariser=_summariser(read),
        hook=_hook(environ, configured),
    )


def _pointed(base: Path, file: Path) -> Path:
    """The path a git pointer file holds (after `gitdir:` where there is one), from `base`."""
    text = file.read_text(encoding="utf-8", errors="replace").strip()
    return (base / text.removeprefix("gitdir:").strip()).resolve()


def _worktree_root(candidate: Path) -> Path:
    """The root of the repository whose worktree `candidate` is, as its `.git` file says, if
    the repository confirms it; else `candidate` itself. A `.git` file can name any git
    directory, another project's included (a downloaded folder can hold one): it is followed
    only when the git directory is `<common>/worktrees/<name>` of a repository owned by this
    user whose entry points back at this `.git` file, as `git worktree add` writes them."""
    git = candidate / ".git"
    try:
        gitdir = _pointed(candidate, git)
        shared = _pointed(gitdir, gitdir / "commondir")
        if (
            gitdir.parent == shared / "worktrees"
            and _pointed(gitdir, gitdir / "gitdir") == git.resolve()
            and shared.stat().st_uid == os.getuid()
        ):
            return shared.parent if shared.name == ".git" else shared
    except (OSError, ValueError):  # no commondir (a submodule), unreadable: its own
        pass
    return candidate


def _git_common_root(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        git = candidate / ".git"
        if git.is_dir():
            return candidate
        if git.is_file():  # a worktree (or submodule): ".git" names the real git directory
            return _worktree_root(candidate)
    return None


def project_root(directory: str | Path | None = None) -> Path:
    start = Path(directory or Path.cwd()).resolve()
    return _git_common_root(start) or start


def default_bank(directory: str | Path | None, settings: Settings) -> str:
    """The bank of `directory`'s project (None: the working directory): LAMINA_BANK, else the
    config file's `[banks]` entry for the project's root, else the name derived from it."""
    if settings.bank:
        return settings.bank
    root = project_root(directory)
    for path, bank in settings.banks:
        if Path(path).expanduser().resolve() == root:
            return bank
    slug = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-") or "root"
    import hashlib  # here: the warm client never derives a bank

    digest = hashlib.sha1(str(root).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


def excluded(directory: str | Path | None, settings: Settings) -> str | None:
    """The `exclude` entry that covers `directory` (its project root counts too), or None. An
    entry with `*`, `?` or `[` is a shell pattern matched against the whole path; any other is
    a directory, covering everything under it."""
    patterns = settings.exclude
    if not patterns or directory is None:
        return None
    import fnmatch

    start = Path(directory).expanduser().resolve()
    places = {start, project_root(start)}
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            expanded = str(Path(pattern).expanduser())
            if any(fnmatch.fnmatchcase(str(p), expanded) for p in places):
                return pattern
            continue
        root = Path(pattern).expanduser().resolve()
        if any(p == root or root in p.parents for p in places):
            return pattern
    return None


SETTINGS: tuple[Setting, ...] = (
    Setting(
        None,
        "LAMINA_CONFIG",
        "The config file (TOML).",
        "config_file",
        default="`~/.config/lamina/config.toml` (the platform's user config folder)",
    ),
    Setting(
        "home",
        "LAMINA_HOME",
        "The data directory: the SQLite database, vector files, logs, the warm server's "
        "socket. `--home DIR` on the command line.",
        "home",
        "/srv/lamina",
        "`~/.local/share/lamina` (the platform's user data folder)",
    ),
    Setting(
        "database_url",
        "LAMINA_DATABASE_URL",
        "The database: `postgresql://...` for PostgreSQL, `sqlite:///PATH` or a path for "
        "SQLite. `--database-url URL` on the command line.",
        "database",
        "postgresql://lamina@db.internal/lamina",
        "`lamina.db` in the data directory",
    ),
    Setting(
        "embedder",
        "LAMINA_EMBEDDER",
        "The embedding model for every bank: `minilm-l6` (all-MiniLM-L6-v2) or `minilm-l3` "
        "(paraphrase-MiniLM-L3-v2).",
        "embedder",
        "minilm-l3",
        "each bank's own model; `minilm-l6` for a new bank",
    ),
    Setting(
        None,
        "LAMINA_BANK",
        "The bank every command, hook and server uses when none is named (`--bank`). The "
        'config file\'s `[banks]` table maps a project root to a bank: `"~/src/inkwell" = '
        '"inkwell"`.',
        "bank",
        "inkwell",
        "the project's bank, named after its git root: `inkwell-3f2a91c0`",
    ),
    Setting(
        "summariser",
        "LAMINA_SUMMARISER",
        "The context compiler's summariser, `PROVIDER:MODEL` (`anthropic:claude-haiku-4-5`, "
        "`openai:gpt-4.1-mini`).",
        "summariser.summariser",
        "anthropic:claude-haiku-4-5",
        "none: the offline extractive summariser",
    ),
    Setting(
        "compression_context_budget",
        "LAMINA_COMPRESSION_CONTEXT_BUDGET",
        "The summariser's window in tokens: every request, its longest retry and its output fit.",
        "summariser.compression_context_budget",
        "16000",
    ),
    Setting(
        "summariser_tokens_per_hour",
        "LAMINA_SUMMARISER_TOKENS_PER_HOUR",
        "Spend cap per model, tokens in and out: summaries, facts and query expansions count "
        "alike, across processes.",
        "summariser.tokens_per_hour",
        "20000",
    ),
    Setting(
        "summariser_tokens_per_day",
        "LAMINA_SUMMARISER_TOKENS_PER_DAY",
        "The same cap per day.",
        "summariser.tokens_per_day",
        "100000",
    ),
    Setting(
        "retain_days",
        "LAMINA_RETAIN_DAYS",
        "Memories that happened more than this many days ago are forgotten after each retain "
        "(the hooks' and `lamina retain`); `lamina forget --older-than` does it on demand.",
        "retain_days",
        "90",
        "none: kept for ever",
    ),
    Setting(
        "exclude",
        "LAMINA_EXCLUDE",
        "Directories (`~/secret-project`, covering everything under them) or shell patterns "
        "(`*/clients/*`) where the hooks do nothing: no recall, no retain. A list in the "
        "config file; separated by `:` in the variable.",
        "exclude",
        "~/secret-project",
        "none",
    ),
    Setting(
        "hook.turns",
        "LAMINA_HOOK_TURNS",
        "Turns before the prompt that go into the recall query.",
        "hook.context_turns",
        "5",
    ),
    Setting(
        "hook.max_chars",
        "LAMINA_HOOK_MAX_CHARS",
        "The recall query's length cap, in characters.",
        "hook.max_query_chars",
        "600",
    ),
    Setting(
        "hook.min_prompt",
        "LAMINA_HOOK_MIN_PROMPT",
        "Shorter prompts recall nothing.",
        "hook.min_prompt_chars",
        "12",
    ),
    Setting(
        "hook.time_limit",
        "LAMINA_HOOK_TIME_LIMIT",
        "Seconds of wall time a prompt's recall may take, from the hook process's start.",
        "hook.time_limit",
        "1.5",
    ),
    Setting(
        "hook.budget",
        "LAMINA_HOOK_BUDGET",
        "Tokens the injected memory block may take, heading and dates included.",
        "hook.budget",
        "512",
    ),
    Setting(
        "hook.session_digest",
        "LAMINA_HOOK_SESSION_DIGEST",
        "At SessionStart, inject a short digest of the project's recent sessions.",
        "hook.session_digest",
        "true",
    ),
    Setting(
        "hook.digest_sessions",
        "LAMINA_HOOK_DIGEST_SESSIONS",
        "How many recent sessions the digest covers.",
        "hook.digest_sessions",
        "3",
    ),
    Setting(
        "hook.warm",
        "LAMINA_HOOK_WARM",
        "At SessionStart, start the data directory's warm server if none runs.",
        "hook.warm",
        "true",
    ),
    Setting(
        "hook.warm_idle",
        "LAMINA_HOOK_WARM_IDLE",
        "Seconds without a prompt after which that warm server exits.",
        "hook.warm_idle",
        "600",
    ),
    Setting(
        "hook.floor",
        "LAMINA_HOOK_FLOOR",
        "Inject nothing unless some memory found is this close to the prompt (the cosine of "
        "the default model's vectors) or holds `floor_coverage` of the prompt's terms: a "
        "prompt nothing in the bank answers gets no memories. `0`: off.",
        "hook.floor",
        "0.3",
    ),
    Setting(
        "hook.floor_coverage",
        "LAMINA_HOOK_FLOOR_COVERAGE",
        "The floor's other test: the share of the prompt's terms (weighted by how rare they "
        "are in the bank) one memory must hold. `0`: off.",
        "hook.floor_coverage",
        "0.6",
    ),
)
"""Every documented setting, in the order of the configuration page's table."""
