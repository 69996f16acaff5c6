"""Another local user: the data directory is for its owner only, whoever creates it, and
what Lamina trusts there (the warm server's socket, the cached model) is checked for its owner
and mode before use (design invariants 9 and 13)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from lamina import __version__
from lamina.integrations.claude_code.warm_client import PROTOCOL, answer_hook

from ..conftest import EXAMPLE

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    env.update({"LAMINA_HOME": str(home), "LAMINA_BANK": "proj", "LAMINA_HOOK_TIME_LIMIT": "30"})
    return env


def hook(home: Path, payload: dict[str, str]) -> None:
    ran = subprocess.run([sys.executable, "-m", "lamina", "hook"], input=json.dumps(payload),
                         env=environment(home), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def exposed(top: Path) -> list[str]:
    """Every folder under `top` (itself included) not 0700 and every file not 0600."""
    found = []
    for path in [top, *sorted(top.rglob("*"))]:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) and mode != wanted:
            found.append(f"{path} {mode:04o}")
    return found


def wait_for(check: Callable[[], bool], seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_a_data_directory_made_by_the_hook_is_for_its_owner_only(tmp_path: Path) -> None:
    top = tmp_path / "data"  # missing too: made by the hook as well
    home = top / "lamina"
    event = {"session_id": "s-1", "cwd": str(tmp_path), "transcript_path": str(EXAMPLE)}
    with umask(0o022):
        hook(home, {**event, "hook_event_name": "SessionStart"})
        hook(home, {**event, "hook_event_name": "UserPromptSubmit", "prompt": "which database?"})
        hook(home, {**event, "hook_event_name": "Stop"})  # a detached worker retains
        log = home / "logs" / "hooks.log"
        assert wait_for(lambda: " new records" in log.read_text()), log.read_text()
    assert (home / "lamina.db").exists() and (home / "sessions").is_dir()
    assert (home / "locks").is_dir() and (home / "cache").is_dir()
    assert exposed(top) == []


def test_a_data_directory_made_by_warm_start_is_for_its_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "data" / "lamina"
    run = [sys.executable, "-m", "lamina", "--home", str(home), "warm"]
    with umask(0o022):
        started = subprocess.run([*run, "start", "--json", "--idle-timeout", "60"],
                                 env=environment(home), capture_output=True, text=True,
                                 timeout=180)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        socket_file = home / "run" / "warm.sock"
        assert stat.S_IMODE(socket_file.lstat().st_mode) == 0o600
        assert exposed(tmp_path / "data") == []
    finally:
        stopped = subprocess.run([*run, "stop"], env=environment(home), capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
        if stopped.returncode != 0:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((home / "run" / "warm.pid").read_text()), signal.SIGKILL)
    assert exposed(tmp_path / "data") == []


def test_a_link_planted_for_a_log_is_not_written_through(tmp_path: Path) -> None:
    from lamina.integrations.claude_code.contract import HookLog

    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    (tmp_path / "home" / "logs").mkdir(parents=True)
    (tmp_path / "home" / "logs" / "hooks.log").symlink_to(victim)
    HookLog(tmp_path / "home").write("Stop", "s", "a line")
    assert victim.read_text() == "untouched\n"


# -- the warm server's socket --------------------------------------------------------------


class Listener:
    """A server on `<home>/run/warm.sock` that answers every request as a warm server would
    and keeps what it received: who listens there sees the prompts."""

    def __init__(self, home: Path) -> None:
        self.run = home / "run"
        self.run.mkdir(parents=True, mode=0o700)
        self.path = self.run / "warm.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.path.chmod(0o600)
        self.sock.listen(8)
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(1 << 20))
                answer = {"v": PROTOCOL, "version": __version__, "ok": True, "output": "planted"}
                conn.sendall(json.dumps(answer).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()


def ask_hook(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str | None, str]:
    monkeypatch.setenv("LAMINA_CONFIG", str(home.parent / "no-config.toml"))
    payload = {"hook_event_name": "UserPromptSubmit", "prompt": "the secret plan", "cwd": "/"}
    return answer_hook(json.dumps(payload), str(home), __version__)


def make_socket_foreign(listener: Listener) -> None:
    os.chown(listener.path, 65534, 65534, follow_symlinks=False)


def make_folder_foreign(listener: Listener) -> None:
    os.chown(listener.run, 65534, 65534)


def make_folder_open(listener: Listener) -> None:
    listener.run.chmod(0o755)


def make_socket_writable(listener: Listener) -> None:
    listener.path.chmod(0o666)


def make_folder_a_link(listener: Listener) -> None:
    real = listener.run.with_name("elsewhere")
    listener.run.rename(real)
    listener.run.symlink_to(real)


UNTRUSTED = [make_folder_open, make_socket_writable, make_folder_a_link]
if os.getuid() == 0:  # only root can give a file away: another user's socket or folder
    UNTRUSTED += [make_socket_foreign, make_folder_foreign]


@pytest.mark.parametrize("spoil", UNTRUSTED, ids=lambda f: f.__name__)
def test_the_hook_sends_nothing_to_a_socket_it_cannot_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: Callable[[Listener], None]
) -> None:
    home = tmp_path / "home"
    listener = Listener(home)
    try:
        output, _ = ask_hook(home, monkeypatch)
        assert output == "planted"  # the user's own socket is used
        listener.received.clear()
        spoil(listener)
        output, reason = ask_hook(home, monkeypatch)
        assert output is None and "not trusted" in reason, reason
        time.sleep(0.1)
        assert listener.received == []
    finally:
        listener.close()


# -- the cached optimised model ------------------------------------------------------------

TEXTS = ["the notes API listens on port 8040", "which database did we choose, and why?"]


def tamper_content(kept: Path, other: bytes) -> None:
    kept.write_bytes(other)  # the sha256 beside it no longer matches


def tamper_mode(kept: Path, other: bytes) -> None:
    kept.write_bytes(other)
    (kept.parent / (kept.name + ".sha256")).write_text(hashlib.sha256(other).hexdigest())
    kept.chmod(0o666)


def tamper_folder(kept: Path, other: bytes) -> None:
    tamper_mode(kept, other)
    kept.chmod(0o600)
    kept.parent.chmod(0o777)


def tamper_owner(kept: Path, other: bytes) -> None:
    tamper_mode(kept, other)
    kept.chmod(0o644)
    os.chown(kept, 65534, 65534)


TAMPERED = [tamper_content, tamper_mode, tamper_folder]
if os.getuid() == 0:
    TAMPERED.append(tamper_owner)


@pytest.mark.parametrize("tamper", TAMPERED, ids=lambda f: f.__name__)
def test_a_cached_model_is_loaded_only_when_it_is_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tamper: Callable[[Path, bytes], None]
) -> None:
    """Another valid model (here the other bundled one, optimised) put in place of the kept
    one must not be loaded: the vectors stay those of the right model."""
    from lamina.embed import bundled as embed
    from lamina.embed.bundled import MiniLML6Embedder

    cache = tmp_path / "cache"
    monkeypatch.setattr(embed, "_LOADED", {})
    monkeypatch.setattr(embed, "_model_cache", cache)
    expected = embed.MiniLMEmbedder(threads=1).embed_documents(TEXTS)
    MiniLML6Embedder(threads=1).embed_documents(TEXTS)
    (kept,) = cache.glob(f"{embed.L3_MODEL.replace('@', '-')}*.onnx")
    (other,) = (p for p in cache.glob("*.onnx") if p != kept)
    tamper(kept, other.read_bytes())
    monkeypatch.setattr(embed, "_LOADED", {})
    assert np.array_equal(embed.MiniLMEmbedder(threads=1).embed_documents(TEXTS), expected)


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")
def test_an_export_is_for_its_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = [sys.executable, "-m", "lamina", "--home", str(home)]
    env = environment(home)
    retained = subprocess.run([*run, "retain", str(EXAMPLE), "--bank", "proj"], env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert retained.returncode == 0, retained.stderr
    out = tmp_path / "proj.jsonl"
    with umask(0o022):
        exported = subprocess.run([*run, "export", "--bank", "proj", "-o", str(out)], env=env,
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert b"database" in out.read_bytes()
