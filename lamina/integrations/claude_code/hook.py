"""`lamina hook`: every Claude Code hook event served by one command.

Claude Code runs the command with the event's JSON on stdin (session_id, transcript_path, cwd,
hook_event_name, and the event's own fields such as `prompt`). The command dispatches on
`hook_event_name`:

- **UserPromptSubmit**: compose the recall query from the prompt and the last turns of the
  transcript, recall from the project's bank, and print the memories as `additionalContext`.
  It returns nothing rather than stall the prompt past its time limit (3 s of wall time since
  the process started, by default), skips trivial prompts (under 5 characters, or a bare slash
  command), and never injects what this session still has in its context: this session's
  memories are left out, except those said before its last compaction.
- **Stop**, **SubagentStop**, **PreCompact**, **SessionEnd**: retain what is new in the
  transcript. The hook returns at once; a detached worker does the work. At most one worker per
  session runs at a time: a hook that finds one running leaves a mark and the running worker
  retains again before it exits, so no turn is lost between two Stops.
- **SessionStart**: make sure the database is created and migrated.

Every hook fails open: on any error it prints one line to stderr, exits 0 and writes the
details to `<data dir>/logs/hooks.log` (`lamina status` shows its tail).

Settings (environment): LAMINA_HOOK_TURNS (3), LAMINA_HOOK_MAX_CHARS (800),
LAMINA_HOOK_MIN_PROMPT (5), LAMINA_HOOK_TIME_LIMIT (3.0 s), LAMINA_HOOK_BUDGET (1024 tokens),
LAMINA_BANK (the bank; default: the project's, see lamina.config).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ...config import data_home, default_bank, load_config

__all__ = ["HookSettings", "run_hook", "run_worker"]

RETAIN_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})


@dataclass(frozen=True, slots=True)
class HookSettings:
    context_turns: int = 3
    max_query_chars: int = 800
    min_prompt_chars: int = 5
    time_limit: float = 3.0
    budget: int = 1024
    session_digest: bool = False
    """On SessionStart, inject a short digest of the project's recent sessions."""
    digest_sessions: int = 5

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HookSettings:
        """Environment first, then the config file's [hook] table, then the defaults."""
        environ = os.environ if env is None else env
        table = load_config(environ).get("hook")
        configured = table if isinstance(table, dict) else {}

        def number(key: str, default: float) -> float:
            for raw in (environ.get(f"LAMINA_HOOK_{key.upper()}"), configured.get(key)):
                try:
                    if raw is not None and raw != "":
                        return float(raw)
                except (TypeError, ValueError):
                    continue
            return default

        return cls(
            context_turns=int(number("turns", 3)),
            max_query_chars=int(number("max_chars", 800)),
            min_prompt_chars=int(number("min_prompt", 5)),
            time_limit=number("time_limit", 3.0),
            budget=int(number("budget", 1024)),
            session_digest=_flag(
                environ.get("LAMINA_HOOK_SESSION_DIGEST"), configured.get("session_digest")
            ),
            digest_sessions=int(number("digest_sessions", 5)),
        )


def _flag(*values: object) -> bool:
    for value in values:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip():
            return value.strip().lower() in ("1", "true", "yes", "on")
    return False


def process_age() -> float:
    """Seconds since this process started (Linux: from /proc; elsewhere 0)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class HookLog:
    def __init__(self, home: Path) -> None:
        self.path = home / "logs" / "hooks.log"

    def write(self, event: str, session: str, message: str) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            line = f"{stamp} {event or '-'} {session or '-'} {message}".replace("\n", " | ")
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line[:4000] + "\n")


def last_compaction(transcript: str) -> datetime | None:
    """When the session was last compacted (the timestamp of its last compact_boundary),
    found from the end of the file without reading it all."""
    try:
        with (
            Path(transcript).open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            at = data.rfind(b'"compact_boundary"')
            if at < 0:
                return None
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            record = orjson.loads(data[start : end if end >= 0 else len(data)])
    except (OSError, ValueError):
        return None
    from ...messages import parse_timestamp

    return parse_timestamp(record.get("timestamp")) if isinstance(record, dict) else None


def _is_trivial(prompt: str, settings: HookSettings) -> bool:
    text = prompt.strip()
    if len(text) < settings.min_prompt_chars:
        return True
    return text.startswith("/") and len(text.split()) == 1


def _prompt_context(payload: Mapping[str, Any], home: Path, settings: HookSettings) -> str:
    """The additionalContext for a prompt ("" when there is nothing to add)."""
    from ...bank.bank import MemoryBank
    from ...bank.query import QueryOptions, recall_query_for_file
    from ...bank.recall import RecallOptions
    from ...turns import clean_text

    prompt = str(payload.get("prompt") or "")
    if _is_trivial(prompt, settings):
        return ""
    bank_name = default_bank(payload.get("cwd") or None)
    memory_bank = MemoryBank.open(home)
    if memory_bank.store.get_bank(bank_name) is None:
        return ""
    transcript = str(payload.get("transcript_path") or "")
    options = QueryOptions(context_turns=settings.context_turns, max_chars=settings.max_query_chars)
    if transcript and Path(transcript).is_file():
        query = recall_query_for_file(transcript, prompt, options).query
        compacted = last_compaction(transcript)
    else:
        query = clean_text(prompt)[: settings.max_query_chars]
        compacted = None
    session = str(payload.get("session_id") or "")
    exclude = {session: compacted} if session else {}
    result = memory_bank.recall(
        query, bank_name, RecallOptions(budget=settings.budget, exclude=exclude)
    )
    return result.block() if result.hits else ""


def session_digest(payload: Mapping[str, Any], home: Path, cfg: HookSettings) -> str:
    """The project's most recent other sessions: when, and what each opened with."""
    from ...bank.bank import MemoryBank

    bank_name = default_bank(payload.get("cwd") or None)
    memory_bank = MemoryBank.open(home)
    if memory_bank.store.get_bank(bank_name) is None:
        return ""
    current = str(payload.get("session_id") or "")
    documents = [d for d in memory_bank.documents(bank_name) if d.id != current]
    recent = sorted(documents, key=lambda d: d.updated_at, reverse=True)[: cfg.digest_sessions]
    if not recent:
        return ""
    openers: dict[str, tuple[datetime | None, str]] = {}
    wanted = {d.id for d in recent}
    for row in memory_bank.store.iter_memories(bank_name, with_embeddings=False):
        memory = row.memory
        if memory.kind not in ("turn", "part") or memory.document not in wanted:
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
    return "\n".join(lines)


def _spawn_worker(payload: Mapping[str, Any], home: Path, event: str) -> None:
    transcript = str(payload.get("transcript_path") or "")
    session = str(payload.get("session_id") or "")
    if not transcript or not session:
        raise ValueError("the payload names no transcript_path or session_id")
    if not Path(transcript).is_file():
        raise FileNotFoundError(f"{transcript}: no such transcript")
    bank = default_bank(payload.get("cwd") or None)
    subprocess.Popen(
        [sys.executable, "-m", "lamina", "--home", str(home), "hook-worker",
         "--transcript", transcript, "--session", session, "--bank", bank, "--event", event],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )  # fmt: skip


def run_hook(
    stdin: str, *, home: str | Path | None = None, settings: HookSettings | None = None
) -> str:
    """Handle one hook event; returns what to print on stdout ("" for nothing). Never raises:
    errors are logged and reported on stderr in one line."""
    started = time.monotonic() - process_age()
    event = session = ""
    try:
        base = data_home(home)
    except Exception as exc:  # a broken config file must not block the user either
        print(f"lamina: hook failed open: {exc}", file=sys.stderr)
        return ""
    log = HookLog(base)
    try:
        cfg = settings or HookSettings.from_env()
        payload = orjson.loads(stdin or b"{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook payload is not a JSON object")
        event = str(payload.get("hook_event_name") or "")
        session = str(payload.get("session_id") or "")
        if event == "UserPromptSubmit":
            return _with_deadline(payload, base, cfg, started, log)
        if event in RETAIN_EVENTS:
            _spawn_worker(payload, base, event)
            log.write(event, session, "retain started in the background")
            return ""
        if event == "SessionStart":
            from ...store.sqlite import SQLiteStore

            applied = SQLiteStore(base / "lamina.db").migrate()
            log.write(event, session, f"ready (migrations applied: {len(applied)})")
            if not cfg.session_digest:
                return ""
            digest = session_digest(payload, base, cfg)
            if not digest:
                return ""
            output = {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": digest}}  # fmt: skip
            return orjson.dumps(output).decode()
        log.write(event, session, "ignored (not an event Lamina handles)")
        return ""
    except Exception as exc:
        log.write(event, session, f"failed: {exc!r}\n{traceback.format_exc()}")
        print(f"lamina: {event or 'hook'} failed open: {exc}", file=sys.stderr)
        return ""


def _with_deadline(
    payload: Mapping[str, Any], home: Path, cfg: HookSettings, started: float, log: HookLog
) -> str:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["context"] = _prompt_context(payload, home, cfg)
        except BaseException as exc:  # reported by the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    remaining = cfg.time_limit - (time.monotonic() - started) - 0.05
    thread.join(max(0.0, remaining))
    session = str(payload.get("session_id") or "")
    if thread.is_alive():
        log.write("UserPromptSubmit", session, f"no memories: over the {cfg.time_limit}s limit")
        return ""
    if "error" in box:
        raise box["error"]
    context = str(box.get("context") or "")
    log.write("UserPromptSubmit", session, f"injected {len(context)} chars")
    if not context:
        return ""
    output = {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}
    }
    return orjson.dumps(output).decode()


# -- the detached worker ---------------------------------------------------------------------


def run_worker(
    transcript: str, session: str, bank: str, *, home: str | Path | None = None, event: str = ""
) -> int:
    """Retain a session's transcript, once per session at a time; loops while other hooks
    left marks, so nothing that arrived meanwhile is missed."""
    base = data_home(home)
    log = HookLog(base)
    locks = base / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session)[:120] or "session"
    lock_path, mark = locks / f"{safe}.lock", locks / f"{safe}.pending"
    from ...bank.bank import MemoryBank

    while True:
        with lock_path.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                mark.touch()
                log.write(event, session, "a retain is running; left a mark for it")
                return 0
            try:
                memory_bank = MemoryBank.open(base)
                while True:
                    mark.unlink(missing_ok=True)
                    started = time.monotonic()
                    report = memory_bank.retain_file(transcript, bank, document=session)
                    log.write(
                        event, session,
                        f"retain {report.status}: {report.new_records} new records, "
                        f"{report.memories_added} memories added "
                        f"({time.monotonic() - started:.2f}s)",
                    )  # fmt: skip
                    if not mark.exists():
                        break
                memory_bank.close()
            except Exception as exc:
                log.write(event, session, f"retain failed: {exc!r}\n{traceback.format_exc()}")
                return 1
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        # A hook may have left its mark between our last check and the unlock.
        if not mark.exists():
            return 0
