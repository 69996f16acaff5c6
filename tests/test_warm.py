"""The warm path with a real server process: the hook asks it first, and falls back to the cold
path when it is gone, stale, of another version or unreachable. Every wait is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lamina import __version__
from lamina.bank.bank import MemoryBank
from lamina.integrations.claude_code.warm_client import PROTOCOL, SOCKET_PATH_LIMIT, socket_path

from .conftest import EXAMPLE, shared_transcripts

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")

PROMPT = "which database did we choose, and why?"


def lamina(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    return subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def hook(
    home: Path,
    cwd: Path,
    importtime: bool = False,
    prompt: str = PROMPT,
    session: str = "another-session",
    transcript: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": session,
               "prompt": prompt, "cwd": str(cwd)}  # fmt: skip
    if transcript is not None:
        payload["transcript_path"] = transcript
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    environ.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj",
                    "LAMINA_HOOK_TIME_LIMIT": "30", **env})  # fmt: skip
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "lamina", "hook"],
        input=json.dumps(payload), capture_output=True, text=True, env=environ, timeout=90,
    )  # fmt: skip


def last_timings(home: Path) -> dict[str, Any]:
    lines = (home / "logs" / "hooks.log").read_text().splitlines()
    line = [x for x in lines if " | timings " in x][-1]
    record: dict[str, Any] = json.loads(line.split(" | timings ", 1)[1])
    return record


def wait_until(check: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def make_home(base: Path) -> Path:
    home = base / "home"
    bank = MemoryBank.open(home)
    bank.retain_file(EXAMPLE, "proj", document="example-session")
    bank.close()
    return home


def server_pid(home: Path) -> int | None:
    try:
        return int((home / "run" / "warm.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its detached parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture()
def home(tmp_path: Path) -> Iterator[Path]:
    base = make_home(tmp_path)
    yield base
    pid = server_pid(base)
    if pid is not None and alive(pid):
        os.kill(pid, signal.SIGKILL)


def start(home: Path, *extra: str) -> dict[str, Any]:
    result = lamina(home, "warm", "start", "--json", *extra)
    assert result.returncode == 0, result.stderr
    status: dict[str, Any] = json.loads(result.stdout)
    assert status["running"] is True
    return status


def test_the_hook_is_answered_by_the_warm_server(home: Path, tmp_path: Path) -> None:
    status = start(home)
    run = home / "run"
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    assert stat.S_IMODE(socket_path(home).stat().st_mode) == 0o600
    result = hook(home, tmp_path, importtime=True)
    assert result.returncode == 0
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "INKWELL_DB_PATH" in context
    timings = last_timings(home)
    assert timings["path"] == "warm" and timings["memories"] > 0
    assert {"query", "search"} <= set(timings["server_ms"])
    # The server records the injection as the hook process would have, with the same ids.
    entry = json.loads((home / "logs" / "injections.jsonl").read_text().splitlines()[-1])
    assert entry["path"] == "warm" and entry["injected"]
    assert [m["id"] for m in entry["memories"]] == timings["ids"]
    # Answered by the server, the hook process loaded neither numpy nor the model.
    imported = set(re.findall(r"^import time:.*\|\s*(\S+)$", result.stderr, re.M))
    assert "lamina.integrations.claude_code.warm_client" in imported
    assert not {"numpy", "onnxruntime", "tiktoken"} & {m.split(".")[0] for m in imported}
    # Nor any other module of Lamina's, nor any dependency: only the client and the stdlib.
    assert {m for m in imported if m.startswith("lamina")} <= CLIENT_MODULES
    assert not {"orjson", "platformdirs", "tomllib"} & imported
    again = json.loads(lamina(home, "warm", "status", "--json").stdout)
    assert again["pid"] == status["pid"] and again["requests"] == 1
    stopped = lamina(home, "warm", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not socket_path(home).exists()
    assert wait_until(lambda: not alive(status["pid"]))


CLIENT_MODULES = {
    "lamina",
    "lamina.config",  # the settings, resolved by the same rules as every entry point's
    "lamina.entry",
    "lamina.integrations",
    "lamina.integrations.claude_code",
    "lamina.integrations.claude_code.warm_client",
}


def test_the_server_answers_with_the_hook_process_settings(home: Path, tmp_path: Path) -> None:
    """The server answers for the hook process: its bank, its settings, its log line."""
    start(home)
    result = hook(home, tmp_path, LAMINA_BANK="another-project")
    assert result.returncode == 0 and result.stdout == ""
    timings = last_timings(home)
    assert timings["path"] == "warm" and timings["memories"] == 0
    log = (home / "logs" / "hooks.log").read_text()
    assert "bank another-project does not exist" in log.splitlines()[-1]
    small = hook(home, tmp_path, LAMINA_HOOK_BUDGET="150")
    context = json.loads(small.stdout)["hookSpecificOutput"]["additionalContext"]
    full = hook(home, tmp_path)
    assert len(context) < len(json.loads(full.stdout)["hookSpecificOutput"]["additionalContext"])
    assert last_timings(home)["path"] == "warm"


def test_the_server_answers_copilot_and_gemini_as_each_reads_it(home: Path, tmp_path: Path) -> None:
    """Copilot's prompt hook (its origin, COPILOT_HOME, COPILOT_HOOK_DIR passed along): the
    server answers with a top-level additionalContext, and composes the query from the session
    file it finds from the session id. Gemini's BeforeAgent goes to the server as well."""
    start(home)
    copilot_home = tmp_path / "chome"
    events = copilot_home / "session-state" / "s-copilot" / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_text("")
    env = {"LAMINA_HOOK_ORIGIN": "copilot-user", "COPILOT_HOME": str(copilot_home),
           "COPILOT_HOOK_DIR": str(copilot_home / "hooks")}  # fmt: skip
    result = hook(home, tmp_path, session="s-copilot", **env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert "hookSpecificOutput" not in answer and "INKWELL_DB_PATH" in answer["additionalContext"]
    assert last_timings(home)["path"] == "warm"
    # The same event from Claude Code keeps Claude Code's shape.
    claude = json.loads(hook(home, tmp_path).stdout)
    assert "INKWELL_DB_PATH" in claude["hookSpecificOutput"]["additionalContext"]
    # Gemini's prompt event (BeforeAgent) is answered by the server too, under its own name.
    payload = {"hook_event_name": "BeforeAgent", "session_id": "s-gemini", "prompt": PROMPT,
               "cwd": str(tmp_path)}  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    environ.update(LAMINA_HOME=str(home), LAMINA_BANK="proj", LAMINA_HOOK_TIME_LIMIT="30",
                   LAMINA_HOOK_ORIGIN="gemini-user")  # fmt: skip
    gemini = subprocess.run([sys.executable, "-m", "lamina", "hook"], input=json.dumps(payload),
                            capture_output=True, text=True, env=environ, timeout=90)  # fmt: skip
    output = json.loads(gemini.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "BeforeAgent" and "INKWELL" in output["additionalContext"]
    assert last_timings(home)["path"] == "warm"


def test_warm_and_cold_answer_with_the_same_memories(tmp_path: Path) -> None:
    """On a real bank (every shared Claude Code transcript, this session's included), the
    server's answer is the cold path's, memory for memory, for several prompts."""
    home = tmp_path / "home"
    bank = MemoryBank.open(home)
    transcripts = shared_transcripts()[:4] or [EXAMPLE]
    for i, path in enumerate(transcripts):
        bank.retain_file(path, "proj", document=f"session-{i}")
    bank.close()
    prompts = [PROMPT, "how did we fix the failing tests?", "what does the plan say next?"]

    def answers() -> list[str]:
        out = []
        for prompt in prompts:
            result = hook(home, tmp_path, prompt=prompt, session="session-0",
                          transcript=str(transcripts[0]))  # fmt: skip
            assert result.returncode == 0, result.stderr
            # A prompt the floor judges alone may get nothing, on both paths alike.
            context = (
                json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
                if result.stdout
                else ""
            )
            out.append(re.sub(r"Current time: [^\n]*", "", context))
        return out

    cold = answers()
    assert last_timings(home)["path"] == "cold"
    status = start(home)
    try:
        warm = answers()
        assert last_timings(home)["path"] == "warm"
    finally:
        lamina(home, "warm", "stop")
    assert warm == cold and any(cold)
    assert status["pid"]


def test_the_clients_json_is_json() -> None:
    """The client writes and reads JSON with json's C half only; what it writes is what json
    reads, and what it reads is what json reads, odd characters and bad documents included."""
    from lamina.integrations.claude_code.warm_client import dumps, loads

    odd = 'quote " back \\ nl \n tab \t nul \x00 \u2028 é 😀 \ud800'
    value = {"s": odd, "n": [1, -2, 3.5, 1e-9, True, False, None], "d": {"k": "", odd: {}}}
    assert json.loads(dumps(value)) == value
    assert loads(json.dumps(value)) == value
    assert loads(json.dumps(value, ensure_ascii=False)) == value
    assert loads(' {"a": [1, 2]}\n ') == {"a": [1, 2]}
    for bad in ["", "{", '{"a": 1} x', "NaN", "[1,]", "{'a': 1}"]:
        with pytest.raises(ValueError):
            loads(bad)
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})


def test_a_killed_server_falls_back_to_the_cold_path(home: Path, tmp_path: Path) -> None:
    status = start(home)
    assert last_timings_path(home, tmp_path) == "warm"
    os.kill(status["pid"], signal.SIGKILL)
    assert wait_until(lambda: not alive(status["pid"]))
    assert socket_path(home).exists()  # left behind: a stale socket file
    result = hook(home, tmp_path)
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and "stale socket" in timings["warm_unavailable"]
    # The next server takes the stale socket's place.
    start(home)
    assert last_timings_path(home, tmp_path) == "warm"


def last_timings_path(home: Path, cwd: Path) -> str:
    result = hook(home, cwd)
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    path: str = last_timings(home)["path"]
    return path


def test_a_stale_socket_file_falls_back(home: Path, tmp_path: Path) -> None:
    path = socket_path(home)
    path.parent.mkdir(mode=0o700)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(path))
    left.close()  # the file stays, nobody listens
    result = hook(home, tmp_path)
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and "stale socket" in timings["warm_unavailable"]


def test_a_server_of_another_version_is_not_used(home: Path, tmp_path: Path) -> None:
    path = socket_path(home)
    path.parent.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    listener.settimeout(60)

    def old_server() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b'{"v": 0, "version": "0.0.1", "ok": true, "context": "stale"}\n')

    thread = threading.Thread(target=old_server, daemon=True)
    thread.start()
    result = hook(home, tmp_path)
    thread.join(60)
    listener.close()
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    assert "stale" not in json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    timings = last_timings(home)
    assert timings["path"] == "cold" and "0.0.1" in timings["warm_unavailable"]


def talk(home: Path, raw: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(socket_path(home)))
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


def request(home: Path, **fields: Any) -> bytes:
    body = {"v": PROTOCOL, "version": __version__, "home": str(home.resolve()), "database": "",
            **fields}  # fmt: skip
    return json.dumps(body).encode() + b"\n"


def test_bad_requests_get_errors_and_never_poison_the_next(home: Path) -> None:
    status = start(home)
    good = request(home, op="recall", request={"prompt": PROMPT, "bank": "proj"})
    bad = [
        b"not json\n",
        b"[1, 2, 3]\n",
        b'{"op": "recall"}\n',  # no version
        request(home, op="explode"),
        request(home, op="recall", request={"prompt": 3, "bank": "proj"}),
        request(home, op="recall", request={"prompt": PROMPT, "bank": "proj", "budget": -1}),
        request(home, op="recall", request=[]),
        request(
            home, op="hook", payload=json.dumps({"hook_event_name": "Stop"}), env={}, cwd="/", age=0
        ),  # the server answers prompts only
        request(home, op="hook", payload="{}", env={"LAMINA_BANK": 3}, cwd="/", age=0),
        request(home, op="hook", payload="{}", env={}, cwd="/", age="old"),
        json.dumps({**json.loads(good), "home": "/somewhere/else"}).encode() + b"\n",
        json.dumps({**json.loads(good), "database": "/another.db"}).encode() + b"\n",
        b'{"v": 1, "unterminated',  # no newline: the client gives up
    ]
    for raw in bad:
        answer = talk(home, raw) if raw.endswith(b"\n") else None
        if answer is not None:
            assert answer["ok"] is False and answer["error"], raw
            assert answer["v"] == PROTOCOL and answer["version"] == __version__
        else:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(socket_path(home)))
                sock.sendall(raw)
        ok = talk(home, good)
        assert ok["ok"] is True and "INKWELL_DB_PATH" in ok["context"], raw
    # A bank that does not exist is an empty answer, not an error.
    missing = talk(home, request(home, op="recall", request={"prompt": PROMPT, "bank": "nope"}))
    assert missing["ok"] is True and missing["context"] == "" and missing["bank_found"] is False
    final = json.loads(lamina(home, "warm", "status", "--json").stdout)
    assert final["pid"] == status["pid"] and final["errors"] >= len(bad) - 1


def test_an_answer_the_hook_process_stopped_waiting_for_is_not_logged_twice(
    home: Path, tmp_path: Path
) -> None:
    """A hook process that gave up on the warm server answers cold and records that prompt
    itself: the server's late answer must not add a second entry to the injection log."""
    start(home)
    log = home / "logs" / "injections.jsonl"
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s",
                          "prompt": PROMPT, "cwd": str(tmp_path)})  # fmt: skip
    env = {"LAMINA_BANK": "proj", "LAMINA_HOOK_TIME_LIMIT": "30"}

    def entries() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    before = entries()
    waited = talk(home, request(home, op="hook", payload=payload, env=env, cwd=str(tmp_path),
                                age=0, wait=30))  # fmt: skip
    assert waited["ok"] and "INKWELL_DB_PATH" in waited["output"]
    assert entries() == before + 1
    late = talk(home, request(home, op="hook", payload=payload, env=env, cwd=str(tmp_path),
                              age=0, wait=0))  # fmt: skip
    assert late["ok"] and late["output"] == ""
    assert entries() == before + 1
    hooks_log = (home / "logs" / "hooks.log").read_text()
    assert "answered after the hook process stopped waiting" in hooks_log
    bad = talk(home, request(home, op="hook", payload=payload, env=env, cwd="/", age=0,
                             wait="soon"))  # fmt: skip
    assert bad["ok"] is False and "wait" in bad["error"]


def test_clients_are_answered_while_others_hold_connections_idle(home: Path) -> None:
    start(home)
    good = request(home, op="recall", request={"prompt": PROMPT, "bank": "proj"})
    idle = []
    for _ in range(3):  # clients that connect and never send their line
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(socket_path(home)))
        idle.append(sock)
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: talk(home, good), range(4)))
        assert all(a["ok"] and "INKWELL_DB_PATH" in a["context"] for a in answers)
        # Answered while the idle clients still held their connections: the server had not
        # given up on them first (it would close them, and reading would give b"").
        for sock in idle:
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
    finally:
        for sock in idle:
            sock.close()


def test_a_server_for_another_database_is_not_used(home: Path, tmp_path: Path) -> None:
    """The database a hook would use is chosen by LAMINA_DATABASE_URL or the config file's
    database_url: a server opened on another one leaves the hook to the cold path, and one
    opened on the same one answers it."""
    config = tmp_path / "config.toml"
    config.write_text(f'database_url = "{tmp_path / "other.db"}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    started = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "warm", "start", "--json"],
        capture_output=True, text=True, timeout=120, env={**env, "LAMINA_CONFIG": str(config)},
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    # This hook has no config file: its database is the data directory's, where the memories are.
    result = hook(home, tmp_path, LAMINA_CONFIG=str(tmp_path / "none.toml"))
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and "another database" in timings["warm_unavailable"]
    # A hook given the server's config file is answered by it (that database has no bank proj).
    same = hook(home, tmp_path, LAMINA_CONFIG=str(config))
    assert same.returncode == 0 and same.stdout == ""
    timings = last_timings(home)
    assert timings["path"] == "warm" and timings["memories"] == 0
    # LAMINA_DATABASE_URL chooses as the config file does.
    url = hook(home, tmp_path, LAMINA_DATABASE_URL=str(tmp_path / "other.db"))
    assert url.returncode == 0 and last_timings(home)["path"] == "warm"
    lamina(home, "warm", "stop")


def test_a_server_using_another_embedder_is_not_used(home: Path, tmp_path: Path) -> None:
    """Vectors of one model do not compare with another's: a server started with another
    LAMINA_EMBEDDER (or config file `embedder`) leaves the hook to the cold path, and a hook
    choosing the same embedder is answered by it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    started = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "warm", "start", "--json"],
        capture_output=True, text=True, timeout=120, env={**env, "LAMINA_EMBEDDER": "hash"},
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    result = hook(home, tmp_path)
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and "another embedder" in timings["warm_unavailable"]
    config = tmp_path / "config.toml"
    config.write_text('embedder = "hash"\n')
    same = hook(home, tmp_path, LAMINA_CONFIG=str(config))
    assert same.returncode == 0 and "INKWELL_DB_PATH" in same.stdout  # lexical: other vectors
    assert last_timings(home)["path"] == "warm"
    lamina(home, "warm", "stop")


def test_the_server_exits_when_idle(home: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "lamina", "--home", str(home), "warm", "serve",
         "--idle-timeout", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert wait_until(lambda: socket_path(home).exists())
        assert server.wait(timeout=90) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    assert not socket_path(home).exists()
    assert "idle for 1s" in (home / "logs" / "hooks.log").read_text()


def test_a_second_server_for_the_same_directory_is_refused(home: Path) -> None:
    start(home)
    second = lamina(home, "warm", "serve", "--idle-timeout", "5")
    assert second.returncode != 0
    assert "already serves" in second.stderr and len(second.stderr.strip().splitlines()) == 1


def test_session_start_starts_the_server_when_asked(home: Path, tmp_path: Path) -> None:
    payload = {"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(tmp_path)}
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    environ.update({"LAMINA_HOME": str(home), "LAMINA_HOOK_WARM": "1"})
    result = subprocess.run(
        [sys.executable, "-m", "lamina", "hook"], input=json.dumps(payload),
        capture_output=True, text=True, env=environ, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == ""
    assert "warm server starting" in (home / "logs" / "hooks.log").read_text()
    assert wait_until(
        lambda: json.loads(lamina(home, "warm", "status", "--json").stdout)["running"], 90
    )
    assert last_timings_path(home, tmp_path) == "warm"


def test_a_socket_path_too_long_for_af_unix_falls_back(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * (SOCKET_PATH_LIMIT - len(str(tmp_path))))
    home = make_home(deep)
    assert len(str(socket_path(home))) > SOCKET_PATH_LIMIT
    started = lamina(home, "warm", "start")
    assert started.returncode != 0
    assert "too long for a unix socket" in started.stderr
    assert len(started.stderr.strip().splitlines()) == 1
    result = hook(home, tmp_path)
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and "too long" in timings["warm_unavailable"]


OLD_SERVER = """
import sys
from pathlib import Path
import lamina
lamina.__version__ = "0.0.1"  # as if installed before an upgrade
from lamina.integrations.claude_code.warm import serve_forever
serve_forever(Path(sys.argv[1]), 600)
"""


def test_a_server_left_by_an_upgrade_is_replaced(home: Path, tmp_path: Path) -> None:
    old = subprocess.Popen([sys.executable, "-c", OLD_SERVER, str(home)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert wait_until(lambda: "0.0.1" in lamina(home, "warm", "status").stdout)
        # The hook does not use it ...
        result = hook(home, tmp_path)
        assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
        timings = last_timings(home)
        assert timings["path"] == "cold" and "0.0.1" in timings["warm_unavailable"]
        # ... and starting the warm path replaces it with one of this version.
        status = start(home)
        assert old.wait(timeout=30) == 0
        assert status["pid"] != old.pid and status["version"] == __version__
        assert last_timings_path(home, tmp_path) == "warm"
    finally:
        if old.poll() is None:
            old.kill()
            old.wait(10)


def test_with_warm_on_a_prompt_that_finds_no_server_starts_one(home: Path, tmp_path: Path) -> None:
    first = hook(home, tmp_path, LAMINA_HOOK_WARM="1")
    assert first.returncode == 0 and "INKWELL_DB_PATH" in first.stdout
    timings = last_timings(home)
    assert timings["path"] == "cold" and isinstance(timings["warm_started"], int)
    assert wait_until(
        lambda: json.loads(lamina(home, "warm", "status", "--json").stdout)["running"], 90
    )
    second = hook(home, tmp_path, LAMINA_HOOK_WARM="1")
    assert second.returncode == 0 and "INKWELL_DB_PATH" in second.stdout
    assert last_timings(home)["path"] == "warm" and "warm_started" not in last_timings(home)


def stop_hook(home: Path, cwd: Path, transcript: Path, session: str) -> None:
    payload = {"hook_event_name": "Stop", "session_id": session, "cwd": str(cwd),
               "transcript_path": str(transcript)}  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    environ.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj"})
    result = subprocess.run(
        [sys.executable, "-m", "lamina", "hook"],
        input=json.dumps(payload), capture_output=True, text=True, env=environ, timeout=90,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def retains(home: Path) -> dict[str, int]:
    counts: dict[str, int] = json.loads(lamina(home, "warm", "status", "--json").stdout)["retains"]
    return counts


def session_memories(home: Path, session: str) -> int:
    bank = MemoryBank.open(home)
    try:
        return sum(m.document == session for m in bank.memories("proj", with_embeddings=False))
    finally:
        bank.close()


@pytest.mark.skipif(not shared_transcripts(), reason="../shared/data/claude-code is needed")
def test_the_warm_server_retains_each_turn_without_a_worker_process(
    home: Path, tmp_path: Path
) -> None:
    start(home)
    source = next(p for p in shared_transcripts() if p.name.startswith("obra-"))
    lines = source.read_text().splitlines(keepends=True)
    transcript = tmp_path / "live.jsonl"
    transcript.write_text("".join(lines[:100]))
    stop_hook(home, tmp_path, transcript, "live-session")
    assert wait_until(lambda: retains(home)["done"] == 1)
    first = session_memories(home, "live-session")
    assert first > 0
    # The next turn: only what was appended is read, and it is retained by the server too.
    with transcript.open("a") as out:
        out.write("".join(lines[100:200]))
    stop_hook(home, tmp_path, transcript, "live-session")
    assert wait_until(lambda: retains(home)["done"] == 2)
    assert session_memories(home, "live-session") > first
    log = (home / "logs" / "hooks.log").read_text()
    assert log.count("retain started by the warm server") == 2
    assert "retain started in the background" not in log  # no worker process was started
    assert retains(home) == {"queued": 0, "done": 2, "failed": 0}


@pytest.mark.skipif(not shared_transcripts(), reason="../shared/data/claude-code is needed")
def test_what_a_paused_session_said_is_not_retained_by_the_warm_server(
    home: Path, tmp_path: Path
) -> None:
    start(home)
    source = next(p for p in shared_transcripts() if p.name.startswith("obra-"))
    lines = source.read_text().splitlines(keepends=True)
    transcript = tmp_path / "live.jsonl"
    transcript.write_text("".join(lines[:100]))
    stop_hook(home, tmp_path, transcript, "live-session")
    assert wait_until(lambda: retains(home)["done"] == 1)
    before = session_memories(home, "live-session")
    paused = lamina(home, "pause", "--session", "live-session", "--bank", "proj")
    assert paused.returncode == 0, paused.stderr
    with transcript.open("a") as out:
        out.write("".join(lines[100:200]))
    stop_hook(home, tmp_path, transcript, "live-session")
    assert wait_until(lambda: retains(home)["done"] == 2)
    assert lamina(home, "resume", "--session", "live-session", "--bank", "proj").returncode == 0
    stop_hook(home, tmp_path, transcript, "live-session")
    assert wait_until(lambda: retains(home)["done"] == 3)
    # The stretch said while paused was skipped for good, even after resume.
    assert session_memories(home, "live-session") == before
