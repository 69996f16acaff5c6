"""What `lamina status` reports: where the data lives, which hooks are installed (settings files
and the Claude Code plugin) and which MCP servers, with a warning where two installations
overlap, the banks and their sizes, the last retain of each session and what is not retained
yet, which models embedded each bank's memories (with a warning when recall would use another
one, so those memories are found by their words only until `lamina reindex`), the tail of the
hook log (so a hook that failed open does not fail unseen), the last prompts' stage timings,
whether a warm server runs, and what memory is paused for (`lamina pause`)."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import orjson

from ..config import Settings, default_bank
from ..errors import ConfigError
from ..integrations.claude_code.detect import installation_warnings, mcp_servers, plugin_state
from ..integrations.claude_code.hook import TIMINGS_MARK
from ..integrations.claude_code.install import installed_scopes, settings_path
from ..integrations.claude_code.warm_client import WarmUnavailable, ask
from ..store import describe_target, open_store

__all__ = ["model_warnings", "status_report"]

LOG_TAIL = 15
RECENT_DOCUMENTS = 10
PROMPT_TIMINGS = 5


def _tail(path: Path, lines: int) -> list[str]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]


def warm_status(home: Path, timeout: float) -> dict[str, Any]:
    """Whether the data directory's warm server answers (see `lamina warm status`)."""
    from .. import __version__

    try:
        reply = ask(home.resolve(), {"op": "ping"}, timeout=timeout, version=__version__)
    except WarmUnavailable as exc:
        return {"running": False, "reason": exc.reason}
    return {"running": True, "pid": reply.get("pid"), "requests": reply.get("requests")}


def prompt_timings(log: Path, count: int = PROMPT_TIMINGS) -> list[dict[str, Any]]:
    """The stage timings of the last `count` UserPromptSubmit hooks in the hook log."""
    found: list[dict[str, Any]] = []
    for line in reversed(_tail(log, 50 * count)):
        head, mark, timings = line.partition(TIMINGS_MARK)
        if not mark:
            continue
        try:
            record = orjson.loads(timings)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            stamp, _, rest = head.partition(" ")
            found.append({"time": stamp, "outcome": rest.split(" ", 2)[-1], **record})
            if len(found) == count:
                break
    return found[::-1]


def configured_model(choice: str | None) -> str | ConfigError | None:
    """The name the configured embedder stores with its vectors, without loading it; None when
    none is configured (each bank then uses its own model, `lamina.embed.bank_embedder`); the
    configuration's error if it names no model."""
    from ..embed import get_embedder

    if choice is None:
        return None
    try:
        return get_embedder(choice).name
    except ConfigError as exc:
        return exc


def model_warnings(bank: str, embedders: dict[str, int], configured: str | None) -> list[str]:
    """What to say of the models that embedded `bank`'s memories, given the configured model
    (None: none). Recall compares vectors of one model only, so each model other than the one
    recall uses gets a line: those memories are found by their words until they are embedded
    again. With none configured, a bank that kept an earlier default model gets a line saying
    how to move it to the current one."""
    from ..embed import DEFAULT_MODEL, bank_embedder

    model = configured if configured is not None else bank_embedder(embedders).name
    lines = [
        f"bank {bank}: {count} memories have vectors of {other}, but recall embeds with "
        f"{model}; run `lamina reindex --bank {bank}` to search them by meaning again"
        for other, count in sorted(embedders.items())
        if other != model
    ]
    if configured is None and model != DEFAULT_MODEL:
        lines.append(
            f"bank {bank}: recall uses {model}, the model its memories were embedded with; "
            f"run `lamina reindex --bank {bank}` (or `--all` for every bank) to embed them with "
            f"the default {DEFAULT_MODEL}, which recalls more"
        )
    return lines


def injection_summary(base: Path) -> dict[str, Any]:
    """The injection log summed up: prompts recorded, how many got memories, the last one."""
    from ..integrations.claude_code.injections import injections_path, read_injections

    entries = read_injections(base)
    last = entries[-1] if entries else None
    return {
        "log": str(injections_path(base)),
        "prompts": len(entries),
        "injected": sum(1 for e in entries if e.get("injected")),
        "last": last,
    }


def _codex(directory: str | Path | None) -> dict[str, Any]:
    from .codex_setup import codex_status

    return codex_status(directory)


def _gemini(directory: str | Path | None) -> dict[str, Any]:
    from .gemini_setup import gemini_status

    return gemini_status(directory)


def _copilot(directory: str | Path | None) -> dict[str, Any]:
    from .copilot_setup import copilot_status

    return copilot_status(directory)


def status_report(settings: Settings, directory: str | Path | None = None) -> dict[str, Any]:
    """What `lamina status` reports, for the settings of this command line."""
    base = settings.home
    target = settings.database
    # A server database is there to be asked; a SQLite file is not created just to report.
    exists = target.exists() if isinstance(target, Path) else True
    scopes = installed_scopes(directory)
    plugin = plugin_state(directory)
    servers = mcp_servers(directory)
    from ..pause import paused

    here = default_bank(directory, settings)
    stopped = paused(base)
    report: dict[str, Any] = {
        "data_dir": str(base),
        "database": describe_target(target),
        "database_exists": exists,
        "default_bank": here,
        "paused": {"this_project": here in stopped["banks"], **stopped},
        "hooks": {
            scope: {"installed": installed, "settings": str(settings_path(scope, directory))}
            for scope, installed in scopes.items()
        },
        "codex_hooks": _codex(directory),
        "gemini_hooks": _gemini(directory),
        "copilot_hooks": _copilot(directory),
        "plugin": plugin,
        "mcp_servers": servers,
        "warnings": installation_warnings(plugin, scopes, servers),
        "banks": [],
        "hook_log": str(base / "logs" / "hooks.log"),
        "hook_log_tail": _tail(base / "logs" / "hooks.log", LOG_TAIL),
        "prompt_timings": prompt_timings(base / "logs" / "hooks.log"),
        "injections": injection_summary(base),
        "warm_server": warm_status(base, timeout=0.5),
    }
    for scope, info in report["codex_hooks"].items():
        if info.get("trusted") is False:
            fix = "--plugin" if scope == "plugin" else f"--{scope} --trust"
            report["warnings"].append(
                f"Lamina's Codex hooks ({scope}) are not trusted, so Codex skips them: run "
                f"`lamina install codex {fix}`, or trust them in Codex's /hooks screen"
            )
    if not exists:
        return report
    model = configured_model(settings.embedder)
    if isinstance(model, ConfigError):
        report["warnings"].append(str(model))
    store = open_store(target)
    try:
        report["database_bytes"] = store.size_bytes()
        for bank in store.list_banks():
            stats = store.bank_stats(bank.name)
            documents = sorted(
                store.list_documents(bank.name), key=lambda d: d.updated_at, reverse=True
            )
            recent = []
            for document in documents[:RECENT_DOCUMENTS]:
                cursor = store.get_cursor(bank.name, document.id)
                pending = None
                if document.source and Path(document.source).is_file():
                    pending = max(0, Path(document.source).stat().st_size - cursor.size)
                recent.append(
                    {
                        "document": document.id,
                        "last_retain": document.updated_at.isoformat(),
                        "source": document.source,
                        "bytes_not_retained": pending,
                    }
                )
            report["banks"].append(
                {
                    "bank": bank.name,
                    "documents": stats.documents,
                    "memories": stats.memories,
                    "records": stats.records,
                    "embedded": stats.embedded,
                    "awaiting_vectors": max(0, stats.memories - stats.embedded),
                    "embedders": dict(stats.embedders),
                    "recent_documents": recent,
                }
            )
            if stats.memories > stats.embedded:
                report["warnings"].append(
                    f"bank {bank.name}: {stats.memories - stats.embedded} memories await "
                    "vectors (found by their words until then); a retain embeds them, or "
                    f"`lamina reindex --bank {bank.name}`"
                )
            if not isinstance(model, ConfigError):
                report["warnings"].extend(model_warnings(bank.name, dict(stats.embedders), model))
    finally:
        store.close()
    return report
