"""Damaged and hostile input: deep nesting, NUL bytes, FIFOs; and reindex gives windows the
vectors retain gives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.transfer import export_bank, import_bank
from lamina.embed import HashEmbedder
from lamina.store import open_store

from ..conftest import CC
from .servers import env_for


def run(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lamina", "--home", str(home), *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=env_for(home), timeout=timeout
    )


def nested(depth: int) -> str:
    """JSON text nested `depth` levels deep (objects and arrays)."""
    return '{"a":[' * (depth // 2) + '"bottom"' + "]}" * (depth // 2)


def deep_transcript(path: Path, depth: int) -> Path:
    cc = CC()
    cc.user("Please run the deep tool.")
    cc.tool_use("t1", name="Deep", payload="DEEP")
    cc.tool_result("t1", "done")
    cc.assistant("It ran.")
    cc.user("And the port?")
    cc.assistant("8040.")
    text = "\n".join(cc.lines()).replace('"DEEP"', nested(depth))
    path.write_text(text + "\n")
    return path


@pytest.mark.parametrize("depth", [254, 300, 1000])
def test_deep_tool_input_gives_no_traceback_in_the_cli(tmp_path: Path, depth: int) -> None:
    path = deep_transcript(tmp_path / "deep.jsonl", depth)
    home = tmp_path / "home"
    for args in (["show", str(path)], ["turns", str(path)],
                 ["compile", str(path), "--budget", "4000"],
                 ["compile", str(path), "--budget", "4000", "--bank", "b"],
                 ["retain", str(path), "--bank", "b"], ["recall-query", str(path)]):  # fmt: skip
        out = run(home, *args)
        assert "Traceback" not in out.stderr, (args, out.stderr[-2000:])
        assert out.returncode == 0, (args, out.stderr[-500:])
    assert "8040" in run(home, "recall", "which port?", "--bank", "b", "--full").stdout


def test_deep_messages_over_http_get_no_5xx(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lamina.integrations.http import create_app

    memory = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    app = create_app(memory=memory)
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False,
                        headers={"Authorization": f"Bearer {app.state.gate.token}"})  # fmt: skip
    for depth in (254, 255, 600, 1000, 5000):
        said = json.dumps([
            {"role": "user", "content": "hi there"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": "DEEP"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]).replace('"DEEP"', '{"a":' * depth + '"x"' + "}" * depth)  # fmt: skip
        for path, body in (
            ("/v1/banks/b/retain", json.dumps({"document": f"d{depth}", "messages": "M"})),
            ("/v1/compile", json.dumps({"messages": "M", "budget": 4000, "reserve": 500})),
            ("/v1/banks/b/logs/l/messages", json.dumps({"messages": "M"})),
        ):
            body = body.replace('"M"', said)
            answer = client.post(path, content=body,
                                 headers={"content-type": "application/json"})  # fmt: skip
            assert answer.status_code < 500, (depth, path, answer.text[:300])
            if depth <= 600:
                assert answer.status_code == 200, (depth, path, answer.text[:300])


def test_a_stray_nul_byte_does_not_make_a_transcript_binary(tmp_path: Path) -> None:
    cc = CC()
    cc.user("First prompt about the port.")
    cc.assistant("The port is 8040.")
    cc.user("Second prompt about the database.")
    cc.assistant("SQLite.")
    lines = [line.encode() for line in cc.lines()]
    lines.insert(1, b'{"type": "user", "message": "bro\x00ken"}')
    path = tmp_path / "nul.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    home = tmp_path / "home"
    out = run(home, "turns", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)) == 2
    assert "nul.jsonl:2" in out.stderr
    assert run(home, "retain", str(path), "--bank", "b").returncode == 0
    binary = tmp_path / "image.jsonl"
    binary.write_bytes(bytes(range(256)) * 40)
    out = run(home, "show", str(binary))
    assert out.returncode == 2 and "binary" in out.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_with_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    home = tmp_path / "home"
    for args in (["show", str(fifo)], ["turns", str(fifo)], ["recall-query", str(fifo)],
                 ["retain", str(fifo), "--bank", "b"],
                 ["compile", str(fifo), "--budget", "4000"]):  # fmt: skip
        out = run(home, *args, timeout=30)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.strip().count("\n") == 0 and "not a regular file" in out.stderr


def test_reindex_gives_windows_the_vectors_retain_gives(tmp_path: Path) -> None:
    store = open_store(tmp_path / "lamina.db")
    bank = MemoryBank(store, HashEmbedder())
    cc = CC()
    for n in range(12):
        cc.user(f"Question {n}: where does service {n} keep its state file?")
        cc.assistant(f"Service {n} keeps it in /var/lib/service-{n}/state.db, backed up nightly.")
    bank.retain_file(cc.write(tmp_path / "s.jsonl"), "orig")
    exported = list(export_bank(store, "orig", with_embeddings=False))
    import_bank(store, exported, bank="copy")
    assert bank.reindex("copy") > 0
    original = {m.id: m for m in bank.memories("orig")}
    copied = {m.id: m for m in bank.memories("copy")}
    windows = [i for i, m in original.items() if m.kind == "window"]
    assert len(windows) >= 10
    for memory_id in windows:
        a, b = original[memory_id].embedding, copied[memory_id].embedding
        assert a is not None and b is not None
        assert np.allclose(a, b, atol=1e-6)
    for n in range(10):
        query = f"state file of service {n}"
        ranks = [[h.memory.id for h in bank.recall(query, name).hits] for name in ("orig", "copy")]
        assert ranks[0] == ranks[1]
