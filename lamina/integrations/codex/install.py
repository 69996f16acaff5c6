"""`lamina install codex` / `lamina uninstall codex`: Lamina's hooks in Codex's hooks.json and its
MCP server in Codex's config.toml, every other setting kept.

User scope: `$CODEX_HOME` (default `~/.codex`), with this installation's `lamina` by absolute
path. Project scope: `<project>/.codex/` (the project root of lamina.config), meant to be
committed: `lamina` from PATH, nothing of this machine.

- hooks.json: `{"hooks": {event: [{"matcher"?, "hooks": [{"type": "command", ...}]}]}}`, merged
  and written like Claude Code's settings (lamina.integrations.claude_code.install): Lamina's
  entries replaced, everything else kept, a file that held only them removed again.
- config.toml: only the `[mcp_servers.lamina]` table is Lamina's. No TOML writer is among the
  dependencies, so the file is edited as text: that table's lines are removed and written again
  at the end; every other byte stays. The result is parsed (tomllib) before it is written, and a
  file that already declares the server in another form (inline, dotted keys) is left alone
  with an error.

Trust: Codex skips hooks that are not managed until the user trusts them, silently. Trust is
kept by Codex in config.toml (`[hooks.state."<hooks.json>:<event>:<group>:<handler>"]
trusted_hash`) and any edit of a hook un-trusts it. `trust` does what the `/hooks` screen does,
through `codex app-server` (`hooks/list`, then `config/batchWrite` of the current hashes of
Lamina's hooks only); `hook_states` reads back whether they are trusted. A project's hooks
also need the project trusted (`codex exec --trust` or the first interactive run asks).
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...config import project_root
from ...errors import ConfigError
from ..claude_code.install import _is_ours, _load, _save, _without_ours
from ..installs import AGENT_HOOK_EVENTS, SERVER, hook_commands, mcp_words, packaged_stands_aside

__all__ = [
    "HOOK_EVENTS",
    "CodexFiles",
    "codex_files",
    "codex_home",
    "find_codex",
    "hook_states",
    "install",
    "installed_scopes",
    "plugin_installed",
    "plugin_keys",
    "plugin_states",
    "stands_aside",
    "uninstall",
]

HOOK_EVENTS: Mapping[str, int] = {**AGENT_HOOK_EVENTS, "SessionEnd": 3}
"""The events Lamina handles in Codex, with their timeouts (seconds). Codex clamps SessionEnd to
3 s: that event (like Stop and PreCompact) only starts the detached retain worker. PreCompact
(`trigger: auto` or `manual`) retains a long turn before Codex compacts its history, rather than
at the turn's end."""

SESSION_START_MATCHER = "startup|resume|clear"
_SNAKE = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
          "Stop": "stop", "PreCompact": "pre_compact", "SessionEnd": "session_end"}  # fmt: skip
"""How Codex names an event in a hook's trust key."""

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(#.*)?$")
_OUR_TABLE = re.compile(r'^mcp_servers\s*\.\s*(lamina|"lamina"|\'lamina\')\s*(\..*)?$')


@dataclass(frozen=True, slots=True)
class CodexFiles:
    scope: str
    hooks: Path
    config: Path


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    return Path(environ.get("CODEX_HOME") or Path.home() / ".codex")


def codex_files(
    scope: str, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> CodexFiles:
    if scope == "user":
        base = codex_home(env)
    elif scope == "project":
        base = project_root(directory) / ".codex"
    else:
        raise ConfigError(f"unknown scope {scope!r} (user or project)")
    return CodexFiles(scope, base / "hooks.json", base / "config.toml")


def _hook_groups(commands: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for event, timeout in HOOK_EVENTS.items():
        group: dict[str, Any] = {}
        if event == "SessionStart":
            group["matcher"] = SESSION_START_MATCHER
        group["hooks"] = [{"type": "command", "command": commands[event], "timeout": timeout}]
        groups[event] = [group]
    return groups


def _server_table(scope: str, home: str | Path | None) -> str:
    """The `[mcp_servers.lamina]` table: this installation's `lamina mcp` (user scope), or
    `lamina mcp` from PATH (a project's)."""
    command, *args = mcp_words(scope, home)

    def string(value: str) -> str:
        return orjson.dumps(value).decode()  # a JSON string is a TOML basic string

    lines = [
        f"[mcp_servers.{SERVER}]",
        f"command = {string(command)}",
        f"args = [{', '.join(string(a) for a in args)}]",
    ]
    return "\n".join(lines) + "\n"


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid TOML ({exc}); fix it, Lamina will not replace it"
        ) from None


def _without_server(text: str, table: str | None = None) -> tuple[str, bool]:
    """`text` without the `[mcp_servers.lamina]` table (and its sub-tables such as `.env`),
    and whether there was one. With `table`, that text takes the first one's place (the blank
    lines after it kept); without, the blank line written before it goes with it."""
    kept: list[str] = []
    inside = found = False
    trailing: list[str] = []
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            if inside:
                kept.extend(trailing)  # the blank lines between it and the next table
            trailing = []
            inside = _OUR_TABLE.match(header.group(1)) is not None
            if inside:
                if table is not None and not found:
                    kept.append(table)
                elif table is None and kept and not kept[-1].strip():
                    kept.pop()
                found = True
                continue
        if inside:
            trailing = [*trailing, line] if not line.strip() else []
        else:
            kept.append(line)
    if inside and table is not None:
        kept.extend(trailing)
    return "".join(kept), found


def _has_server(data: Mapping[str, Any]) -> bool:
    servers = data.get("mcp_servers")
    return isinstance(servers, Mapping) and SERVER in servers


def _write_text(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    with contextlib.suppress(OSError):
        Path(tmp).chmod(path.stat().st_mode & 0o777 if path.exists() else 0o600)
    Path(tmp).replace(path)


def _register_server(path: Path, table: str) -> bool:
    """Write the server's table into config.toml; whether the file changed."""
    original = path.read_text(encoding="utf-8") if path.exists() else ""
    _parse_toml(path, original)
    rest, _ = _without_server(original)
    if _has_server(_parse_toml(path, rest)):
        raise ConfigError(
            f"{path}: mcp_servers.{SERVER} is declared in a form Lamina does not edit (inline or "
            f"dotted keys); remove it, or leave it and skip the MCP server"
        )
    updated, found = _without_server(original, table)
    if not found:  # at the end, after a blank line
        if rest and not rest.endswith("\n"):
            rest += "\n"
        updated = rest + ("\n" if rest.strip() else "") + table
    _parse_toml(path, updated)
    if updated == original:
        return False
    _write_text(path, updated)
    return True


def install(
    scope: str,
    *,
    directory: str | Path | None = None,
    home: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> CodexFiles:
    """Add Lamina's hooks and MCP server (replacing an older Lamina entry, keeping everything
    else); running it again changes nothing."""
    files = codex_files(scope, directory, env)
    data = _load(files.hooks)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{files.hooks}: 'hooks' is not an object")
    merged = _without_ours(hooks)
    commands = hook_commands("codex", scope, home, HOOK_EVENTS)
    for event, groups in _hook_groups(commands).items():
        merged.setdefault(event, []).extend(groups)
    if merged != hooks or not files.hooks.exists():
        data["hooks"] = merged
        _save(files.hooks, data)
    _register_server(files.config, _server_table(scope, home))
    return files


def uninstall(
    scope: str, *, directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[CodexFiles, bool]:
    """Remove Lamina's hooks and MCP server; whether anything was removed. Codex's trust
    entries for the removed hooks stay in config.toml (they trust a hash no hook has any more)."""
    files = codex_files(scope, directory, env)
    changed = False
    if files.hooks.exists():
        data = _load(files.hooks)
        hooks = data.get("hooks")
        if isinstance(hooks, dict):
            cleaned = _without_ours(hooks)
            if cleaned != hooks:
                changed = True
                if cleaned:
                    data["hooks"] = cleaned
                else:
                    data.pop("hooks", None)
                if data:
                    _save(files.hooks, data)
                else:
                    files.hooks.unlink()
    if files.config.exists():
        original = files.config.read_text(encoding="utf-8")
        rest, found = _without_server(original)
        if found:
            changed = True
            if rest.strip():
                _write_text(files.config, rest)
            else:
                files.config.unlink()
    if changed and scope == "project":
        with contextlib.suppress(OSError):
            files.hooks.parent.rmdir()  # an emptied .codex directory goes too
    return files, changed


def _our_keys(files: CodexFiles) -> dict[str, str]:
    """The trust key of each of Lamina's hooks in `files.hooks` -> its event."""
    try:
        hooks = _load(files.hooks).get("hooks", {})
    except ConfigError:
        return {}
    keys: dict[str, str] = {}
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            for h, entry in enumerate(entries if isinstance(entries, list) else []):
                if _is_ours(entry):
                    snake = _SNAKE.get(event) or re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()
                    keys[f"{files.hooks}:{snake}:{g}:{h}"] = event
    return keys


def installed_scopes(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, bool]:
    """Where Lamina's Codex hooks are installed now."""
    return {
        scope: bool(_our_keys(codex_files(scope, directory, env))) for scope in ("user", "project")
    }


def stands_aside(
    directory: str | Path | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """Codex runs the hooks of every layer and plugin: a user-scope hook stands aside for a
    project's, and so does the Lamina plugin's; a user-scope hook also stands aside for the
    plugin, so a prompt never gets two memory blocks."""
    return packaged_stands_aside(
        "codex", "Codex", "plugin", installed_scopes, plugin_installed, directory, env
    )


def plugin_installed(env: Mapping[str, str] | None = None) -> bool:
    """Whether the Lamina plugin (plugins/codex-lamina) is installed in Codex's plugin cache."""
    return (codex_home(env) / "plugins" / "cache" / "lamina" / "lamina").is_dir()


class CodexUnavailable(ConfigError):
    """The Codex CLI could not be run to trust the hooks."""


def _app_server(codex: str, cwd: Path, env: Mapping[str, str] | None, timeout: float) -> Any:
    """A `codex app-server` session over stdio (newline-delimited JSON-RPC), initialised."""
    import subprocess

    environ = dict(os.environ if env is None else env)
    try:
        process = subprocess.Popen(
            [codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=environ, cwd=cwd, text=True,
        )  # fmt: skip
    except OSError as exc:
        raise CodexUnavailable(f"could not run {codex} app-server: {exc}") from None
    return _Rpc(process, timeout)


class _Rpc:
    def __init__(self, process: Any, timeout: float) -> None:
        import time

        self.process = process
        self.deadline = time.monotonic() + timeout
        self.ids = 0

    def call(self, method: str, params: Mapping[str, Any]) -> Any:
        import select
        import time

        self.ids += 1
        self.process.stdin.write(orjson.dumps({"id": self.ids, "method": method,
                                               "params": params}).decode() + "\n")  # fmt: skip
        self.process.stdin.flush()
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                raise CodexUnavailable(f"codex app-server did not answer {method} in time")
            line = self.process.stdout.readline()
            if not line:
                raise CodexUnavailable(f"codex app-server exited during {method}")
            with contextlib.suppress(orjson.JSONDecodeError):
                message = orjson.loads(line)
                if isinstance(message, dict) and message.get("id") == self.ids:
                    if "error" in message:
                        raise CodexUnavailable(f"codex app-server {method}: {message['error']}")
                    return message.get("result")

    def notify(self, method: str) -> None:
        self.process.stdin.write(orjson.dumps({"method": method}).decode() + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except Exception:
            self.process.kill()
            self.process.wait()


def _listed(rpc: _Rpc, cwd: Path, keys: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    rpc.call("initialize", {"clientInfo": {"name": "lamina", "version": _version()}})
    rpc.notify("initialized")
    return _listed_again(rpc, cwd, keys)


def _same_key(key: str) -> str:
    """A trust key with its hooks.json path resolved (CODEX_HOME may be a symlink)."""
    where = key.split(":")
    if len(where) < 4:
        return key
    path = ":".join(where[:-3])
    with contextlib.suppress(OSError):
        path = str(Path(path).resolve())
    return ":".join([path, *where[-3:]])


def _listed_again(rpc: _Rpc, cwd: Path, keys: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    wanted = {_same_key(key): key for key in keys}
    result = rpc.call("hooks/list", {"cwds": [str(cwd)]})
    found: dict[str, dict[str, Any]] = {}
    for entry in (result or {}).get("data") or []:
        for hook in (entry.get("hooks") or []) if isinstance(entry, dict) else []:
            key = _same_key(str(hook.get("key"))) if isinstance(hook, dict) else ""
            if key in wanted:
                found[wanted[key]] = hook
    return found


def _version() -> str:
    from ... import __version__

    return __version__


def hook_states(
    scope: str,
    codex: str,
    *,
    trust: bool = False,
    directory: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 20.0,
) -> dict[str, str]:
    """Each of Lamina's hooks in this scope -> Codex's trust status (`trusted`, `untrusted`,
    `modified`, ...; `not listed` when Codex does not load it, such as a project's hooks in a
    project Codex does not trust), as `codex app-server` reports them. With `trust`, Lamina's
    hooks (and only them) are first trusted as Codex's `/hooks` screen would: their current
    hashes written through `codex app-server`'s config/batchWrite."""
    files = codex_files(scope, directory, env)
    keys = _our_keys(files)
    if not keys:
        if trust:
            raise ConfigError(
                f"{files.hooks}: no Lamina hooks to trust (run `lamina install codex`)"
            )
        return {}
    return _states(keys, codex, project_root(directory), env, timeout, trust=trust)


def _states(
    keys: Mapping[str, str],
    codex: str,
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout: float,
    *,
    trust: bool = False,
) -> dict[str, str]:
    """Each hook of `keys` -> its event's trust status, as `codex app-server` lists them;
    with `trust`, the hooks listed are first trusted at their current hash (what `/hooks`
    records) and listed again."""
    rpc = _app_server(codex, cwd, env, timeout)
    try:
        listed = _listed(rpc, cwd, keys)
        state = {
            key: {"trusted_hash": hook["currentHash"]}
            for key, hook in listed.items()
            if trust and isinstance(hook.get("currentHash"), str)
        }
        if state:
            edit = {"keyPath": "hooks.state", "value": state, "mergeStrategy": "upsert"}
            rpc.call("config/batchWrite", {"edits": [edit]})
            listed = _listed_again(rpc, cwd, keys)
    finally:
        rpc.close()
    return {
        event: str(listed[key].get("trustStatus")) if key in listed else "not listed"
        for key, event in keys.items()
    }


PLUGIN = "lamina@lamina"
"""The Codex plugin's id: plugin `lamina` of the repository's marketplace `lamina`
(.agents/plugins/marketplace.json, plugins/codex-lamina)."""


def plugin_keys(plugin: str = PLUGIN) -> dict[str, str]:
    """The trust key of each of the Codex plugin's hooks -> its event (Codex keys a plugin's
    hooks by plugin id and the hooks file's path inside the plugin)."""
    keys: dict[str, str] = {}
    for event in HOOK_EVENTS:
        keys[f"{plugin}:hooks/hooks.json:{_SNAKE[event]}:0:0"] = event
    return keys


def plugin_states(
    codex: str,
    *,
    trust: bool = False,
    directory: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 20.0,
) -> dict[str, str]:
    """Each of the Codex plugin's hooks -> Codex's trust status (`not listed` while the plugin
    is not installed, `codex plugin add lamina@lamina`), as `codex app-server` reports them;
    with `trust`, they are first trusted as `/hooks` would."""
    return _states(plugin_keys(), codex, project_root(directory), env, timeout, trust=trust)


def find_codex(env: Mapping[str, str] | None = None) -> str | None:
    """The Codex CLI: LAMINA_CODEX_BIN, else `codex` on PATH."""
    import shutil

    environ = os.environ if env is None else env
    return environ.get("LAMINA_CODEX_BIN") or shutil.which("codex", path=environ.get("PATH"))
