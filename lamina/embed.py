"""TEMPORARY stub (replaced by the embedder module being written): protocol + hash embedder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt


class Embedder(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def dim(self) -> int: ...
    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


class HashEmbedder:
    name = "hash-ngram@1"
    dim = 256

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"\w+", text.lower()):
                h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16)
                out[i, h % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            if n:
                out[i] /= n
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embed_documents([text])[0]


def default_embedder() -> Embedder:
    return HashEmbedder()
