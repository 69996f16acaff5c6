"""The detached retain worker: what the hook's Stop, SubagentStop, PreCompact and SessionEnd
events start (`spawn_worker`) and what it runs (`run_worker`: as `lamina hook-worker`, or on a
thread of the warm server, which queues `RetainJob`s).

At most one worker per session runs at a time, under the session's lock in `<data dir>/locks`:
a hook that finds one running leaves a mark there (`.pending`) and the running worker retains
again before it exits, so no turn is lost between two Stops. A paused event leaves a skip mark
(`.skip`: where the file ended) before its worker starts; whichever worker holds the lock takes
it before it reads the transcript again, and the paused event's own worker (`--skip`) moves
the cursor only that far, so what was said while paused is never retained and what is said
after a resume is. A retain that finds the session paused again reads nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...config import Settings, resolve_settings
from ...owned import private_dir, private_opener
from .contract import HookLog, Notices, user_should_know
from .project import hook_bank

__all__ = ["TRANSCRIPT_WAIT", "RetainJob", "run_worker", "spawn_worker"]


@dataclass(frozen=True, slots=True)
class RetainJob:
    """One retain a retain event asks for: what `run_worker` takes."""

    transcript: str
    session: str
    bank: str
    event: str
    parent: str | None = None
    skip: bool = False
    env: Mapping[str, str] | None = None
    """The hook process's environment, which the retain's settings are resolved from."""


def _retained_source(payload: Mapping[str, Any], event: str) -> tuple[str, str, str | None]:
    """The transcript an event retains, its document id and its parent session: a SubagentStop
    retains the subagent's own transcript as `<session>:agent-<id>`, linked to its parent
    session; every other event the session's transcript (no parent)."""
    transcript = str(payload.get("transcript_path") or "")
    session = str(payload.get("session_id") or "")
    agent_transcript = str(payload.get("agent_transcript_path") or "")
    if event == "SubagentStop" and agent_transcript and session:
        agent = str(payload.get("agent_id") or "") or Path(agent_transcript).stem
        agent = agent if agent.startswith("agent-") else f"agent-{agent}"
        return agent_transcript, f"{session}:{agent}", session
    return transcript, session, None


TRANSCRIPT_WAIT = 30.0
"""Seconds a retain worker waits for a session file that does not exist yet (its folder does):
Copilot writes its events.jsonl in the background, and on a loaded machine its Stop and even
its SessionEnd hook can run before the file is there."""


def _appears(path: Path, seconds: float) -> bool:
    """True once `path` is a file; False when it is not one within `seconds`."""
    deadline = time.monotonic() + seconds
    while not path.is_file():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def spawn_worker(
    payload: Mapping[str, Any],
    settings: Settings,
    event: str,
    *,
    skip: bool = False,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    retain: Callable[[RetainJob], None] | None = None,
) -> None:
    """Start the retain `event` asks for (with `skip`, a move of the cursor past what was said)
    in a detached worker process, or hand it to `retain` (the warm server's queue). `cwd` and
    `env`: the hook process's working directory and environment (None: this process's)."""
    home = settings.home
    transcript, document, parent = _retained_source(payload, event)
    if not transcript or not document:
        raise ValueError("the payload names no transcript_path or session_id")
    path = Path(cwd or ".", transcript)  # as the hook process saw it
    # A session file not there yet, in a folder that is (Copilot writes events.jsonl in the
    # background, beside the session's other files), is the worker's to wait for.
    if not path.is_file() and not path.parent.is_dir():
        raise FileNotFoundError(f"{transcript}: no such transcript")
    bank = hook_bank(payload, settings, env, cwd)
    if skip:
        # Recorded before the worker starts: whichever retain of this session runs next skips
        # what was said up to now, even one already running or one after a quick resume.
        _leave_skip_mark(_worker_files(Path(home), document)[2], path)
    if retain is not None:
        retain(RetainJob(str(path.resolve()), document, bank, event, parent, skip, env))
        return
    # Only the installed Lamina may run: `-P` keeps the working directory (the project the
    # agent works in, which may hold a `lamina/` folder of its own) off sys.path, and the
    # worker starts from a neutral directory (design invariant 10).
    import subprocess  # here: the prompt hook, which starts no worker, need not import it

    subprocess.Popen(
        [sys.executable, "-P", "-m", "lamina", "--home", str(Path(home).resolve()),
         "hook-worker", "--transcript", str(path.resolve()), "--session", document,
         "--bank", bank, "--event", event, *(["--parent", parent] if parent else []),
         *(["--skip"] if skip else [])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        start_new_session=True,
        close_fds=True,
    )  # fmt: skip


def _expire(
    memory_bank: Any, days: int | None, bank: str, log: HookLog, event: str, session: str
) -> None:
    """Forget the bank's memories older than `retain_days` (when the config file sets it)."""
    from datetime import timedelta

    if days is None:
        return
    gone = memory_bank.forget_before(bank, datetime.now(UTC) - timedelta(days=days))
    if gone:
        log.write(event, session, f"forgot {gone} memories older than {days} days (retain_days)")


def _worker_files(base: Path, session: str) -> tuple[Path, Path, Path]:
    """A session's retain lock, its mark (retain again once done) and its skip mark (what to
    skip first: said while paused)."""
    locks = private_dir(base / "locks")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session)[:120] or "session"
    return locks / f"{safe}.lock", locks / f"{safe}.pending", locks / f"{safe}.skip"


def _leave_skip_mark(skip_mark: Path, transcript: Path) -> None:
    """Record, for the retain holding the session's lock, that the transcript up to its last
    complete line now was said while memory was paused (the furthest such point, when a mark
    is there already)."""
    upto = _complete_end(transcript)
    with contextlib.suppress(OSError, ValueError):
        upto = max(upto, int(skip_mark.read_text(encoding="ascii")))
    skip_mark.write_text(str(upto), encoding="ascii")
    with contextlib.suppress(OSError):
        skip_mark.chmod(0o600)


def _take_skip_mark(skip_mark: Path) -> int | None:
    """The offset a skip mark asks to skip to, the mark removed (None: no mark)."""
    try:
        text = skip_mark.read_text(encoding="ascii")
    except OSError:
        return None
    skip_mark.unlink(missing_ok=True)
    try:
        return int(text)
    except ValueError:  # torn: skip what the file holds now, the safe side
        return sys.maxsize


def _complete_end(path: Path, block: int = 65_536) -> int:
    """The offset just past the file's last newline (0 when it has none)."""
    try:
        with path.open("rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            while end > 0:
                start = max(0, end - block)
                handle.seek(start)
                found = handle.read(end - start).rfind(b"\n")
                if found >= 0:
                    return start + found + 1
                end = start
    except OSError:
        pass
    return 0


def run_worker(
    transcript: str,
    session: str,
    bank: str,
    *,
    home: str | Path | None = None,
    event: str = "",
    parent: str | None = None,
    skip: bool = False,
    env: Mapping[str, str] | None = None,
) -> int:
    """Retain a session's transcript (document `session`), once per document at a time; loops
    while other hooks left marks, so nothing that arrived meanwhile is missed. With `parent`,
    the transcript is a subagent's: tagged `subagent` and linked to the parent session. With
    `skip` (memory paused), only move the document's cursor to where the transcript ended when
    the paused event came (its skip mark); a retain event that came meanwhile is then served
    as a retain, unless the session is paused again by then. After a
    retain, memories older than the config file's `retain_days` are forgotten. Settings are
    resolved from `env` (None: this process's environment)."""
    settings = resolve_settings(env, home=home)
    base = settings.home
    log = HookLog(base)
    lock_path, mark, skip_mark = _worker_files(base, session)
    if not _appears(Path(transcript), TRANSCRIPT_WAIT):
        log.write(event, session, f"retain failed: {transcript}: no such transcript")
        return 1
    from ...bank.bank import MemoryBank
    from ...pause import pause_reason
    from ..transcript import transcript_format

    def skip_pending(memory_bank: MemoryBank) -> None:
        """Move the cursor past what was said while paused, up to where the file ended when a
        paused event asked for it, before any retain reads the file."""
        upto = _take_skip_mark(skip_mark)
        if upto is not None:
            report = memory_bank.skip_file(
                transcript, bank, session, transcript_format(transcript), upto=upto
            )
            log.write(event, session, f"paused: transcript {report.status}")

    retained = False
    while True:
        with open(lock_path, "a", opener=private_opener) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # The running retain applies this event's skip mark (left before this worker
                # started, at where the file ended then) before it reads on, and retains again.
                mark.touch(mode=0o600)
                log.write(event, session, "a retain is running; left a mark for it")
                return 0
            try:
                from ...embed import set_model_cache

                set_model_cache(base / "cache")
                memory_bank = MemoryBank.open(settings=settings)
                while True:
                    if skip:
                        # Only up to where the file ended when the paused event came: what
                        # is said after a resume is not this worker's to skip. A retain event
                        # that came meanwhile (its mark) is served next, as a retain.
                        skip_pending(memory_bank)
                        skip = False
                        if not mark.exists():
                            break
                    mark.unlink(missing_ok=True)
                    skip_pending(memory_bank)
                    if pause_reason(base, bank, session):
                        # Paused after this retain was asked for: what the file holds past the
                        # skip marks may have been said since, so none of it is read now.
                        log.write(event, session, "paused meanwhile: nothing retained")
                    else:
                        started = time.monotonic()
                        report = memory_bank.retain_file(
                            transcript,
                            bank,
                            document=session,
                            # A Claude Code transcript, a Codex rollout or a Gemini chat, decided
                            # without reading it whole, so a file caught empty (just created, or
                            # being rewritten) is "nothing new", not an error.
                            format=transcript_format(transcript),
                            tags=("subagent",) if parent else (),
                            metadata={"parent_session": parent} if parent else None,
                        )
                        retained = True
                        log.write(
                            event, session,
                            f"retain {report.status}: {report.new_records} new records, "
                            f"{report.memories_added} memories added "
                            f"({time.monotonic() - started:.2f}s)",
                        )  # fmt: skip
                    if not mark.exists():
                        break
                if retained:
                    _expire(memory_bank, settings.retain_days, bank, log, event, session)
                memory_bank.close()
            except Exception as exc:
                import traceback

                log.write(event, session, f"retain failed: {exc!r}\n{traceback.format_exc()}")
                if user_should_know(exc):
                    Notices(base).post(parent or session, f"Lamina could not retain: {exc}")
                return 1
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        # A hook may have left its mark between our last check and the unlock.
        if not mark.exists() and not skip_mark.exists():
            return 0
