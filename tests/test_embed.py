"""Embedders: the two bundled models, the default (all-MiniLM-L6) and the earlier default
(paraphrase-MiniLM-L3) (shapes, unit norms, determinism, meaning, batching, truncation, lazy
loading, no network), the choice of model for a bank, and the hash fallback."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from lamina.embed import (
    DEFAULT_MODEL,
    L3_MODEL,
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    bank_embedder,
    default_embedder,
    embedder_names,
    get_embedder,
)
from lamina.embed.bundled import MiniLML6Embedder
from lamina.errors import ConfigError

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's great! I painted a lake at sunrise last week.",
    "",
    "ok",
    "Melanie: My kids loved the camping trip. [shares an image: a tent by a river]",
    "user: which database did we pick for the notes API, and why?",
    "assistant: SQLite: one file, no server, and FTS5 for search.",
]


def run_python(code: str, *prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module", params=["default", "minilm-l3"])
def model(request: pytest.FixtureRequest) -> MiniLMEmbedder | MiniLML6Embedder:
    found = get_embedder(request.param)
    assert isinstance(found, MiniLMEmbedder | MiniLML6Embedder)
    return found


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_shapes_dtype_and_unit_norms(model: Embedder) -> None:
    matrix = model.embed_documents(TEXTS)
    assert matrix.shape == (len(TEXTS), model.dim) == (7, 384)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    query = model.embed_query("who went to a support group?")
    assert query.shape == (384,)
    assert query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    empty = model.embed_documents([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


def test_name_and_registry() -> None:
    model = default_embedder()
    assert model.name == DEFAULT_MODEL == "all-minilm-l6-v2-qint8@1"
    assert isinstance(model, Embedder)
    assert get_embedder("default") is model
    assert get_embedder(DEFAULT_MODEL) is model
    assert get_embedder("minilm-l6") is model
    earlier = get_embedder("minilm-l3")
    assert earlier.name == L3_MODEL == "paraphrase-minilm-l3-v2-int8@1"
    assert get_embedder(L3_MODEL).name == L3_MODEL
    hashed = get_embedder("hash")
    assert isinstance(hashed, HashEmbedder)
    assert hashed.name == "hash-ngram@1"
    assert set(embedder_names()) >= {"default", DEFAULT_MODEL, L3_MODEL, "hash"}
    with pytest.raises(ConfigError, match="no embedder named"):
        get_embedder("word2vec")


def test_a_bank_keeps_the_model_most_of_its_vectors_came_from() -> None:
    """After an upgrade changes the default, a bank goes on being searched with the model that
    embedded it (its vectors stay comparable) until `lamina reindex` moves it."""
    assert bank_embedder({}) is default_embedder()
    assert bank_embedder({L3_MODEL: 900, DEFAULT_MODEL: 100}).name == L3_MODEL
    assert bank_embedder({L3_MODEL: 500, DEFAULT_MODEL: 500}) is default_embedder()
    assert bank_embedder({"hash-ngram@1": 3}).name == "hash-ngram@1"
    # A model this version does not ship, or an alias whose vectors have another name.
    assert bank_embedder({"some-model@7": 50}) is default_embedder()
    assert bank_embedder({"all-minilm-l6-v2-int8@1": 50}) is default_embedder()


def test_deterministic_and_query_equals_document(model: Embedder) -> None:
    first = model.embed_documents(TEXTS)
    second = model.embed_documents(TEXTS)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(model.embed_query(TEXTS[0]), first[0], atol=1e-6)


def test_paraphrases_are_closer_than_unrelated_text(model: Embedder) -> None:
    pairs = [
        ("How old is your daughter?", "What age is your kid?", "The train leaves at noon."),
        (
            "I adopted a puppy last month.",
            "A few weeks ago I got a new dog.",
            "The quarterly report is due on Friday.",
        ),
        (
            "We chose PostgreSQL for the database.",
            "The team picked Postgres to store the data.",
            "She paints landscapes in the evening.",
        ),
    ]
    for anchor, paraphrase, unrelated in pairs:
        a, p, u = model.embed_documents([anchor, paraphrase, unrelated])
        assert cosine(a, p) > cosine(a, u) + 0.2, (anchor, cosine(a, p), cosine(a, u))


def test_batching_does_not_change_vectors(model: Embedder) -> None:
    texts = [*TEXTS, "word " * 300, "a much longer turn about hiking, lakes and dogs " * 3]
    batched = model.embed_documents(texts)
    one_by_one = np.stack([model.embed_query(t) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    for batch_size in (1, 2, 5):
        small = type(model)(batch_size=batch_size).embed_documents(texts)
        np.testing.assert_allclose(small, batched, atol=1e-5)


def test_long_text_is_truncated_to_the_model_length(model: Embedder) -> None:
    long, longer = model.embed_documents(["lake " * 300, "lake " * 5_000 + "mountain"])
    np.testing.assert_allclose(long, longer, atol=1e-6)  # both past 256 tokens


def test_rejects_a_bare_string_and_bad_options(
    model: MiniLMEmbedder | MiniLML6Embedder,
) -> None:
    with pytest.raises(TypeError):
        model.embed_documents("one text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        type(model)(batch_size=0)
    with pytest.raises(ValueError):
        type(model)(threads=0)


def test_loads_once_under_concurrent_first_use(model: MiniLMEmbedder | MiniLML6Embedder) -> None:
    from lamina.embed import bundled as embed

    embed._LOADED.pop((model.name, 1), None)
    embedders = [type(model)(threads=1) for _ in range(4)]
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work(e: MiniLMEmbedder | MiniLML6Embedder) -> None:
        try:
            results.append(e.embed_documents(TEXTS))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(e,)) for e in embedders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], atol=1e-6)
    loaded = embed._LOADED[model.name, 1]
    embedders[0].embed_query("again")
    assert embed._LOADED[model.name, 1] is loaded


def test_precise_int8_mode_gives_the_same_vectors(
    model: MiniLMEmbedder | MiniLML6Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processors without VNNI run onnxruntime's precise uint8 kernels; the vectors agree."""
    from lamina.embed import bundled as embed

    monkeypatch.setattr(embed, "_x86_without_vnni", lambda: True)
    monkeypatch.setattr(embed, "_LOADED", {})
    precise = type(model)(threads=1).embed_documents(TEXTS)
    np.testing.assert_allclose(precise, model.embed_documents(TEXTS), atol=1e-4)


def test_the_optimised_model_kept_on_disk_gives_the_same_vectors(
    model: MiniLMEmbedder | MiniLML6Embedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A process loads the model as an earlier one had onnxruntime optimise it (kept in the
    data directory's cache, with its sha256): the same vectors, bit for bit; a damaged file is
    made again."""
    from lamina.embed import bundled as embed

    cache = tmp_path / "cache"
    monkeypatch.setattr(embed, "_model_cache", None)
    monkeypatch.setattr(embed, "_LOADED", {})
    expected = type(model)(threads=1).embed_documents(TEXTS)
    for step in ("written", "read", "damaged"):
        if step == "damaged":
            (kept,) = cache.glob("*.onnx")
            kept.write_bytes(kept.read_bytes()[:1000])
        monkeypatch.setattr(embed, "_LOADED", {})
        embed.set_model_cache(cache)
        assert np.array_equal(type(model)(threads=1).embed_documents(TEXTS), expected), step
        # The model and its sha256, no partial file left.
        kept, digest = sorted(cache.iterdir())
        assert digest.name == kept.name + ".sha256"
        assert kept.stat().st_size > 1_000_000 and stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(digest.stat().st_mode) == 0o600


def test_importing_and_constructing_loads_nothing() -> None:
    code = (
        "import json, sys\n"
        "import lamina.embed as e\n"
        "m = e.default_embedder(); e.get_embedder('default'); e.MiniLMEmbedder(); m.name; m.dim\n"
        "print(json.dumps({k: k in sys.modules for k in ('onnxruntime', 'tokenizers')}))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"onnxruntime": False, "tokenizers": False}


def _no_network_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not available")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("unshare -n is not permitted here")
    return [unshare, "-n"]


def test_embeds_with_no_network_at_all() -> None:
    prefix = _no_network_prefix()
    code = (
        "import json\n"
        "from lamina.embed import default_embedder\n"
        "v = default_embedder().embed_documents(['no network here', ''])\n"
        "print(json.dumps({'shape': list(v.shape), 'norm': float((v * v).sum(1).min())}))\n"
    )
    done = run_python(code, *prefix)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["shape"] == [2, 384]
    assert abs(result["norm"] - 1.0) < 1e-4


# The hash embedder.


def test_hash_embedder_shapes_norms_and_name() -> None:
    h = HashEmbedder()
    assert (h.name, h.dim) == ("hash-ngram@1", 256)
    assert isinstance(h, Embedder)
    m = h.embed_documents([*TEXTS, "🙂🙂", "   ", "!!!"])
    assert m.shape == (10, 256)
    assert m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert h.embed_query("x").shape == (256,)
    assert h.embed_documents([]).shape == (0, 256)
    other = HashEmbedder(dim=64)
    assert (other.name, other.dim) == ("hash-ngram-64@1", 64)
    with pytest.raises(ValueError):
        HashEmbedder(dim=2)
    with pytest.raises(TypeError):
        h.embed_documents("one text")


def test_hash_embedder_matches_spelling() -> None:
    h = HashEmbedder()
    base, variant, unrelated = h.embed_documents(
        ["embedding models for memory", "Embeddings model for memories!", "the cat sat on a mat"]
    )
    assert cosine(base, variant) > 0.5
    assert cosine(base, variant) > cosine(base, unrelated) + 0.3
    np.testing.assert_allclose(h.embed_query("Same Words"), h.embed_query("same words"))


def test_hash_embedder_is_the_same_in_every_process() -> None:
    code = (
        "from lamina.embed import HashEmbedder\n"
        "print(HashEmbedder().embed_query('stable across processes').tobytes().hex())\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    here = HashEmbedder().embed_query("stable across processes").tobytes().hex()
    assert done.stdout.strip() == here


EDGE_TEXTS = [
    "", "ok", "Hello,   World!!", "tab\tsep\nnew\rline  end ", "ctrl\x01char\x7fjoin\x00s",
    "a\x0bb\x0cc\x1fd", "x" * 101, "y" * 100, "supercalifragilisticexpialidocious",
    "[CLS] inside", "[cls] lower", "a [MASK] b", "[UNK]", "##ing ## #", "naïve café", "🙂 ok",
    "snake_case_name and CamelCase", "1,234.56% of $7", "http://example.com/a?b=c&d=e#f",
    "don't e-mail ~`^|\\ {x}", "word " * 300, "qwxzv jjjjqqq zzzzzzyx", "ALL CAPS TEXT",
    "a\u4e00b x\u3400y p\U00020000q \uf900z \U0002f800w", "ΑΣ ΣΑ İstanbul Straße Ǆ",
    "naïve café — ok… → ✓ \u201cq\u201d \u2018x\u2019 • a·b €5 a→b", "a\u00a0b\u3000c\u2028d",
    "a\u200bb x\u0085y x\ufffdy \u00ad", "\uff26\uff55\uff4c \ufb01ne Å ½ ² ℃", "¿qué? «q»",
    "\U0002b820v \U0002b920u", "😀 🫠 ok", "Привет, мир! Ελληνικά. עברית. العربية",
    "e\u0301 n\u0303 x\u2029y",
]  # fmt: skip


def _real_texts() -> list[str]:
    from lamina.readers import read_transcript

    from .conftest import LOCOMO, shared_transcripts

    texts: list[str] = []
    for path in shared_transcripts():
        for message in read_transcript(str(path)).messages:
            texts.extend(str(getattr(b, "text", "") or "") for b in message.blocks)
    if LOCOMO.is_file():
        for sample in json.loads(LOCOMO.read_text(encoding="utf-8")):
            texts.extend(str(q.get("question", "")) for q in sample["qa"])
            conversation = sample["conversation"]
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    texts.extend(f"{t['speaker']}: {t['text']}" for t in turns)
    return [t for t in texts if t]


def test_the_light_tokenizer_gives_the_ids_of_tokenizers() -> None:
    """Queries are tokenized without the `tokenizers` package: the ids are the package's, on
    every text of the shared transcripts and LoCoMo and on edge cases (control characters,
    punctuation, accents, CJK, long and unknown words, truncation); only texts with a special
    token or a character newer than Unicode 3.2 are left to the package."""
    import tokenizers

    from lamina import wordpiece
    from lamina.embed import bundled as embed

    path = embed._DATA / embed._TOKENIZER_FILE
    reference = tokenizers.Tokenizer.from_str(path.read_text("utf-8"))
    reference.enable_truncation(max_length=embed._MAX_TOKENS)
    reference.no_padding()
    fast = embed._light_tokenizer()
    assert fast is not None
    texts = [t[: embed._MAX_CHARS] for t in [*EDGE_TEXTS, *_real_texts()]]
    expected = [e.ids for e in reference.encode_batch(texts)]
    compared = truncated = unknown = unicode = 0
    for text, ids in zip(texts, expected, strict=True):
        got = fast.encode(text)
        if got is None:
            newer = any(unicodedata.category(c) != unicodedata.ucd_3_2_0.category(c) for c in text)
            assert newer or any(s in text for s in wordpiece._SPECIAL), text[:200]
            continue
        assert got == ids, text[:200]
        compared += 1
        truncated += len(ids) == embed._MAX_TOKENS
        unknown += fast.unk in ids
        unicode += not text.isascii()
    assert compared >= 0.9 * len(texts) and compared >= len(EDGE_TEXTS) - 5
    assert truncated and unknown and unicode >= 8


def test_a_query_is_embedded_without_the_tokenizers_package() -> None:
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "import lamina.embed as e\n"
        "m = e.default_embedder()\n"
        "ascii = m.embed_query('which database did we pick, and why?')\n"
        "before = 'tokenizers' in sys.modules\n"
        "other = m.embed_query('quelle base de données avons-nous choisie ?')\n"
        "batch = m.embed_documents(['which database did we pick, and why?'] * 9)\n"
        "same = bool(np.allclose(ascii, batch[0], atol=1e-6))\n"
        "print(json.dumps({'before': before, 'after': 'tokenizers' in sys.modules,\n"
        "    'same': same, 'norm': float(other @ other)}))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["before"] is False and result["after"] is True and result["same"] is True
    assert abs(result["norm"] - 1) < 1e-4


def test_a_tokenizer_file_it_does_not_reproduce_is_refused(tmp_path: Path) -> None:
    from lamina import wordpiece
    from lamina.embed import bundled as embed

    spec = json.loads((embed._DATA / embed._TOKENIZER_FILE).read_text("utf-8"))
    spec["normalizer"]["lowercase"] = False  # a cased model: not what the module does
    path = tmp_path / "cased.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="not a tokenizer"):
        wordpiece.WordPiece(path, 128)
