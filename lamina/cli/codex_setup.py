"""`lamina install codex`, `lamina uninstall codex` and the Codex part of `lamina status`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError
from .common import emit_json, report_uninstall

__all__ = ["codex_status", "install_codex", "trust_codex_plugin", "uninstall_codex"]

TRUST_ADVICE = (
    "Codex runs hooks only once you trust them, and skips untrusted ones without a word: "
    "run `lamina install codex --trust`, or open `/hooks` in an interactive Codex session "
    "and trust Lamina's five hooks"
)
PROJECT_ADVICE = (
    "a project's hooks also need the project trusted by Codex (its first interactive run "
    "asks, or `codex exec --trust`)"
)


def install_codex(
    scope: str, home: str | None, trust: bool, codex: str | None, as_json: bool
) -> None:
    from ..integrations.codex.install import find_codex, hook_states, install

    files = install(scope, home=home if scope == "user" else None)
    states: dict[str, str] | None = None
    problem = None
    if trust:
        binary = codex or find_codex()
        if not binary:
            problem = (
                "no Codex CLI found to trust the hooks with (--codex PATH or LAMINA_CODEX_BIN)"
            )
        else:
            try:
                states = hook_states(scope, binary, trust=True)
            except ConfigError as exc:
                problem = str(exc)
    trusted = states is not None and _all_trusted(states)
    advice = [] if trusted else [TRUST_ADVICE]
    if scope == "project":
        advice.append(PROJECT_ADVICE)
    if as_json:
        emit_json(
            {
                "target": "codex",
                "scope": scope,
                "hooks_file": str(files.hooks),
                "config": str(files.config),
                "installed": True,
                "trust": states,
                "trusted": trusted,
                "problems": [problem] if problem else [],
                "advice": advice,
            }
        )
        return
    click.echo(f"installed Lamina's hooks for codex in {files.hooks}")
    click.echo(f"registered Lamina's MCP server as [mcp_servers.lamina] in {files.config}")
    if states is not None:
        _echo_trust(states)
    if problem:
        click.echo(f"warning: {problem}", err=True)
    for line in advice:
        click.echo(f"note: {line}", err=True)
    if trusted:
        click.echo("new Codex sessions now recall before each prompt and retain after each turn")


def trust_codex_plugin(codex: str | None, as_json: bool) -> None:
    """Trust the hooks of the Codex plugin the user installed with `codex plugin add`, as the
    `/hooks` screen would; Lamina's own hooks.json is not written (one route per prompt)."""
    from ..integrations.codex.install import (
        PLUGIN,
        codex_home,
        find_codex,
        plugin_installed,
        plugin_states,
    )

    if not plugin_installed():
        raise ConfigError(
            f"the Codex plugin {PLUGIN} is not installed in {codex_home()}: run `codex plugin "
            f"marketplace add <a Lamina checkout>` and `codex plugin add {PLUGIN}` first"
        )
    binary = codex or find_codex()
    if not binary:
        raise ConfigError(
            "no Codex CLI found to trust the plugin's hooks with (--codex PATH or LAMINA_CODEX_BIN)"
        )
    states = plugin_states(binary, trust=True)
    trusted = _all_trusted(states)
    if as_json:
        emit_json({"target": "codex", "plugin": PLUGIN, "trust": states, "trusted": trusted})
        return
    _echo_trust(states)
    if trusted:
        click.echo(f"new Codex sessions now run {PLUGIN}'s hooks: recall before each prompt, "
                   "retain after each turn")  # fmt: skip
    else:
        click.echo(f"note: {TRUST_ADVICE}", err=True)


def uninstall_codex(scope: str, as_json: bool) -> None:
    from ..integrations.codex.install import uninstall

    files, changed = uninstall(scope)
    paths = {"hooks_file": str(files.hooks), "config": str(files.config)}
    report_uninstall("codex", scope, paths, str(files.hooks.parent), changed, as_json)


def codex_status(directory: str | Path | None = None) -> dict[str, Any]:
    """Where Lamina's Codex hooks are installed and whether Codex trusts them (asked through
    `codex app-server` when the Codex CLI is found; `unknown` otherwise)."""
    from ..integrations.codex.install import (
        PLUGIN,
        codex_files,
        codex_home,
        find_codex,
        hook_states,
        installed_scopes,
        plugin_installed,
        plugin_states,
    )

    binary = find_codex()
    report: dict[str, Any] = {}
    for scope, installed in installed_scopes(directory).items():
        files = codex_files(scope, directory)
        entry: dict[str, Any] = {"installed": installed, "hooks_file": str(files.hooks)}
        if installed:
            entry.update(_asked(binary, partial(hook_states, scope, directory=directory)))
        report[scope] = entry
    if plugin_installed():
        # `codex plugin add lamina@lamina`: its hooks need trust like Lamina's own.
        cache = codex_home() / "plugins" / "cache" / "lamina" / "lamina"
        plugin: dict[str, Any] = {"installed": True, "hooks_file": str(cache), "id": PLUGIN}
        plugin.update(_asked(binary, partial(plugin_states, directory=directory)))
        report["plugin"] = plugin
    return report


def _all_trusted(states: dict[str, str]) -> bool:
    return all(state == "trusted" for state in states.values())


def _echo_trust(states: dict[str, str]) -> None:
    click.echo("trust: " + ", ".join(f"{event} {state}" for event, state in states.items()))


def _asked(binary: str | None, states: Callable[..., dict[str, str]]) -> dict[str, Any]:
    """The status fields `trust` and `trusted` for hooks whose states `states(binary,
    timeout=...)` asks Codex for; `unknown` with the reason when it cannot be asked."""
    if not binary:
        return {"trusted": "unknown (no Codex CLI found)"}
    try:
        found = states(binary, timeout=10.0)
    except ConfigError as exc:
        return {"trusted": f"unknown ({exc})"}
    return {"trusted": _all_trusted(found), "trust": found}
