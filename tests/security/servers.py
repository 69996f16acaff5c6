"""Real `lamina serve` and `lamina mcp` processes on loopback for the security suite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_for(home: Path) -> dict[str, str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_DATABASE_URL", None)
    return env


def lamina(home: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = ("--database-url", db) if db else ()
    return subprocess.run([sys.executable, "-m", "lamina", *extra, *args], capture_output=True,
                          text=True, env=env_for(home), timeout=120)  # fmt: skip


def create_key(home: Path, name: str, bank: str, db: str | None = None) -> str:
    out = lamina(home, "keys", "create", name, "--bank", bank, "--new-bank", "--json", db=db)
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["key"])


def wait_for_port(port: int, proc: subprocess.Popen[Any], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError("the server did not start")


class Served:
    """A server process; `stop()` ends it (and only it)."""

    def __init__(self, home: Path, *args: str, db: str | None = None) -> None:
        self.home = home
        self.port = free_port()
        extra = ("--database-url", db) if db else ()
        self.log = home.parent / f"server-{self.port}.log"
        home.mkdir(parents=True, exist_ok=True)
        self._stderr = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lamina", *extra, *args, "--port", str(self.port)],
            env=env_for(home), stdout=subprocess.DEVNULL, stderr=self._stderr,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        wait_for_port(self.port, self.proc)

    @property
    def token(self) -> str:
        """The data directory's local token, which a server without API keys asks for."""
        return (self.home / "local-token").read_text().strip()

    def call(self, method: str, path: str, key: str | None = None, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        headers.update(kw.pop("headers", {}))
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=120, **kw)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._stderr.close()
        return self.log.read_text(errors="replace")
