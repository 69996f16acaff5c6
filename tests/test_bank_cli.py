"""The bank commands as a user runs them, and the bank's moves: export, import, reindex."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.transfer import export_bank, import_bank
from lamina.embed import HashEmbedder, default_embedder
from lamina.errors import InputError
from lamina.readers.locomo import read_locomo_samples
from lamina.store.sqlite import SQLiteStore

from .conftest import EXAMPLE, LOCOMO

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")


def lamina(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_BANK", None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_retain_then_recall_the_example(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = lamina(home, "retain", str(EXAMPLE), "--bank", "ex", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)["files"][0]
    assert report["status"] == "retained" and report["new_records"] == 83
    again = json.loads(lamina(home, "retain", str(EXAMPLE), "--bank", "ex", "--json").stdout)
    assert again["files"][0]["status"] == "unchanged"
    result = lamina(
        home,
        "recall",
        "which environment variable holds the database path?",
        "--bank",
        "ex",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    top = data["results"][0]
    # The turn that names it is long enough to be cut into parts; the part holding the name
    # comes right after the short turn before it (the location "read from the environment").
    assert any("INKWELL_DB_PATH" in r["text"] for r in data["results"][:2])
    assert {"text", "score", "time", "document", "source", "channels"} <= set(top)
    assert top["document"] == "7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17"
    assert set(top["channels"]) <= {"dense", "lexical", "time"}
    block = lamina(home, "recall", "rate limiting", "--bank", "ex", "--block").stdout
    assert block.startswith("<lamina_memories>") and "rate" in block.lower()
    banks = json.loads(lamina(home, "banks", "--json").stdout)["banks"]
    assert [(b["bank"], b["documents"]) for b in banks] == [("ex", 1)]


def test_default_bank_follows_the_project_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "inkwell"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    out = lamina(home, "retain", str(EXAMPLE), "--json", cwd=project / "sub")
    bank = json.loads(out.stdout)["bank"]
    assert bank.startswith("inkwell-")
    listed = json.loads(lamina(home, "banks", "--json", cwd=project).stdout)
    assert listed["default"] == bank


def test_forget_and_errors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lamina(home, "retain", str(EXAMPLE), "--bank", "ex")
    missing = lamina(home, "recall", "x", "--bank", "nope")
    assert missing.returncode == 2 and "no bank named 'nope'" in missing.stderr
    both = lamina(home, "forget", "doc", "--memory", "m", "--bank", "ex")
    assert both.returncode == 2 and "exactly one" in both.stderr
    gone = json.loads(
        lamina(
            home, "forget", "7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17", "--bank", "ex", "--json"
        ).stdout
    )
    assert gone["memories_forgotten"] > 0
    assert json.loads(lamina(home, "documents", "--bank", "ex", "--json").stdout)["documents"] == []
    bad_date = lamina(home, "recall", "x", "--bank", "ex", "--since", "last tuesday")
    assert bad_date.returncode == 2 and "--since" in bad_date.stderr


def test_export_import_round_trip_with_and_without_vectors(tmp_path: Path) -> None:
    source = MemoryBank(SQLiteStore(tmp_path / "a.db"), HashEmbedder())
    source.retain_file(EXAMPLE, "ex", tags=["demo"])
    lines = list(export_bank(source.store, "ex"))
    target = MemoryBank(SQLiteStore(tmp_path / "b.db"), HashEmbedder())
    counts = import_bank(target.store, lines)
    assert counts["memories"] == source.stats("ex").memories
    assert target.stats("ex").records == source.stats("ex").records
    before = {m.id: (m.text, m.record_ids, m.embedder) for m in source.memories("ex")}
    after = {m.id: (m.text, m.record_ids, m.embedder) for m in target.memories("ex")}
    assert before == after
    # Importing again changes nothing; retaining the same file again is "unchanged".
    import_bank(target.store, lines)
    assert target.stats("ex").records == source.stats("ex").records
    assert target.retain_file(EXAMPLE, "ex").status == "unchanged"
    bare = MemoryBank(SQLiteStore(tmp_path / "c.db"), HashEmbedder())
    import_bank(bare.store, export_bank(source.store, "ex", with_embeddings=False), bank="copy")
    assert bare.stats("copy").embedded == 0
    assert bare.reindex("copy") == bare.stats("copy").memories
    assert bare.recall("database path variable", "copy").hits
    with pytest.raises(InputError, match="not a Lamina export"):
        import_bank(bare.store, [b'{"type": "memory"}\n'])


def test_a_changed_embedder_is_detected_and_reindex_fixes_it(tmp_path: Path) -> None:
    db = tmp_path / "db"
    old = MemoryBank(SQLiteStore(db), HashEmbedder())
    old.retain_file(EXAMPLE, "ex")
    new = MemoryBank(SQLiteStore(db), default_embedder())
    result = new.recall("which database did we choose?", "ex")
    assert result.hits and all("dense" not in h.channels for h in result.hits)
    assert new.reindex("ex") == new.stats("ex").memories
    assert dict(new.stats("ex").embedders) == {new.embedder.name: new.stats("ex").memories}
    again = new.recall("which database did we choose?", "ex")
    assert any("dense" in h.channels for h in again.hits)


def test_reindexed_vectors_are_those_retain_makes(tmp_path: Path) -> None:
    """A bank embedded again with another model holds, memory for memory, the vectors a bank
    retained with that model holds (windows: their turns' mean), written in several parts,
    with progress told; a reindex interrupted halfway is finished by the next one."""
    sample = next(s for s in read_locomo_samples(str(LOCOMO)) if s.sample_id == "conv-26")
    messages = [m for session in sample.sessions[:3] for m in session.messages]
    model = HashEmbedder(dim=128)
    direct = MemoryBank(SQLiteStore(tmp_path / "direct.db"), model)
    direct.retain_messages(messages, "ex", "conv-26")
    want = {m.id: m.embedding for m in direct.memories("ex")}
    assert any(m.kind == "window" for m in direct.memories("ex"))
    db = tmp_path / "switched.db"
    MemoryBank(SQLiteStore(db), HashEmbedder()).retain_messages(messages, "ex", "conv-26")
    switched = MemoryBank(SQLiteStore(db), model)
    told: list[tuple[str, int, int]] = []
    switched.progress = lambda stage, done, total: told.append((stage, done, total))
    real = switched.store.set_embeddings
    calls: list[int] = []

    def fail_second_write(
        bank: str, vectors: Mapping[str, Any], embedder: str, **given: Any
    ) -> int:
        calls.append(len(vectors))
        if len(calls) == 2:
            raise OSError("disk full")
        return real(bank, vectors, embedder, **given)

    with (
        patch("lamina.bank.bank._REINDEX_WRITE", 5),
        patch.object(switched.store, "set_embeddings", side_effect=fail_second_write),
        pytest.raises(OSError, match="disk full"),
    ):
        switched.reindex("ex")
    first = dict(switched.stats("ex").embedders)
    assert 0 < first.get(model.name, 0) < len(want)  # the first write stands
    assert switched.reindex("ex") == len(want) - first[model.name]
    got = {m.id: m.embedding for m in switched.memories("ex")}
    assert got.keys() == want.keys()
    for memory_id, vector in want.items():
        assert np.array_equal(got[memory_id], vector), memory_id
    assert told[-1] == ("embedding", len(want) - first[model.name], len(want) - first[model.name])
    assert dict(switched.stats("ex").embedders) == {model.name: len(want)}
    assert switched.reindex("ex") == 0
