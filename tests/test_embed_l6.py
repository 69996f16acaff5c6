"""The default embedder, all-MiniLM-L6-v2 static int8 (`minilm-l6`): named apart from the earlier
default (the 3-layer model), unit vectors that carry meaning and do not depend on the batch or
the run, the name stored with its vectors, a bank of the earlier L6 build's vectors reindexed, a
bank of the earlier default's vectors searched with that model until reindexed, and a bank that
recalls a reworded turn with it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.recall import RecallOptions
from lamina.cli.status import model_warnings
from lamina.embed import (
    DEFAULT_MODEL,
    L3_MODEL,
    HashEmbedder,
    MiniLMEmbedder,
    Vector,
    default_embedder,
    embedder_names,
    get_embedder,
)
from lamina.embed.bundled import L6_MODEL, MiniLML6Embedder, _load, _token_ids
from lamina.messages import Kind, Message, Role, TextBlock
from lamina.readers import read_messages
from lamina.readers.locomo import read_locomo_samples
from lamina.store.sqlite import SQLiteStore
from lamina.turns import conversational_text

from .conftest import CLAUDE_CODE, EXAMPLE, LOCOMO, needs_shared

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's great! I painted a lake at sunrise last week.",
    "",
    "assistant: SQLite: one file, no server, and FTS5 for search.",
    "user: which database did we pick for the notes API, and why? " * 30,  # past 256 tokens
    "🙂 Привет, как дела? 日本語のテキスト",
]


@needs_shared
@pytest.mark.parametrize("kind", [MiniLML6Embedder, MiniLMEmbedder])
def test_many_texts_get_the_same_vectors_however_many_threads_embed_them(
    kind: type[MiniLMEmbedder],
) -> None:
    """Batches run side by side on the available cores; a bank's vectors stay the same bit for
    bit as one thread makes them, so retain, reindex and another machine agree."""
    sample = next(iter(read_locomo_samples(str(LOCOMO))))
    texts = [f"{m.speaker}: {m.text}" for session in sample.sessions for m in session.messages]
    one = kind(threads=1).embed_documents(texts)
    two = kind(threads=2).embed_documents(texts)
    assert len(texts) > 8 * kind().batch_size  # several batches each way
    assert np.array_equal(one, two)


def test_is_named_apart_and_loads_nothing_until_used() -> None:
    assert {"minilm-l6", L6_MODEL} <= set(embedder_names())
    embedder = get_embedder("minilm-l6")
    assert isinstance(embedder, MiniLML6Embedder)
    assert embedder is default_embedder()
    assert embedder.name == L6_MODEL == DEFAULT_MODEL == "all-minilm-l6-v2-qint8@1" != L3_MODEL
    assert embedder.dim == 384
    # The earlier build's name (the `l6` extra's package) chooses this model now.
    assert get_embedder("all-minilm-l6-v2-int8@1").name == L6_MODEL
    with pytest.raises(ValueError, match="batch_size"):
        MiniLML6Embedder(batch_size=0)
    code = (
        "import json, sys\n"
        "from lamina.embed import get_embedder\n"
        "e = get_embedder('minilm-l6'); e.name; e.dim\n"
        "print(json.dumps({k: k in sys.modules for k in ('onnxruntime', 'tokenizers')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == {"onnxruntime": False, "tokenizers": False}, done.stderr


@needs_shared
def test_long_texts_get_their_whole_batchs_vectors_though_run_a_pair_of_rows_at_a_time() -> None:
    """Batches of long texts run two rows at a time (an odd last three together), padded to
    the batch's width, so that a retain holds a quarter of their activations: the vectors are
    those the whole batch gives, bit for bit, so vectors stored before stay valid."""
    path = CLAUDE_CODE / "obra-long-conversation.jsonl"
    said = [conversational_text(m) for m in read_messages(str(path))]
    texts = [text for text in said if len(text) > 1000][:13]  # a batch of 8, one of 5
    assert len(texts) == 13
    embedder = MiniLML6Embedder(threads=1)
    session = _load(1, embedder._model).session
    ids = _token_ids(texts, embedder._model.max_tokens)
    assert min(len(row) for row in ids) > 128  # every batch is a wide one
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    whole = np.zeros((len(texts), 384), dtype=np.float32)
    for start in range(0, len(order), 8):
        rows = order[start : start + 8]
        width = max(len(ids[i]) for i in rows)
        batch = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            batch[r, : len(ids[i])] = ids[i]
            mask[r, : len(ids[i])] = 1
        feed = {"input_ids": batch, "attention_mask": mask}
        whole[rows] = session.run(["sentence_embedding"], feed)[0]
    whole /= np.linalg.norm(whole, axis=1, keepdims=True)
    assert np.array_equal(embedder.embed_documents(texts), whole)


def test_unit_vectors_that_carry_meaning_whatever_the_batch() -> None:
    embedder = MiniLML6Embedder()
    matrix = embedder.embed_documents(TEXTS)
    assert matrix.shape == (len(TEXTS), 384)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([embedder.embed_query(text) for text in TEXTS])
    np.testing.assert_allclose(one_by_one, matrix, atol=1e-5)
    for batch_size in (1, 2, 5):
        small = MiniLML6Embedder(batch_size=batch_size, threads=1).embed_documents(TEXTS)
        np.testing.assert_allclose(small, matrix, atol=1e-5)
    query = embedder.embed_query("Who attended a support meeting for gay and trans people?")
    assert int(np.argmax(matrix @ query)) == 0
    # Not the earlier default's vectors: another model, another space.
    earlier = get_embedder("minilm-l3").embed_documents(TEXTS)
    assert float(np.min(np.sum(earlier * matrix, axis=1))) < 0.9


def test_the_same_vectors_in_another_process() -> None:
    code = (
        "import json, sys\n"
        "from lamina.embed import get_embedder\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps(get_embedder('minilm-l6').embed_documents(texts).tolist()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(TEXTS),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    there = np.array(json.loads(done.stdout), dtype=np.float32)
    np.testing.assert_allclose(there, MiniLML6Embedder().embed_documents(TEXTS), atol=1e-6)


class _EarlierBuild:
    """Stands for the earlier L6 build (its package is not installed here): its name, any
    384-d vectors."""

    name = "all-minilm-l6-v2-int8@1"
    dim = 384

    def __init__(self) -> None:
        self._hash = HashEmbedder(dim=384)

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        return self._hash.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        return self._hash.embed_query(text)


def test_its_name_is_stored_with_its_vectors_and_an_earlier_builds_are_reindexed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "lamina.db"
    earlier = MemoryBank(SQLiteStore(db), _EarlierBuild())
    earlier.retain_file(EXAMPLE, "ex")
    count = earlier.stats("ex").memories
    assert dict(earlier.stats("ex").embedders) == {"all-minilm-l6-v2-int8@1": count}
    earlier.close()
    bank = MemoryBank(SQLiteStore(db), get_embedder("minilm-l6"))
    result = bank.recall("which database did we choose?", "ex")
    assert result.hits and all("dense" not in hit.channels for hit in result.hits)
    assert bank.reindex("ex") == count
    assert dict(bank.stats("ex").embedders) == {L6_MODEL: count}
    again = bank.recall("which database did we choose?", "ex")
    assert any("dense" in hit.channels for hit in again.hits)
    assert bank.reindex("ex") == 0  # nothing left to do
    bank.close()


def test_a_bank_of_the_earlier_default_keeps_its_model_until_reindexed(tmp_path: Path) -> None:
    """An upgrade that changes the default model does not leave a bank's vectors unsearchable:
    a bank the 3-layer model embedded is still retained into and searched by meaning with that
    model, `lamina status` says how to move it, and a reindex moves it to the default."""
    db = tmp_path / "lamina.db"
    before = MemoryBank(SQLiteStore(db), get_embedder("minilm-l3"))  # the earlier default
    before.retain_file(EXAMPLE, "ex")
    count = before.stats("ex").memories
    before.close()
    upgraded = MemoryBank(SQLiteStore(db))  # nothing configured: the bank's own model
    assert upgraded.embedder_for("ex").name == L3_MODEL
    assert upgraded.embedder_for("new-bank").name == DEFAULT_MODEL
    hits = upgraded.recall("which database did we choose?", "ex").hits
    assert any("dense" in hit.channels for hit in hits)
    later = [
        Message("u1", Role.USER, (TextBlock("Which port does the API use?"),), Kind.PROMPT),
        Message("a1", Role.ASSISTANT, (TextBlock("Port 8321, in serve.toml."),), Kind.REPLY),
    ]
    upgraded.retain_messages(later, "ex", "later-chat")
    embedders = dict(upgraded.stats("ex").embedders)
    assert embedders == {L3_MODEL: embedders[L3_MODEL]} and embedders[L3_MODEL] > count
    (line,) = model_warnings("ex", embedders, None)
    assert "lamina reindex --bank ex" in line and DEFAULT_MODEL in line
    assert model_warnings("ex", embedders, L3_MODEL) == []  # chosen: nothing to say
    assert upgraded.reindex("ex") == embedders[L3_MODEL]
    assert upgraded.embedder_for("ex").name == DEFAULT_MODEL
    assert dict(upgraded.stats("ex").embedders) == {DEFAULT_MODEL: embedders[L3_MODEL]}
    again = upgraded.recall("which database did we choose?", "ex").hits
    assert any("dense" in hit.channels for hit in again)
    assert model_warnings("ex", dict(upgraded.stats("ex").embedders), None) == []
    upgraded.close()


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
    assert dict(stats.embedders) == {L6_MODEL: stats.memories}
