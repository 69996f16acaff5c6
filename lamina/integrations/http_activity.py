"""The inspector's view of the hooks' activity, beside the HTTP API (the pages are
lamina.integrations.http_inspect's):

    GET  /v1/hooks                                 the last hook runs (from the hook log)
    GET  /v1/injections                            session, limit -> the last prompts' injections
                                                   (from the injection log), each memory with
                                                   its text and its mark, when it is still there

Both read the data directory's logs (`app.state.inspector_home`). A key sees the hook runs whose
session is a document of one of its banks and the injections into its banks; the logs' paths
only a caller that sees every bank.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request

from ..memories import Correction
from .api.deps import Auth, Memory
from .api.errors import errors
from .api.models import Answer

__all__ = ["HOOK_LOG_LINES", "parse_hook_line", "router"]

HOOK_LOG_LINES = 4000
"""Lines read from the end of the hook log."""

router = APIRouter(tags=["inspector"])


class HookRun(Answer):
    time: str
    event: str
    session: str
    outcome: str
    timings: dict[str, Any] | None


class HookRuns(Answer):
    log: str | None
    runs: list[HookRun]


def _hook_lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in deque(handle, maxlen=HOOK_LOG_LINES)]


def parse_hook_line(line: str) -> HookRun | None:
    """One hook log line: `<time> <event> <session> <message>[ | timings <json>]`."""
    from .claude_code.hook import TIMINGS_MARK

    head, mark, timings = line.partition(TIMINGS_MARK)
    parts = head.split(" ", 3)
    if len(parts) < 3 or not parts[0][:4].isdigit():
        return None
    record: dict[str, Any] | None = None
    if mark:
        try:
            loaded = orjson.loads(timings)
        except orjson.JSONDecodeError:
            loaded = None
        record = loaded if isinstance(loaded, dict) else None
    return HookRun(
        time=parts[0],
        event=parts[1],
        session=parts[2],
        outcome=parts[3] if len(parts) > 3 else "",
        timings=record,
    )


@router.get("/v1/hooks", response_model=HookRuns, responses=errors())
def hook_runs(
    request: Request,
    auth: Auth,
    memory: Memory,
    limit: int = Query(default=200, ge=1, le=HOOK_LOG_LINES),
) -> HookRuns:
    """The last hook runs, newest first."""
    path: Path = request.app.state.inspector_home / "logs" / "hooks.log"
    everything = auth.banks is None or "*" in auth.banks
    store = memory.store
    allowed = [] if everything else [b for b in (auth.banks or []) if store.get_bank(b)]
    seen: dict[str, bool] = {}

    def visible(session: str) -> bool:
        if everything:
            return True
        if session not in seen:
            documents = (store.get_document(b, session) for b in allowed)
            seen[session] = any(d is not None for d in documents)
        return seen[session]

    runs: list[HookRun] = []
    for line in reversed(_hook_lines(path)):
        run = parse_hook_line(line)
        if run is not None and visible(run.session):
            runs.append(run)
            if len(runs) == limit:
                break
    return HookRuns(log=str(path) if everything else None, runs=runs)


class InjectedMemory(Answer):
    id: str
    kind: str | None = None
    document: str | None = None
    score: float | None = None
    tokens: int | None = None
    replaces: list[str] | None = None
    text: str | None = None
    """The memory's text, cut short (None: forgotten since)."""
    mark: dict[str, Any] | None = None
    """Its correction, if it has been marked since."""


class Injection(Answer):
    at: str
    session: str | None
    bank: str | None
    prompt: str | None
    """Redacted and cut short; None where memory was paused or the project excluded."""
    injected: bool
    memories: list[InjectedMemory]
    tokens: int | None = None
    ms: float | None = None
    path: str | None = None
    reason: str | None = None


class Injections(Answer):
    log: str | None
    injections: list[Injection]


@router.get("/v1/injections", response_model=Injections, responses=errors())
def injections(
    request: Request,
    auth: Auth,
    memory: Memory,
    session: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> Injections:
    """What the prompt hook injected on the last prompts, newest first, each memory with its
    text and mark. A key sees the prompts of its banks only."""
    from .claude_code.injections import injections_path, read_injections

    home: Path = request.app.state.inspector_home
    everything = auth.banks is None or "*" in auth.banks
    store = memory.store
    entries = [
        e
        for e in reversed(read_injections(home, session=session))
        if everything or (isinstance(e.get("bank"), str) and auth.allows(e["bank"]))
    ][:limit]
    wanted: dict[str, set[str]] = {}
    for entry in entries:
        for item in entry.get("memories") or []:
            if isinstance(entry.get("bank"), str) and isinstance(item, dict):
                wanted.setdefault(entry["bank"], set()).add(str(item.get("id")))
    texts: dict[tuple[str, str], str] = {}
    marks: dict[tuple[str, str], Correction] = {}
    for bank, ids in wanted.items():
        if store.get_bank(bank) is None:
            continue
        for found in store.get_memories(bank, sorted(ids)):
            texts[(bank, found.id)] = found.text[:400]
        for memory_id, mark in store.load_corrections(bank, sorted(ids)).items():
            marks[(bank, memory_id)] = mark
    out: list[Injection] = []
    for entry in entries:
        named = entry.get("bank")
        shown_bank = named if isinstance(named, str) else None
        items = []
        for item in entry.get("memories") or []:
            if not isinstance(item, dict):
                continue
            key = (shown_bank or "", str(item.get("id")))
            marked = marks.get(key)
            fields: dict[str, Any] = {
                k: item.get(k) for k in ("kind", "document", "score", "tokens", "replaces")
            }
            items.append(InjectedMemory(
                id=key[1], **fields, text=texts.get(key),
                mark=marked.as_dict() if marked is not None else None,
            ))  # fmt: skip
        out.append(Injection(
            at=str(entry.get("at") or ""), session=entry.get("session"), bank=shown_bank,
            prompt=entry.get("prompt"), injected=bool(entry.get("injected")), memories=items,
            tokens=entry.get("tokens"), ms=entry.get("ms"), path=entry.get("path"),
            reason=entry.get("reason"),
        ))  # fmt: skip
    return Injections(log=str(injections_path(home)) if everything else None, injections=out)
