"""`lamina hook`: every Claude Code hook event served by one command.

Claude Code runs the command with the event's JSON on stdin (session_id, transcript_path, cwd,
hook_event_name, and the event's own fields such as `prompt`). The command dispatches on
`hook_event_name`:

- **UserPromptSubmit**: compose the recall query from the prompt and the last turns of the
  transcript, recall from the project's bank, and print the memories as `additionalContext`.
  A warm server of the data directory (lamina.integrations.claude_code.warm) answers when one
  runs; otherwise this process does the work (the cold path). It answers within its time limit
  (3 s of wall time since the process started, by default): lexical-only memories when the
  embedding model is not ready in time, nothing when even those are not. It skips trivial
  prompts (under 5 characters, or a bare slash command) and never injects what this session
  still has in its context: this session's memories are left out, except those said before
  its last compaction. It injects nothing when no memory reaches the floor (a prompt nothing
  in the bank answers: "write a haiku about autumn"; lamina.bank.recall.Floor), and the hook
  log says so, with the scores. Each prompt's stage timings go to the hook log.
- **Stop**, **SubagentStop**, **PreCompact**, **SessionEnd**: retain what is new in the
  transcript. The hook returns at once; a detached worker (or the warm server, when one runs)
  does the work, one per session at a time (lamina.integrations.claude_code.retain_worker).
  SubagentStop retains the subagent's own transcript (`agent_transcript_path`) as a document of
  its own, linked to the parent session.
- The Gemini CLI's **BeforeAgent** is served as UserPromptSubmit (its prompt without the
  `<hook_context>` blocks SessionStart hooks prepended; the answer names BeforeAgent) and its
  **AfterAgent** as Stop (`served_event`). Gemini's SessionStart never gets the digest.
- The Copilot CLI's hooks carry Claude Code's event names, for which Copilot sends Claude Code's
  payloads, but name the session file at Stop only (the other events find it from the session
  id, `_copilot_payload`), and Copilot reads only a top-level `additionalContext`, which is how
  the hook answers it (Lamina's Copilot hooks, or a project's Claude Code hooks Copilot runs).
- **SessionStart**: make sure the configured database is created and migrated; with `warm` on,
  start the warm server if none runs.

Privacy: in a directory the config file's `exclude` covers, every event does nothing (one line
in the hook log says so). While the project's bank or the session is paused (`lamina pause`),
no event recalls or injects (the prompt hook says so once per session, in a `systemMessage`)
and the retain events only move the session's cursor past what was said, so `lamina resume`
does not retain it later. After each retain, memories older than `retain_days` are forgotten.

The bank is the project's (`project.hook_bank`: CLAUDE_PROJECT_DIR, not the payload's `cwd`),
and memories are clamped under Claude Code's 10,000-character limit (`contract`). When another
installation serves the session (the plugin, over hooks in settings files), this one returns
nothing (`detect.stands_aside`).

Every hook fails open: on any error it prints one line to stderr, exits 0 and writes the
details to `<data dir>/logs/hooks.log` (`lamina status` shows its tail). A failure the user can
fix is also shown to them, once per session, as a `systemMessage`. The process leaves with
os._exit(0) once its output is written and flushed (`hook_main`): a thread still inside the
embedding model is never joined or finalised, which is what used to abort the interpreter.

Settings (environment): LAMINA_HOOK_TURNS (3), LAMINA_HOOK_MAX_CHARS (800),
LAMINA_HOOK_MIN_PROMPT (5), LAMINA_HOOK_TIME_LIMIT (3.0 s), LAMINA_HOOK_BUDGET (1024 tokens),
LAMINA_HOOK_WARM (off), LAMINA_HOOK_WARM_IDLE (1800 s), LAMINA_HOOK_FLOOR (0.28) and
LAMINA_HOOK_FLOOR_COVERAGE (0.5), LAMINA_BANK (the bank; default: the project's, see
lamina.config).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from ... import __version__
from ...config import HookSettings, Settings, resolve_settings
from .contract import HookLog, Notices, clamp_block, user_should_know, with_system_message
from .project import hook_bank
from .prompt import PromptAnswer, PromptRequest
from .warm_client import WarmUnavailable, ask, process_age

if TYPE_CHECKING:
    from .retain_worker import RetainJob

__all__ = ["HookCall", "HookSettings", "hook_main", "process_age", "run_hook"]

RETAIN_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})

GEMINI_EVENTS: Mapping[str, str] = {"BeforeAgent": "UserPromptSubmit", "AfterAgent": "Stop"}
"""The Gemini CLI's names for the events Lamina serves, and the event whose work each does.
Its SessionStart and SessionEnd have Claude Code's names; PreCompress is not served (Gemini
calls it on every turn, compaction or not)."""


def served_event(payload: Mapping[str, Any]) -> tuple[Mapping[str, Any], str, str]:
    """The payload as the engine reads it, the event it is served as, and the event's own name
    (what the answer's `hookEventName` says). Gemini's BeforeAgent `prompt` starts with the
    contexts SessionStart hooks added (`<hook_context>...</hook_context>`): they are not what
    the person typed, so they are taken out of the prompt the recall query is composed from."""
    named = str(payload.get("hook_event_name") or "")
    event = GEMINI_EVENTS.get(named, named)
    if named == "BeforeAgent" and "<hook_context>" in str(payload.get("prompt") or ""):
        import re

        prompt = re.sub(r"<hook_context>.*?</hook_context>\s*", "", str(payload["prompt"]),
                        flags=re.DOTALL)  # fmt: skip
        payload = {**payload, "prompt": prompt}
    return payload, event, named


def _copilot(env: Mapping[str, str] | None) -> bool:
    """Whether the Copilot CLI runs this hook: Lamina's Copilot hooks (their origin), or a
    project's Claude Code hooks, which Copilot runs too (it sets COPILOT_HOOK_DIR for a hook)."""
    environ = os.environ if env is None else env
    origin = environ.get("LAMINA_HOOK_ORIGIN", "")
    return origin.startswith("copilot-") or bool(environ.get("COPILOT_HOOK_DIR"))


def _copilot_payload(
    payload: Mapping[str, Any], env: Mapping[str, str] | None
) -> Mapping[str, Any]:
    """Copilot names its session file (`transcript_path`) at Stop only: the other events get
    it from the session id, so the prompt hook reads the last turns and SessionEnd retains."""
    if payload.get("transcript_path") or not _copilot(env):
        return payload
    from ..copilot.install import copilot_transcript  # imported by stands_aside anyway

    found = copilot_transcript(str(payload.get("session_id") or ""), env)
    return {**payload, "transcript_path": found} if found else payload


def _gemini(named: str, env: Mapping[str, str] | None) -> bool:
    """Whether the Gemini CLI sent this event (by its name, or the installation's origin)."""
    environ = os.environ if env is None else env
    return named in GEMINI_EVENTS or environ.get("LAMINA_HOOK_ORIGIN", "").startswith("gemini-")


@dataclass(frozen=True, slots=True)
class HookCall:
    """Where an event is handled: by this process for itself (the defaults), or by the warm
    server for a hook process that handed it over (lamina.integrations.claude_code.warm)."""

    env: Mapping[str, str] | None = None
    """The hook process's environment (None: this process's)."""
    cwd: str | None = None
    """Its working directory (None: this process's)."""
    started: float | None = None
    """The time.monotonic() instant the hook process started (None: this process's start)."""
    warm_tried: str | None = None
    """Why the warm server did not answer, when the hook process asked it already."""
    answer: Callable[[PromptRequest, dict[str, float]], PromptAnswer] | None = None
    """The warm server's own recall (None: ask the warm server, else recall here)."""
    given_up: float | None = None
    """The time.monotonic() instant after which the hook process no longer waits for the warm
    server's answer (it answers cold and records that itself); None: it waits to the end."""
    retain: Callable[[RetainJob], None] | None = None
    """The warm server's queue of retains, run on a thread of its own with the model, the
    tokenizer and the redaction rules already loaded (None: a detached worker process)."""


def _is_trivial(prompt: str, settings: HookSettings) -> bool:
    text = prompt.strip()
    if len(text) < settings.min_prompt_chars:
        return True
    return text.startswith("/") and len(text.split()) == 1


def session_digest(payload: Mapping[str, Any], settings: Settings) -> str:
    """The project's most recent other sessions: when, and what each opened with."""
    from ...bank.bank import MemoryBank

    cfg = settings.hook
    bank_name = hook_bank(payload, settings)
    memory_bank = MemoryBank.open(settings=settings)
    if memory_bank.store.get_bank(bank_name) is None:
        return ""
    current = str(payload.get("session_id") or "")
    documents = [d for d in memory_bank.documents(bank_name) if d.id != current]
    recent = sorted(documents, key=lambda d: d.updated_at, reverse=True)[: cfg.digest_sessions]
    if not recent:
        return ""
    from ...store.base import MemoryFilter

    openers: dict[str, tuple[datetime | None, str]] = {}
    store = memory_bank.store
    # A memory the user marked wrong (or superseded) never opens a session's line: the
    # session's next memory does.
    marked = store.load_corrections(bank_name)
    for document in recent:
        # The session's oldest memories, read by the document's index: this costs the
        # session's size, not the bank's.
        where = MemoryFilter(document=document.id)
        page = store.page_memories(bank_name, where, 200, oldest_first=True, count_kinds=False)
        for memory in page.memories:
            if memory.kind not in ("turn", "line", "part") or memory.id in marked:
                continue
            known = openers.get(memory.document)
            if known is None or (memory.time and known[0] and memory.time < known[0]):
                first = memory.text.split("\n", 1)[0]
                openers[memory.document] = (memory.time, first[:200])
    lines = ["<lamina_memories>", "Recent sessions in this project:"]
    for document in recent:
        when, opener = openers.get(document.id, (document.updated_at, ""))
        stamp = f"{(when or document.updated_at):%Y-%m-%d}"
        lines.append(f"- [{stamp}] {opener}".rstrip())
    lines.append("</lamina_memories>")
    return clamp_block("\n".join(lines))


def run_hook(
    stdin: str,
    *,
    home: str | Path | None = None,
    settings: HookSettings | None = None,
    call: HookCall | None = None,
) -> str:
    """Handle one hook event; returns what to print on stdout ("" for nothing). Never raises:
    errors are logged and reported on stderr in one line."""
    call = call or HookCall()
    started = time.monotonic() - process_age() if call.started is None else call.started
    event = session = ""
    try:
        resolved = resolve_settings(call.env, home=home)
    except Exception as exc:  # a broken config file must not block the user either
        if call.answer is not None:
            raise  # the warm server answers with an error: the hook process does the work
        print(f"lamina: hook failed open: {exc}", file=sys.stderr)
        environ = os.environ if call.env is None else call.env
        given = home or environ.get("LAMINA_HOME")
        if given:
            base = Path(given).expanduser()
        else:  # only the config file can fail here: the notice goes to the default folder
            from platformdirs import user_data_path

            base = user_data_path("lamina", appauthor=False)
        with contextlib.suppress(ValueError, AttributeError):
            event = str(orjson.loads(stdin or b"{}").get("hook_event_name") or "")
        HookLog(base).write(event, session, f"failed: {exc!r}")
        return _notice(base, stdin, "", f"Lamina failed ({event or 'hook'}): {exc}")
    if settings is not None:
        resolved = resolved.replace(hook=settings)
    base = resolved.home
    log = HookLog(base)
    try:
        payload = orjson.loads(stdin or b"{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook payload is not a JSON object")
        payload, event, named = served_event(payload)
        payload = _copilot_payload(payload, call.env)
        session = str(payload.get("session_id") or "")
        from .detect import stands_aside
        from .project import session_directory

        excluded = _excluded(payload, call, resolved)
        if excluded:
            reason = f"excluded by the config file's exclude {excluded}"
            log.write(event, session, f"skipped: {reason}")
            _skipped(base, event, session, "", reason, started)
            return ""
        winner = stands_aside(session_directory(payload, base, call.env) or call.cwd, call.env)
        if winner:
            log.write(event, session, f"skipped: {winner} serves this session")
            return ""
        from ...pause import pause_reason

        paused = pause_reason(base, hook_bank(payload, resolved, call.env, call.cwd), session)
        if paused:
            return _paused(payload, resolved, log, event, session, paused, call)
        return with_system_message(
            _dispatch(payload, resolved, started, log, event, session, call, named),
            Notices(base).take(session),
        )
    except Exception as exc:
        if call.answer is not None:
            raise  # the warm server answers with an error: the hook process does the work
        import traceback

        log.write(event, session, f"failed: {exc!r}\n{traceback.format_exc()}")
        print(f"lamina: {event or 'hook'} failed open: {exc}", file=sys.stderr)
        if user_should_know(exc):
            return _notice(base, stdin, "", f"Lamina failed ({event or 'hook'}): {exc}")
        return ""


def _excluded(payload: Mapping[str, Any], call: HookCall, settings: Settings) -> str | None:
    """The `exclude` entry of the config file that covers this event's directories (the
    project's, the payload's `cwd`, the hook's own), or None."""
    from ...config import excluded

    environ = os.environ if call.env is None else call.env
    if not settings.exclude:
        return None
    places = {environ.get("CLAUDE_PROJECT_DIR") or "", str(payload.get("cwd") or "")}
    places.add(call.cwd or str(Path.cwd()))
    for place in sorted(p for p in places if p):
        found = excluded(place, settings)
        if found:
            return found
    return None


def _paused(
    payload: Mapping[str, Any],
    settings: Settings,
    log: HookLog,
    event: str,
    session: str,
    reason: str,
    call: HookCall,
) -> str:
    """An event while memory is paused: no recall, no injection, no retain; a retain event
    moves the session's cursor past what was said meanwhile (a worker with `--skip`)."""
    base = settings.home
    if event in RETAIN_EVENTS:
        from .retain_worker import spawn_worker

        spawn_worker(payload, settings, event, skip=True, cwd=call.cwd, env=call.env,
                     retain=call.retain)  # fmt: skip
        log.write(event, session, f"skipped: {reason}; what was said is left out for good")
        return ""
    log.write(event, session, f"skipped: {reason}")
    if event == "UserPromptSubmit":
        _skipped(base, event, session, hook_bank(payload, settings), reason, None)
        return with_system_message("", Notices(base).take(session, [f"Lamina: {reason}."]))
    return ""


def _skipped(
    home: Path, event: str, session: str, bank: str, reason: str, started: float | None
) -> None:
    """The injection log's entry for a prompt memory was kept away from (excluded, paused):
    why, and not the prompt (what the user keeps out is not written here either)."""
    if event != "UserPromptSubmit":
        return
    from .injections import record

    ms = round((time.monotonic() - started) * 1000, 1) if started is not None else None
    record(home, {"session": session, "bank": bank, "prompt": None, "injected": False,
                  "memories": [], "tokens": 0, "chars": 0, "ms": ms, "path": None,
                  "reason": reason})  # fmt: skip


def _notice(home: Path, stdin: str, output: str, message: str) -> str:
    """`output` with `message` as a systemMessage, unless this session was shown it before."""
    session = ""
    with contextlib.suppress(ValueError, AttributeError):
        session = str(orjson.loads(stdin or b"{}").get("session_id") or "")
    return with_system_message(output, Notices(home).take(session, [message]))


def _dispatch(
    payload: Mapping[str, Any],
    settings: Settings,
    started: float,
    log: HookLog,
    event: str,
    session: str,
    call: HookCall,
    named: str = "",
) -> str:
    base, cfg = settings.home, settings.hook
    if event == "UserPromptSubmit":
        return _prompt(payload, settings, started, log, call, named or event)
    if event in RETAIN_EVENTS and (call.answer is None or call.retain is not None):
        from .retain_worker import spawn_worker

        spawn_worker(payload, settings, event, cwd=call.cwd, env=call.env, retain=call.retain)
        where = "in the background" if call.retain is None else "by the warm server"
        log.write(event, session, f"retain started {where}")
        return ""
    if call.answer is not None:
        raise ValueError(f"the warm server answers prompts and retains only, not {event!r}")
    if event == "SessionStart":
        from ...store import open_store

        store = open_store(settings.database)
        try:
            applied = store.migrate()
        finally:
            store.close()
        log.write(event, session, f"ready (migrations applied: {len(applied)})")
        if cfg.warm:
            from .warm_control import ensure_started

            log.write(event, session, ensure_started(base, cfg.warm_idle))
        if not cfg.session_digest:
            return ""
        if _gemini(named, call.env):
            # Gemini prepends a SessionStart context to the prompt in `-p` mode, and drops that
            # prompt from the history on resume: the digest is not given there.
            log.write(event, session, "no digest: Gemini loses the prompt it is prepended to")
            return ""
        digest = session_digest(payload, settings)
        if not digest:
            return ""
        if _copilot(call.env):  # a user message of its own, at the start of the session
            return orjson.dumps({"additionalContext": digest}).decode()
        output = {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                         "additionalContext": digest}}  # fmt: skip
        return orjson.dumps(output).decode()
    log.write(event, session, "ignored (not an event Lamina handles)")
    return ""


TIMINGS_MARK = " | timings "
"""Separates a UserPromptSubmit log line from its JSON timings (read back by `lamina status`)."""


def _prompt(
    payload: Mapping[str, Any],
    settings: Settings,
    started: float,
    log: HookLog,
    call: HookCall,
    answer_as: str = "UserPromptSubmit",
) -> str:
    """UserPromptSubmit (Gemini's BeforeAgent, answered under that name): the warm server's
    answer, else this process's own within the limit."""
    home, cfg = settings.home, settings.hook
    session = str(payload.get("session_id") or "")
    prompt = str(payload.get("prompt") or "")
    from .injections import preview_ahead
    from .injections import record as record_injection

    if _is_trivial(prompt, cfg):
        log.write("UserPromptSubmit", session, "skipped (trivial prompt)")
        trivial = "trivial prompt (too short, or a bare slash command)"
        record_injection(home, {"session": session, "bank": None, "prompt": prompt.strip(),
                                "prompt_chars": len(prompt), "injected": False, "memories": [],
                                "tokens": 0, "chars": 0, "ms": None, "path": None,
                                "reason": trivial})  # fmt: skip
        return ""
    # The log's copy of the prompt is redacted on a thread of its own while recall runs.
    shown_prompt = preview_ahead(prompt)
    stages: dict[str, float] = {"start": time.monotonic() - started}
    deadline = started + cfg.time_limit - 0.05
    request = PromptRequest(
        prompt=prompt,
        bank=hook_bank(payload, settings, call.env, call.cwd),
        session=session,
        transcript=_with_content(str(payload.get("transcript_path") or "")),
        context_turns=cfg.context_turns,
        max_query_chars=cfg.max_query_chars,
        budget=cfg.budget,
        floor_dense=min(max(cfg.floor, 0.0), 1.0),
        floor_coverage=min(max(cfg.floor_coverage, 0.0), 1.0),
    )
    record: dict[str, Any] = {"path": "cold"}
    mark = time.monotonic()
    if call.answer is not None:  # this is the warm server, answering for a hook process
        server: dict[str, float] = {}
        answer = call.answer(request, server)
        record.update(path="warm", server_ms={k: round(v * 1000, 1) for k, v in server.items()})
    elif call.warm_tried is not None:
        answer = None
        record["warm_unavailable"] = call.warm_tried
    else:
        answer = _ask_warm(settings, request, deadline, record)
    stages["warm"] = time.monotonic() - mark
    if answer is None:
        answer = _cold(request, settings, deadline, stages)
        if cfg.warm and _no_server(record.get("warm_unavailable", "")):
            # The server exited while idle (or was killed): start one for the next prompt,
            # after this one's answer so that its start does not compete with it.
            from .warm_control import start_detached

            record["warm_started"] = start_detached(home, cfg.warm_idle)
    if answer is not None and answer.context and answer_as == "BeforeAgent":
        # Gemini sends the chat's earlier hook contexts again (a resumed session included):
        # memories its history already holds are not injected a second time.
        from ..gemini.history import held_in_history

        if held_in_history(request.transcript, answer.context):
            answer = replace(answer, context="", memories=0, ids=(), shown=())
            record["held_in_history"] = True
    if answer is None:
        message = f"no memories: over the {cfg.time_limit}s limit"
    elif not answer.bank_found:
        message = f"no memories: bank {request.bank} does not exist"
    elif record.get("held_in_history"):
        message = "no memories: the session's history already holds them"
    elif not answer.context and answer.floor is not None and not answer.floor.get("passed"):
        message = f"no memories: {answer.floor.get('reason')}"
    elif not answer.context:
        message = "no memories found"
    else:
        message = f"injected {answer.memories} memories ({len(answer.context)} chars)"
    record.update(
        bank=request.bank,
        memories=answer.memories if answer else 0,
        ids=list(answer.ids) if answer else [],
        chars=len(answer.context) if answer else 0,
        lexical_only=bool(answer and answer.lexical_only),
        over_limit=answer is None,
        **({"floor": answer.floor} if answer is not None and answer.floor is not None else {}),
        stages_ms={k: round(v * 1000, 1) for k, v in stages.copy().items()},
        total_ms=round((time.monotonic() - started) * 1000, 1),
    )
    notes = [f"{record['path']} path"] + (["lexical only"] if record["lexical_only"] else [])
    if "warm_unavailable" in record and record["warm_unavailable"] != "no warm server":
        notes.append(f"warm path unavailable: {record['warm_unavailable']}")
    if record.get("warm_started"):
        notes.append(f"warm server {record['warm_started']} starting for the next prompt")
    late = call.given_up is not None and time.monotonic() > call.given_up
    if late:
        notes.append("answered after the hook process stopped waiting: it answered cold")
    timings = orjson.dumps(record).decode()
    log.write("UserPromptSubmit", session, f"{message} ({'; '.join(notes)}){TIMINGS_MARK}{timings}")
    if late:  # what the prompt got is the hook process's own answer, which it records
        return ""
    injected = answer is not None and bool(answer.context)
    shown = list(answer.shown) if answer is not None and injected else []
    record_injection(home, {
        "session": session, "bank": request.bank, "prompt": shown_prompt(),
        "prompt_chars": len(prompt), "injected": injected, "memories": shown,
        "tokens": sum(int(m.get("tokens") or 0) for m in shown), "chars": record["chars"],
        "ms": record["total_ms"],
        "path": "lexical-only" if record["lexical_only"] else record["path"],
        "reason": None if injected else message.removeprefix("no memories: "),
    })  # fmt: skip
    if answer is None or not answer.context:
        return ""
    if _copilot(call.env):  # Copilot reads a top-level additionalContext only
        return orjson.dumps({"additionalContext": answer.context}).decode()
    output = {
        "hookSpecificOutput": {
            "hookEventName": answer_as,
            "additionalContext": answer.context,
        }
    }
    return orjson.dumps(output).decode()


def _with_content(transcript: str) -> str:
    """The transcript the query reads its last turns from: "" for one that is not there or
    still empty (a session file just created, as Copilot's is before its first event), whose
    format cannot be told and which holds no turn."""
    try:
        return transcript if transcript and Path(transcript).stat().st_size > 0 else ""
    except OSError:
        return ""


def _no_server(reason: str) -> bool:
    return reason == "no warm server" or reason.startswith("stale socket")


def _ask_warm(
    settings: Settings,
    request: PromptRequest,
    deadline: float,
    record: dict[str, Any],
) -> PromptAnswer | None:
    """The warm server's answer, or None (the reason in `record`). It gets at most half of the
    time left, so a server that hangs still leaves the cold path the other half."""
    try:
        reply = ask(
            settings.home,
            {
                "op": "recall",
                "database": settings.database_url or "",
                "embedder": settings.embedder or "",
                "request": request.as_json(),
            },
            timeout=max(0.05, (deadline - time.monotonic()) / 2),
            version=__version__,
        )
        context, memories = reply.get("context"), reply.get("memories")
        if not isinstance(context, str) or not isinstance(memories, int):
            raise WarmUnavailable("warm server sent an answer of the wrong shape")
    except WarmUnavailable as exc:
        record["warm_unavailable"] = exc.reason
        return None
    record["path"] = "warm"
    server_stages = reply.get("stages")
    if isinstance(server_stages, dict):
        record["server_ms"] = {
            str(k): round(float(v) * 1000, 1)
            for k, v in server_stages.items()
            if isinstance(v, int | float)
        }
    ids, floor, shown = reply.get("ids"), reply.get("floor"), reply.get("shown")
    return PromptAnswer(
        context,
        memories,
        lexical_only=reply.get("lexical_only") is True,
        bank_found=reply.get("bank_found") is not False,
        ids=tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else (),
        floor=floor if isinstance(floor, dict) else None,
        shown=tuple(m for m in shown if isinstance(m, dict)) if isinstance(shown, list) else (),
    )


def _cold(
    request: PromptRequest, settings: Settings, deadline: float, stages: dict[str, float]
) -> PromptAnswer | None:
    """Recall in this process, in a worker thread given until `deadline`: the full answer if it
    is ready by then, else the lexical-only answer if that is, else None. The query must be
    embedded by `deadline` minus a reserve for the search that follows."""
    box: dict[str, Any] = {}
    reserve = min(0.3, 0.1 * settings.hook.time_limit)

    def keep_early(answer: PromptAnswer) -> None:
        box["early"] = answer

    def work() -> None:
        try:
            mark = time.monotonic()
            from ...bank.bank import MemoryBank
            from ...embed import set_model_cache
            from ...heap import keep_freed_memory
            from .prompt import answer_prompt

            keep_freed_memory()  # ctypes is loaded already (by numpy)
            now = time.monotonic()
            stages["imports"] = now - mark
            set_model_cache(settings.home / "cache")
            memory_bank = MemoryBank.open(settings=settings)
            stages["open_store"] = time.monotonic() - now
            try:
                box["answer"] = answer_prompt(
                    memory_bank, request, stages, dense_until=deadline - reserve, early=keep_early
                )
            finally:
                memory_bank.close()
        except BaseException as exc:  # reported by the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="lamina-recall", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        early: PromptAnswer | None = box.get("early")
        return early
    if "error" in box:
        raise box["error"]
    answer: PromptAnswer = box["answer"]
    return answer


def hook_main(
    stdin: str, home: str | Path | None = None, warm_tried: str | None = None
) -> NoReturn:
    """`lamina hook` as a process: handle the event, write the output, flush, and leave with
    os._exit(0) -- no interpreter finalisation while a daemon thread may still be inside native
    code (onnxruntime aborts the process with SIGABRT when torn down under a running thread).
    `warm_tried`: why the warm server did not answer, when it was asked already."""
    try:
        output = run_hook(stdin, home=home, call=HookCall(warm_tried=warm_tried))
        if output:
            sys.stdout.write(output + "\n")
        sys.stdout.flush()
    except BaseException:  # a closed stdout must not turn into a traceback or a non-zero exit
        pass
    finally:
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(0)
