"""Where Lamina keeps its data, which bank a working directory uses, and the user's settings.

Only entry points (the CLI, hooks, servers) call these; the library takes paths and names as
arguments.

Order of precedence, first that is set: a command-line option, then an environment variable,
then the user's config file, then the default.

The config file is TOML at `$LAMINA_CONFIG`, else the platform's user config folder
(`~/.config/lamina/config.toml` on Linux):

    home = "~/lamina-data"            # data directory
    database_url = "postgresql://lamina@db.internal/lamina"   # optional; SQLite otherwise
    embedder = "minilm-l3"            # optional; each bank's own model otherwise

    [banks]                           # project root -> bank, overriding the derived name
    "~/src/inkwell" = "inkwell"

    summariser = "anthropic:claude-haiku-4-5"   # optional; the offline extractive one otherwise
    compression_context_budget = 32000          # the summariser's window, retries included
    summariser_tokens_per_hour = 1000000        # spend caps per model, tokens in and out
    summariser_tokens_per_day = 5000000         # (summaries, facts and query expansions)

    retain_days = 90                  # memories older than this are forgotten at each retain
    exclude = ["~/secret-project", "*/clients/*"]   # the hooks do nothing in these projects

    [hook]                            # lamina hook settings (see its docs)
    turns = 3
    max_chars = 800
    min_prompt = 5
    time_limit = 3.0
    budget = 1024

Data directory: `--home`, `LAMINA_HOME`, `home` in the config file, the platform's user data
folder (`~/.local/share/lamina` on Linux). The SQLite database is `<home>/lamina.db`.

Database: `--database-url`, `LAMINA_DATABASE_URL`, `database_url` in the config file, else the
SQLite file above. A `postgresql://` URL selects the PostgreSQL store; `sqlite:///PATH` or a
plain path a SQLite file.

Embedder (what memories and queries are embedded with): `LAMINA_EMBEDDER`, `embedder` in the
config file, a name `lamina.embed.get_embedder` knows ("minilm-l6", the default all-MiniLM-L6-v2;
"minilm-l3", the earlier default), for every bank; else each bank's own model (the one that made
most of its vectors, `lamina.embed.bank_embedder`; the default for a new bank). Every process
that opens the bank (hooks, servers) must use the same: recall falls back to lexical search for
vectors of another model until `lamina reindex`.

Summariser (the context compiler's): `LAMINA_SUMMARISER`, `LAMINA_COMPRESSION_CONTEXT_BUDGET`,
`LAMINA_SUMMARISER_TOKENS_PER_HOUR`, `LAMINA_SUMMARISER_TOKENS_PER_DAY`, then the config file's
keys of the same names in lower case (without `LAMINA_`), then the defaults (no model: the
offline extractive summariser). The two caps count every call Lamina makes to one model
(summaries, `--facts` at retain, `--expand-with` at recall), kept in the store so they hold
across processes.

Privacy: `retain_days` (`LAMINA_RETAIN_DAYS`): after each retain (the hooks' and `lamina
retain`), the bank's memories that happened more than that many days ago are forgotten.
`exclude` (`LAMINA_EXCLUDE`, paths separated by `os.pathsep`): directories, or shell patterns
(`*/clients/*`), in which the hooks neither recall nor retain; a directory covers everything
under it, and a session is excluded when its project directory or the project's root is.

Default bank for a directory (the rule the Claude Code plugin uses too): the project's root is
the top of its git repository, and all worktrees of one repository share the main worktree's
root (a `.git` file is followed only to a repository of this user's that lists the worktree
back; any other `.git` file leaves the directory its own project); outside git it is the
directory itself. The bank is named after the root's folder name
plus a short hash of its absolute path (`inkwell-3f2a91c0`), so two projects called `api` in
different places never share a bank. `LAMINA_BANK`, then the config file's `[banks]`, override
it.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = [
    "DATABASE_NAME",
    "SummariserSettings",
    "config_path",
    "data_home",
    "database_path",
    "database_target",
    "default_bank",
    "embedder_choice",
    "exclude_patterns",
    "excluded",
    "load_config",
    "project_root",
    "retain_days",
    "summariser_settings",
]

DATABASE_NAME = "lamina.db"


def _user_folder(kind: str) -> Path:
    """platformdirs' user config or data folder for Lamina. On Linux it is the XDG rule,
    followed here without importing platformdirs (every hook process asks for it)."""
    if sys.platform == "linux" and "ANDROID_DATA" not in os.environ:
        variable, default = {
            "config": ("XDG_CONFIG_HOME", "~/.config"),
            "data": ("XDG_DATA_HOME", "~/.local/share"),
        }[kind]
        folder = os.environ.get(variable, "")
        return (Path(folder) if folder.strip() else Path(default).expanduser()) / "lamina"
    from platformdirs import user_config_path, user_data_path

    found = user_config_path if kind == "config" else user_data_path
    return found("lamina", appauthor=False)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if environ.get("LAMINA_CONFIG"):
        return Path(environ["LAMINA_CONFIG"]).expanduser()
    return _user_folder("config") / "config.toml"


def load_config(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The user's config file as a dict ({} when there is none)."""
    path = config_path(env)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from None
    import tomllib  # only when there is a file to parse

    try:
        return tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def data_home(home: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if home:
        return Path(home).expanduser()
    if environ.get("LAMINA_HOME"):
        return Path(environ["LAMINA_HOME"]).expanduser()
    configured = load_config(environ).get("home")
    if isinstance(configured, str) and configured:
        return Path(configured).expanduser()
    return _user_folder("data")


def database_path(home: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    return data_home(home, env) / DATABASE_NAME


def database_target(
    home: str | Path | None = None,
    database_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str | Path:
    """The database to use: a URL when one is configured, else the data directory's file."""
    environ = os.environ if env is None else env
    if database_url:
        return database_url
    if environ.get("LAMINA_DATABASE_URL"):
        return environ["LAMINA_DATABASE_URL"]
    configured = load_config(environ).get("database_url")
    if configured is not None and not (isinstance(configured, str) and configured):
        raise ConfigError(f"{config_path(environ)}: database_url must be a non-empty string")
    if isinstance(configured, str):
        return configured
    return database_path(home, environ)


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


def default_bank(directory: str | Path | None = None, env: Mapping[str, str] | None = None) -> str:
    environ = os.environ if env is None else env
    if environ.get("LAMINA_BANK"):
        return environ["LAMINA_BANK"]
    root = project_root(directory)
    configured = load_config(environ).get("banks")
    if isinstance(configured, dict):
        for path, bank in configured.items():
            if isinstance(bank, str) and Path(path).expanduser().resolve() == root:
                return bank
    slug = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-") or "root"
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


@dataclass(frozen=True, slots=True)
class SummariserSettings:
    """Which summariser the context compiler uses, and what it may spend."""

    summariser: str | None = None
    """`provider:model` (`anthropic:claude-haiku-4-5`, `openai:gpt-4.1-mini`); None: offline."""
    compression_context_budget: int = 32_000
    """The summariser's window: every request, with its longest retry and its output, fits."""
    tokens_per_hour: int = 1_000_000
    tokens_per_day: int = 5_000_000


def summariser_settings(env: Mapping[str, str] | None = None) -> SummariserSettings:
    """Environment first, then the config file, then the defaults (see the module's doc)."""
    environ = os.environ if env is None else env
    configured = load_config(environ)

    def value(key: str) -> tuple[object, str] | None:
        variable = f"LAMINA_{key.upper()}"
        if environ.get(variable):
            return environ[variable], variable
        if configured.get(key) not in (None, ""):
            return configured[key], f"{config_path(environ)}: {key}"
        return None

    def number(key: str, default: int) -> int:
        found = value(key)
        if found is None:
            return default
        raw, where = found
        try:
            parsed = int(str(raw).replace("_", ""))
        except ValueError:
            parsed = 0
        if isinstance(raw, bool) or parsed <= 0:
            raise ConfigError(f"{where} must be a positive whole number of tokens, not {raw!r}")
        return parsed

    found = value("summariser")
    if found is not None and not isinstance(found[0], str):
        raise ConfigError(f"{found[1]} must be a string such as 'anthropic:claude-haiku-4-5'")
    defaults = SummariserSettings()
    return SummariserSettings(
        summariser=str(found[0]).strip() or None if found else None,
        compression_context_budget=number(
            "compression_context_budget", defaults.compression_context_budget
        ),
        tokens_per_hour=number("summariser_tokens_per_hour", defaults.tokens_per_hour),
        tokens_per_day=number("summariser_tokens_per_day", defaults.tokens_per_day),
    )


def embedder_choice(env: Mapping[str, str] | None = None) -> str | None:
    """The embedder asked for: LAMINA_EMBEDDER, else the config file's `embedder`, else None
    (the bundled model)."""
    environ = os.environ if env is None else env
    if environ.get("LAMINA_EMBEDDER"):
        return environ["LAMINA_EMBEDDER"]
    configured = load_config(environ).get("embedder")
    if configured is not None and not (isinstance(configured, str) and configured):
        raise ConfigError(f"{config_path(environ)}: embedder must be a non-empty string")
    return configured if isinstance(configured, str) else None


def retain_days(env: Mapping[str, str] | None = None) -> int | None:
    """How many days memories are kept (`LAMINA_RETAIN_DAYS`, else `retain_days` in the config
    file); None: for ever."""
    environ = os.environ if env is None else env
    raw: object = environ.get("LAMINA_RETAIN_DAYS") or None
    where = "LAMINA_RETAIN_DAYS"
    if raw is None:
        raw = load_config(environ).get("retain_days")
        where = f"{config_path(environ)}: retain_days"
    if raw is None or raw == "":
        return None
    try:
        days = int(str(raw).replace("_", "")) if not isinstance(raw, bool) else 0
    except ValueError:
        days = 0
    if days <= 0:
        raise ConfigError(f"{where} must be a positive whole number of days, not {raw!r}")
    return days


def exclude_patterns(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The excluded directories and patterns (`LAMINA_EXCLUDE`, else `exclude` in the config
    file: a list of strings, or one string)."""
    environ = os.environ if env is None else env
    if environ.get("LAMINA_EXCLUDE"):
        return tuple(p for p in environ["LAMINA_EXCLUDE"].split(os.pathsep) if p.strip())
    configured = load_config(environ).get("exclude")
    if configured is None:
        return ()
    if isinstance(configured, str):
        configured = [configured]
    if not isinstance(configured, list) or not all(isinstance(p, str) for p in configured):
        raise ConfigError(f"{config_path(environ)}: exclude must be a list of paths or patterns")
    return tuple(p for p in configured if p.strip())


def excluded(directory: str | Path | None, env: Mapping[str, str] | None = None) -> str | None:
    """The `exclude` entry that covers `directory` (its project root counts too), or None. An
    entry with `*`, `?` or `[` is a shell pattern matched against the whole path; any other is
    a directory, covering everything under it."""
    patterns = exclude_patterns(env)
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
