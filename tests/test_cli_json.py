"""`--json` on the commands that lacked it (export, install, uninstall, keys revoke), and the
line `lamina serve` prints when it starts."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lamina import MemoryBank, read_message_list
from lamina.embed import HashEmbedder

from .conftest import EXAMPLE


def lamina(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=environment(tmp_path),
        cwd=tmp_path,
        timeout=120,
    )


def environment(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "LAMINA_HOME": str(tmp_path / "home"), "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}  # fmt: skip
    for key in ("LAMINA_BANK", "LAMINA_DATABASE_URL", "LAMINA_CONFIG"):
        env.pop(key, None)
    return env


def test_export_json_says_what_it_wrote(tmp_path: Path) -> None:
    bank = MemoryBank.open(tmp_path / "home", embedder=HashEmbedder())
    data = [{"role": "user", "content": "We chose PostgreSQL."}]
    bank.retain_messages(read_message_list(data).messages, "proj", "chat")
    bank.close()
    out = lamina(tmp_path, "export", "--bank", "proj", "-o", "proj.jsonl", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    written = (tmp_path / "proj.jsonl").read_bytes()
    assert report == {"bank": "proj", "output": "proj.jsonl",
                      "lines": written.count(b"\n"), "bytes": len(written)}  # fmt: skip
    to_stdout = lamina(tmp_path, "export", "--bank", "proj", "--json")
    assert to_stdout.returncode == 2
    assert json.loads(to_stdout.stdout)["error"]["message"].startswith("--json needs -o FILE")
    assert to_stdout.stderr.splitlines() == [
        "error: --json needs -o FILE (the export itself goes to stdout otherwise)"
    ]


def test_install_and_uninstall_json(tmp_path: Path) -> None:
    settings = str(tmp_path / "claude" / "settings.json")
    installed = lamina(tmp_path, "install", "claude-code", "--json")
    assert installed.returncode == 0, installed.stderr
    report = json.loads(installed.stdout)
    assert report["settings"] == settings and report["scope"] == "user"
    assert report["installed"] is True and isinstance(report["warnings"], list)
    removed = lamina(tmp_path, "uninstall", "claude-code", "--json")
    assert json.loads(removed.stdout) == {
        "target": "claude-code", "scope": "user", "settings": settings, "removed": True
    }  # fmt: skip
    again = lamina(tmp_path, "uninstall", "claude-code", "--json")
    assert json.loads(again.stdout)["removed"] is False


def test_keys_revoke_json_and_a_missing_key(tmp_path: Path) -> None:
    created = lamina(tmp_path, "keys", "create", "ci", "--bank", "proj", "--new-bank", "--json")
    assert created.returncode == 0, created.stderr
    revoked = lamina(tmp_path, "keys", "revoke", "ci", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout) == {"name": "ci", "revoked": True}
    missing = lamina(tmp_path, "keys", "revoke", "ci", "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout) == {
        "error": {"type": "not_found", "message": "no API key named 'ci' (see `lamina keys list`)"}
    }
    assert missing.stderr.splitlines() == ["error: no API key named 'ci' (see `lamina keys list`)"]


def test_serve_says_where_it_listens_once_it_can_recall(tmp_path: Path) -> None:
    """The model and the banks load before the server listens: the line comes after that, and
    the first recall answers from the bank."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    import httpx

    retained = subprocess.run(
        [sys.executable, "-m", "lamina", "retain", str(EXAMPLE), "--bank", "proj"],
        env=environment(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert retained.returncode == 0, retained.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "lamina", "serve", "--port", str(port)],
        env=environment(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "serve printed nothing within 60 s"
        line = proc.stderr.readline()
        assert line.startswith(f"lamina serve: listening on http://127.0.0.1:{port} ("), line
        token = (tmp_path / "home" / "local-token").read_text().strip()  # no API key: asked
        for _ in range(100):  # the socket opens just after the line
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/v1/banks/proj/recall",
                    json={"query": "which environment variable holds the database path?"},
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=60,
                )
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert answer.status_code == 200
        assert "INKWELL_DB_PATH" in json.dumps(answer.json()["results"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
