"""Text embeddings for the memory bank: one protocol, the bundled local models, a hash fallback,
and the names a setting chooses them by.

Every vector is stored with the `name` of the embedder that made it, so a bank notices when the
model changes and embeds again. Vectors are float32 rows of unit length, so cosine similarity is
a dot product (`lamina.embed.base`).

- `lamina.embed.bundled`: the models shipped in `lamina/data`, on onnxruntime; the default is
  all-MiniLM-L6-v2 ("minilm-l6"), the earlier default paraphrase-MiniLM-L3-v2 ("minilm-l3").
- `lamina.embed.hashed`: `HashEmbedder` ("hash"), numpy only, for tests and installs without
  the model; it matches spelling, not meaning.

`get_embedder(name)` builds one by name, `shared_embedder(name)` keeps one per process, and
`bank_embedder` picks the model a bank's vectors were made with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .base import Embedder, Vector, derived_window_vector, window_vector
from .bundled import (
    DEFAULT_MODEL,
    L3_MODEL,
    L6_MODEL,
    MiniLMEmbedder,
    MiniLML6Embedder,
    set_model_cache,
)

if TYPE_CHECKING:
    from .hashed import HashEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "L3_MODEL",
    "L6_MODEL",
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "MiniLML6Embedder",
    "Vector",
    "bank_embedder",
    "default_embedder",
    "derived_window_vector",
    "embedder_names",
    "get_embedder",
    "set_model_cache",
    "shared_embedder",
    "window_vector",
]


def __getattr__(name: str) -> Any:
    if name == "HashEmbedder":  # loaded on first use: a process with a model never needs it
        from .hashed import HashEmbedder

        return HashEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _hash_embedder() -> Embedder:
    from .hashed import HashEmbedder

    return HashEmbedder()


_DEFAULT_LOCK = threading.Lock()
_default: Embedder | None = None


def default_embedder() -> Embedder:
    """The process-wide default embedder (all-MiniLM-L6-v2, bundled; it loads on the first
    embed)."""
    global _default
    if _default is None:
        with _DEFAULT_LOCK:
            if _default is None:
                _default = MiniLML6Embedder()
    return _default


_REGISTRY: dict[str, Callable[[], Embedder]] = {
    "default": default_embedder,
    DEFAULT_MODEL: default_embedder,
    "minilm-l6": default_embedder,
    "all-minilm-l6-v2-int8@1": default_embedder,  # the earlier build (the `l6` extra's package)
    "minilm-l3": MiniLMEmbedder,
    L3_MODEL: MiniLMEmbedder,
    "hash": _hash_embedder,
    "hash-ngram@1": _hash_embedder,
}


def embedder_names() -> list[str]:
    """The names `get_embedder` accepts."""
    return list(_REGISTRY)


_SHARED: dict[str, Embedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(name: str) -> Embedder:
    """The embedder called `name`, one per process: banks opened with the same setting share
    its loaded model (`MemoryBank.open` uses it for LAMINA_EMBEDDER / the config file's
    `embedder`)."""
    with _SHARED_LOCK:
        found = _SHARED.get(name)
        if found is None:
            found = _SHARED[name] = get_embedder(name)
        return found


def get_embedder(name: str) -> Embedder:
    """The embedder called `name`: "default" (or "minilm-l6", the default model's name), "minilm-l3"
    (the 3-layer model, the earlier default) or "hash"."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(
            f"no embedder named {name!r}; choose one of: {', '.join(embedder_names())}"
        )
    return factory()


def bank_embedder(counts: Mapping[str, int]) -> Embedder:
    """The embedder for a bank whose vectors `counts` tallies (model name: memories), when none
    was chosen: the model that made most of them if it is still shipped, so that a bank keeps
    its model when an upgrade changes the default (its vectors stay searchable; `lamina reindex`
    moves it to the default); the default model for a new bank, a bank without vectors, or one
    the default embedded at least as much of."""
    best = DEFAULT_MODEL
    for name, count in counts.items():
        if count > counts.get(best, 0) and name in _REGISTRY and _named(name) == name:
            best = name
    return shared_embedder(best)


@cache
def _named(name: str) -> str:
    """The name of the vectors `get_embedder(name)` makes (an alias may make another's)."""
    return get_embedder(name).name
