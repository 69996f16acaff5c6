"""Low items of the hardening pass: data files for their owner only, the API description
without a key, 413 for an oversized chunked body, context logs kept by export and copy."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from lamina.bank.transfer import export_bank, import_bank
from lamina.store import open_store
from lamina.store.copy import copy_banks

from ..conftest import CC, EXAMPLE
from .servers import Served, create_key, lamina


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_data_directory_and_database_are_for_their_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = lamina(home, "retain", str(EXAMPLE), "--bank", "b")
    assert out.returncode == 0, out.stderr
    assert mode(home) == 0o700
    assert mode(home / "lamina.db") == 0o600
    assert all(mode(p) & 0o077 == 0 for p in home.glob("lamina.db*"))
    assert "readable by other users" not in out.stderr
    home.chmod(0o755)
    (home / "lamina.db").chmod(0o644)
    warned = lamina(home, "banks")
    assert warned.returncode == 0
    assert f"{home} (mode 0755) is readable by other users" in warned.stderr
    assert "lamina.db (mode 0644)" in warned.stderr


def test_api_description_is_public_and_chunked_oversized_bodies_get_413(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    home = tmp_path / "home"
    key = create_key(home, "a", "alpha")
    server = Served(home, "serve", "--max-body", "2048")
    try:
        # Decided: the API's description holds no bank data and is the same everywhere.
        for path in ("/openapi.json", "/docs"):
            assert server.call("GET", path).status_code == 200, path
        assert server.call("GET", "/v1/banks").status_code == 401

        def chunks() -> object:
            for _ in range(10):
                yield b'{"document": "d", "text": "' + b"x" * 1000
            yield b'"}'

        answer = httpx.post(f"{server.url}/v1/banks/alpha/retain", content=chunks(),
                            headers={"Authorization": f"Bearer {key}",
                                     "Content-Type": "application/json"}, timeout=60)  # fmt: skip
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["type"] == "too_large"
        small = httpx.post(f"{server.url}/v1/banks/alpha/retain",
                           content=iter([b'{"document": "d", ', b'"text": "a small note"}']),
                           headers={"Authorization": f"Bearer {key}",
                                    "Content-Type": "application/json"}, timeout=60)  # fmt: skip
        assert small.status_code == 200, small.text
    finally:
        server.stop()


def build_log(home: Path, tmp_path: Path) -> None:
    cc = CC()
    for n in range(60):
        cc.user(f"Question {n}: " + "what about the deployment details? " * 20)
        cc.assistant(f"Answer {n}: " + "the service runs behind a systemd unit. " * 20)
    path = cc.write(tmp_path / "long.jsonl")
    out = lamina(home, "compile", str(path), "--budget", "6000", "--bank", "b", "--log", "chat")
    assert out.returncode == 0, out.stderr
    out = lamina(home, "pin", "chat", "--bank", "b", "--messages", "0-3", "--raw")
    assert out.returncode == 0, out.stderr


def log_state(db: Path | str) -> tuple[object, ...]:
    store = open_store(db)
    (info,) = store.list_logs("b")
    return (
        [m.id for m in store.read_log("b", "chat")],
        sorted(s.id for s in store.load_summaries("b", "chat")),
        store.load_frontier("b", "chat"),
        store.load_pins("b", "chat"),
        info.created_at,
        info.updated_at,
        info.messages,
    )


def test_export_and_copy_keep_context_logs_and_their_times(tmp_path: Path, database: str) -> None:
    home = tmp_path / "home"
    build_log(home, tmp_path)
    source = home / "lamina.db"
    before = log_state(source)
    assert before[1], "the compile wrote summaries"
    exported = list(export_bank(open_store(source), "b", with_embeddings=False))
    counts = import_bank(open_store(database), exported)
    assert counts["logs"] == 1
    assert log_state(database) == before
    copied = tmp_path / "copied" / "lamina.db"
    copy_banks(open_store(database), open_store(copied))
    assert log_state(copied) == before
