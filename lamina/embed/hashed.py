"""`HashEmbedder` ("hash-ngram@1"): hashed words and character trigrams, numpy only. It is
deterministic and fast, for tests and for installs without the model; it matches spelling, not
meaning."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

from .base import Vector, check_texts, normalize

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1 << 16)
def _feature(feature: str) -> int:
    """A stable 64-bit hash of a feature (the same in every process, unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")


class HashEmbedder:
    """Hashed bag of words and character trigrams: deterministic, numpy only, no model.

    Each lowercased word adds weight 1 to one of `dim` buckets and each of its trigrams (with `<`
    and `>` marking the word's ends, so "embed" and "embeds" share most of them) adds 0.5, with a
    sign taken from the hash so that collisions cancel out on average. A text without word
    characters uses its characters instead; an empty text still gets a fixed unit vector.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError("dim must be at least 8")
        self.dim = dim
        self.name = "hash-ngram@1" if dim == 256 else f"hash-ngram-{dim}@1"

    def _add(self, row: Vector, feature: str, weight: float) -> None:
        h = _feature(feature)
        row[h % self.dim] += weight if (h >> 63) & 1 else -weight

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(out, texts, strict=True):
            lowered = text.lower()
            words = _WORD.findall(lowered) or [c for c in lowered if not c.isspace()]
            if not words:
                self._add(row, "\x00empty", 1.0)
            for word in words:
                self._add(row, "w:" + word, 1.0)
                if len(word) > 1:
                    marked = f"<{word}>"
                    for i in range(len(marked) - 2):
                        self._add(row, "c:" + marked[i : i + 3], 0.5)
        return normalize(out)

    def embed_query(self, text: str) -> Vector:
        vector: Vector = self.embed_documents([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"
