"""Where Lamina keeps its data, and which bank a working directory uses.

Only entry points (the CLI, hooks, servers) call these; the library takes paths and names as
arguments.

Data directory, first that is set: `--home`, `LAMINA_HOME`, the platform's user data folder
(`~/.local/share/lamina` on Linux). The SQLite database is `<home>/lamina.db`.

Default bank for a directory (the rule the Claude Code plugin uses too): the project's root is
the top of its git repository, and all worktrees of one repository share the main worktree's
root; outside git it is the directory itself. The bank is named after the root's folder name
plus a short hash of its absolute path (`inkwell-3f2a91c0`), so two projects called `api` in
different places never share a bank. `LAMINA_BANK` overrides it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from platformdirs import user_data_path

__all__ = ["DATABASE_NAME", "data_home", "database_path", "default_bank", "project_root"]

DATABASE_NAME = "lamina.db"


def data_home(home: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if home:
        return Path(home).expanduser()
    if environ.get("LAMINA_HOME"):
        return Path(environ["LAMINA_HOME"]).expanduser()
    return user_data_path("lamina", appauthor=False)


def database_path(home: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    return data_home(home, env) / DATABASE_NAME


def _git_common_root(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        git = candidate / ".git"
        if git.is_dir():
            return candidate
        if git.is_file():
            # A worktree (or submodule): ".git" names the real git directory.
            text = git.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return candidate
            gitdir = Path(text.split(":", 1)[1].strip())
            if not gitdir.is_absolute():
                gitdir = (candidate / gitdir).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                shared = Path(common.read_text(encoding="utf-8").strip())
                shared = shared if shared.is_absolute() else (gitdir / shared).resolve()
                return shared.parent if shared.name == ".git" else shared
            return candidate
    return None


def project_root(directory: str | Path | None = None) -> Path:
    start = Path(directory or Path.cwd()).resolve()
    return _git_common_root(start) or start


def default_bank(directory: str | Path | None = None, env: Mapping[str, str] | None = None) -> str:
    environ = os.environ if env is None else env
    if environ.get("LAMINA_BANK"):
        return environ["LAMINA_BANK"]
    root = project_root(directory)
    slug = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-") or "root"
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"
