"""What every embedder is: the `Embedder` protocol, its vectors (float32 rows of unit length,
so cosine similarity is a dot product) and the one rule for a window's vector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

__all__ = [
    "Embedder",
    "QueryVectors",
    "Vector",
    "check_texts",
    "derived_window_vector",
    "normalize",
    "window_vector",
]

Vector: TypeAlias = "npt.NDArray[np.float32]"


def window_vector(parts: Sequence[npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
    """A window's vector: the normalised mean of its turns' vectors (retain and reindex both
    use this, so a window ranks the same however its vector was made)."""
    mean = np.mean(np.stack(parts), axis=0)
    vector: npt.NDArray[np.float32] = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
    return vector


def derived_window_vector(
    parts: Sequence[npt.NDArray[np.float32] | None],
) -> npt.NDArray[np.float32] | None:
    """A window's vector from its turns' vectors, by the one rule retain and reindex share: their
    normalised mean (`window_vector`) when the window has turns and every one's vector is known;
    None otherwise, and the window's own text is embedded."""
    known = [part for part in parts if part is not None]
    return window_vector(known) if known and len(known) == len(parts) else None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 vectors of unit length. Implementations must be thread-safe."""

    @property
    def name(self) -> str:
        """Stable identifier of the model and its version ("paraphrase-minilm-l3-v2-int8@1")."""
        ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """One row per text, shape (len(texts), dim); empty strings are allowed."""
        ...

    def embed_query(self, text: str) -> Vector:
        """The vector to search documents with, shape (dim,)."""
        ...


class QueryVectors:
    """An embedder that answers the queries whose vectors it was given from those (`vectors`,
    by text) and hands everything else to `inner`: a recall timed or run after its query was
    embedded elsewhere does not embed it again."""

    def __init__(self, inner: Embedder, vectors: dict[str, Vector] | None = None) -> None:
        self.inner = inner
        self.vectors: dict[str, Vector] = {} if vectors is None else vectors

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        vector = self.vectors.get(text)
        if vector is not None:
            return vector.copy()
        return self.inner.embed_query(text)


def normalize(matrix: Vector) -> Vector:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.maximum(norms, np.float32(1e-12))
    return matrix


def check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts; use embed_query for one text")
