"""The warm path: a small per-user server that holds a data directory's `MemoryBank` open (the
embedding model loaded, the store's connections and indexes warm) and answers the hook's recall
requests over a unix socket, so a prompt costs a socket round trip instead of a process that
imports, opens and loads everything again.

- **Where**: `<data dir>/run/warm.sock` (mode 0600) in `<data dir>/run` (mode 0700), beside
  `warm.lock` (held while it runs: one server per data directory) and `warm.pid`.
- **Protocol**: one JSON object per line; one request and one answer per connection. Every
  request carries `v` (the protocol), `version` (lamina's) and `home` (the data directory); the
  server answers only requests for its own data directory, of its own protocol and version;
  `hook` and `recall` also carry `database` (LAMINA_DATABASE_URL, else the config file's
  `database_url`, else "") and `embedder` (LAMINA_EMBEDDER, else the config file's `embedder`,
  else "") and are answered only when they name the server's own.
  `op` is `hook` (a UserPromptSubmit, or a retain event, handed over by `lamina hook`: the
  payload as Claude Code gave it, the hook process's LAMINA_* and CLAUDE_PROJECT_DIR/
  CLAUDE_CONFIG_DIR variables, its working directory and age; answered with `output`, what
  the hook prints, computed by the same code as the hook's own, logged the same way; a
  retain is queued and run on a thread of the server's, one at a time, with the worker's own
  locks and marks, and answered before it runs), `recall` (with
  `request`, a `PromptRequest`), `ping` or `stop`. Every answer has
  `v`, `version` and `ok`; `ok: false` comes with an `error`. Bad input (not JSON, too long,
  the wrong shape, a client that never finishes its line) gets an error answer or a closed
  connection, never a crash; one request's failure does not touch the next.
- **Lifetime**: it exits after `idle_timeout` seconds without a recall (30 minutes by
  default), on a `stop` request, or on SIGTERM, removing its socket. A socket file left by a
  server killed with SIGKILL is found stale by the next client (connection refused), which
  then takes the cold path; the next server removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orjson

from ... import __version__
from ...errors import InputError
from ...heap import keep_freed_memory
from ...owned import private_dir, private_opener, write_private
from .contract import HookLog
from .hook import HookCall, run_hook
from .prompt import PromptAnswer, PromptRequest, answer_prompt
from .retain_worker import RetainJob, run_worker
from .warm_client import (
    MAX_MESSAGE,
    PROTOCOL,
    WarmUnavailable,
    read_line,
    run_dir,
)
from .warm_control import DEFAULT_IDLE_TIMEOUT, LOCK_WAIT, check_socket_path

if TYPE_CHECKING:
    from ...bank.bank import MemoryBank
    from ...bank.query import TailQueries

__all__ = ["WarmServer", "serve_forever"]

CONNECTION_TIMEOUT = 5.0
"""How long one client may take to send its request line (it holds only its own thread)."""
WORKERS = 8
"""Connections answered at once; more wait to be accepted."""
ACCEPT_POLL = 0.5
"""How often the accepting thread wakes to see a stop asked for by a request."""


class _Stop(Exception):
    pass


def _lock_within(handle: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _private_dir(path: Path) -> Path:
    private_dir(path).chmod(0o700)  # an existing one too: the socket's only guard
    return path


@dataclass(slots=True)
class WarmServer:
    """Serves recall requests for the data directory `home` until idle for `idle_timeout`."""

    home: Path
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    memory_bank: MemoryBank | None = None
    requests: int = 0
    errors: int = 0
    started_at: float = 0.0
    queries: TailQueries | None = field(default=None, repr=False)
    """What the server keeps of recent transcripts' ends, to read only what was appended."""
    database: str | None = None
    """The database its bank was opened on, as its settings name it (`database_url`, "": the
    data directory's own file): a hook or recall for another one is refused."""
    embedder: str = ""
    """The embedder its bank was opened with, as its settings name it ("": the bundled
    model): likewise."""
    _stopping: bool = False
    _last: float = 0.0
    """When a recall was last answered (monotonic): the idle timeout counts from it."""
    _busy: int = 0
    """Connections being answered."""
    _count: threading.Lock = field(default_factory=threading.Lock, repr=False)
    retains: dict[str, int] = field(default_factory=lambda: {"queued": 0, "done": 0, "failed": 0})
    """Retains handed over by retain events: queued (not finished yet), done and failed."""
    _retaining: ThreadPoolExecutor | None = field(default=None, repr=False)
    """Runs them one at a time, on a thread of its own."""

    def serve(self) -> None:
        """Runs in the calling process until idle, stopped or terminated. Raises InputError
        when the socket path is too long or another server holds the data directory."""
        home = self.home.resolve()
        self.home = home
        path = check_socket_path(home)
        run = _private_dir(run_dir(home))
        log = HookLog(home)
        with open(run / "warm.lock", "a", opener=private_opener) as lock:
            if not _lock_within(lock, LOCK_WAIT):
                raise InputError(f"a warm server already serves {home}")
            path.unlink(missing_ok=True)  # left by a server that was killed
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old_umask = os.umask(0o177)
            try:
                listener.bind(os.fsencode(path))
            finally:
                os.umask(old_umask)
            path.chmod(0o600)
            listener.listen(64)
            pid_file = run / "warm.pid"
            write_private(pid_file, f"{os.getpid()}\n")
            previous = signal.signal(signal.SIGTERM, _raise_stop)
            try:
                keep_freed_memory()
                self._open_bank()
                self.started_at = time.time()
                log.write("warm", "-", f"server {os.getpid()} listening on {path}")
                self._loop(listener, log)
            except _Stop:
                log.write("warm", "-", f"server {os.getpid()} terminated")
            finally:
                signal.signal(signal.SIGTERM, previous)
                listener.close()
                with contextlib.suppress(OSError):
                    path.unlink()
                with contextlib.suppress(OSError):
                    pid_file.unlink()
                if self.memory_bank is not None:
                    self.memory_bank.close()
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _open_bank(self) -> None:
        if self.memory_bank is None:
            from ...bank.bank import MemoryBank
            from ...config import resolve_settings
            from ...embed import set_model_cache

            # Resolved once, at the start: what the bank is opened on, and what a hook's
            # request must name to be answered here.
            settings = resolve_settings(home=self.home)
            self.database = settings.database_url or ""
            self.embedder = settings.embedder or ""
            set_model_cache(self.home / "cache")
            self.memory_bank = MemoryBank.open(settings=settings, serving=True)
        if self.queries is None:
            from ...bank.query import TailQueries

            self.queries = TailQueries()
        # Load the model and the tokenizer and open the banks now, not on the first prompt.
        self.memory_bank.warm_up()

    def _loop(self, listener: socket.socket, log: HookLog) -> None:
        """Accepts connections and answers each on a thread of its own: a client that is slow
        to send its line (or never does) holds only its own thread, for CONNECTION_TIMEOUT."""
        self._last = time.monotonic()
        workers = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="lamina-warm")
        try:
            while not self._stopping:
                left = self._last + self.idle_timeout - time.monotonic()
                if left <= 0 and not self._busy and not self.retains["queued"]:
                    log.write("warm", "-", f"server {os.getpid()} idle for {self.idle_timeout:g}s")
                    return
                # Woken now and then to see a stop asked for on another thread.
                listener.settimeout(min(max(left, 0.0), ACCEPT_POLL) or ACCEPT_POLL)
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                with self._count:
                    self._busy += 1
                workers.submit(self._serve_one, conn, log)
        finally:
            workers.shutdown(wait=True)
            if self._retaining is not None:  # what was handed over is retained before exit
                self._retaining.shutdown(wait=True)

    def _serve_one(self, conn: socket.socket, log: HookLog) -> None:
        try:
            with conn:
                if self._handle(conn, log):
                    self._last = time.monotonic()
        finally:
            with self._count:
                self._busy -= 1

    def _handle(self, conn: socket.socket, log: HookLog) -> bool:
        """Answer one connection; True when it was a recall (which keeps the server alive)."""
        recall = False
        try:
            conn.settimeout(CONNECTION_TIMEOUT)
            data = orjson.loads(_read_request(conn))
            answer, recall = self._answer(data)
        except (ValueError, WarmUnavailable) as exc:  # bad input: answered, never fatal
            self._error()
            answer = {"ok": False, "error": str(exc)[:500]}
        except OSError:  # the client went away or never finished its line
            self._error()
            return False
        except Exception as exc:
            self._error()
            log.write("warm", "-", f"request failed: {exc!r}\n{traceback.format_exc()}")
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        body = {"v": PROTOCOL, "version": __version__, "pid": os.getpid(), **answer}
        with contextlib.suppress(OSError):
            conn.sendall(orjson.dumps(body) + b"\n")
        return recall

    def _error(self) -> None:
        with self._count:
            self.errors += 1

    def _answered(self) -> None:
        with self._count:
            self.requests += 1

    def _answer(self, data: object) -> tuple[dict[str, Any], bool]:
        if not isinstance(data, dict):
            raise ValueError("the request is not a JSON object")
        if data.get("v") != PROTOCOL or data.get("version") != __version__:
            raise ValueError(
                f"this server speaks protocol {PROTOCOL} of lamina {__version__}, "
                f"not {data.get('v')!r} of {data.get('version')!r}"
            )
        if data.get("home") != str(self.home):
            raise ValueError("this server serves another data directory")
        op = data.get("op")
        if op == "ping":
            return self.status(), False
        if op == "stop":
            self._stopping = True
            return {"ok": True, "stopping": True, "pid": os.getpid()}, False
        if op not in ("hook", "recall"):
            raise ValueError(f"unknown op {op!r}")
        if data.get("database") != self.database:
            raise ValueError(
                "this server serves another database (LAMINA_DATABASE_URL or the config "
                "file's database_url differ)"
            )
        if data.get("embedder", "") != self.embedder:
            raise ValueError(
                "this server uses another embedder (LAMINA_EMBEDDER or the config file's "
                "embedder differ)"
            )
        if op == "hook":
            return self._hook(data), True
        request = PromptRequest.from_json(data.get("request"))
        assert self.memory_bank is not None
        stages: dict[str, float] = {}
        answer = answer_prompt(self.memory_bank, request, stages, queries=self.queries)
        self._answered()
        return {
            "ok": True,
            "context": answer.context,
            "memories": answer.memories,
            "lexical_only": answer.lexical_only,
            "bank_found": answer.bank_found,
            "ids": list(answer.ids),
            "floor": answer.floor,
            "shown": list(answer.shown),
            "stages": stages,
        }, True

    def _hook(self, data: dict[str, Any]) -> dict[str, Any]:
        """A UserPromptSubmit handed over by a hook process, answered as that process would
        answer it (its environment and working directory, its deadline), recalling here."""
        payload, env, cwd, age = (
            data.get("payload"),
            data.get("env"),
            data.get("cwd"),
            data.get("age"),
        )
        if not isinstance(payload, str) or len(payload) > MAX_MESSAGE:
            raise ValueError("payload: expected the hook's input as a string")
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ValueError("env: expected an object of strings")
        if not isinstance(cwd, str) or isinstance(age, bool) or not isinstance(age, int | float):
            raise ValueError("cwd, age: expected a string and a number")
        wait = data.get("wait")
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float)):
            raise ValueError("wait: expected a number of seconds")
        assert self.memory_bank is not None
        memory_bank, queries = self.memory_bank, self.queries

        def answer(request: PromptRequest, stages: dict[str, float]) -> PromptAnswer:
            return answer_prompt(memory_bank, request, stages, queries=queries)

        now = time.monotonic()
        call = HookCall(
            env=env,
            cwd=cwd,
            started=now - max(0.0, float(age)),
            answer=answer,
            given_up=now + float(wait) if wait is not None else None,
            retain=self._queue_retain,
        )
        output = run_hook(payload, home=self.home, call=call)
        self._answered()
        return {"ok": True, "output": output}

    def _queue_retain(self, job: RetainJob) -> None:
        with self._count:
            if self._retaining is None:
                self._retaining = ThreadPoolExecutor(1, thread_name_prefix="lamina-retain")
            self.retains["queued"] += 1
        self._retaining.submit(self._retain, job)

    def _retain(self, job: RetainJob) -> None:
        """One handed-over retain, as the worker process would run it (its locks and marks,
        its log lines), with this process's model, tokenizer and rules already loaded."""
        code = 1
        try:
            code = run_worker(
                job.transcript, job.session, job.bank, home=self.home, event=job.event,
                parent=job.parent, skip=job.skip, env=job.env,
            )  # fmt: skip
        except Exception as exc:  # logged, never fatal: the next retain event retries
            HookLog(self.home).write(job.event, job.session, f"retain failed: {exc!r}")
        finally:
            with self._count:
                self.retains["queued"] -= 1
                self.retains["done" if code == 0 else "failed"] += 1
                self._last = time.monotonic()

    def status(self) -> dict[str, Any]:
        return {
            "ok": True,
            "pid": os.getpid(),
            "home": str(self.home),
            "uptime_s": round(time.time() - self.started_at, 1),
            "requests": self.requests,
            "errors": self.errors,
            "idle_timeout_s": self.idle_timeout,
            "retains": dict(self.retains),
            "transcripts": {
                "kept": len(q.kept) if (q := self.queries) else 0,
                "appended_only": q.hits if q else 0,
                "reread": q.rereads if q else 0,
            },
        }


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def _read_request(conn: socket.socket) -> bytes:
    try:
        return read_line(conn)
    except EOFError:
        raise ValueError("the request ended before its newline") from None


def serve_forever(home: Path, idle_timeout: float) -> None:
    """`lamina warm serve`: the server in this process (what `start` runs detached)."""
    WarmServer(home, idle_timeout).serve()
