"""Calibrated fusion: recall's channels combined by a small logistic model, not by hand.

Each memory a channel proposed gets a few features from the channels (its lexical and dense
scores, min-max normalised over the candidates; its time and entity scores) and, for the best
`RERANK` of them, a few from the memory itself: its kind (a chat's `line` or `window`, an agent
session's `turn`, `part` or `activity`), whether it restates (a compaction summary's part), its
length, and whether its speaker is the participant the query names (the speaker is a signal,
never a filter). Each is a comparison or two on a memory already read: the prompt path costs
what it did. The score is the model's log-odds that the memory holds what the query asks about.

The coefficients ship in `lamina/data/fusion*.json`, one model per embedder (each file names the
embedder whose vectors it was fitted with; `fusion-minilm-l6.json` is the default embedder's,
and the one recall falls back to for an embedder without its own). They were fitted on
synthetic questions made from the shared conversations' own turns (a few of a turn's words,
often its speaker's name, in a question frame; that turn relevant), never on a benchmark's
questions or answers. `lamina bench fusion [--embedder NAME] --write` fits them again,
reproducibly (fixed seed), with numpy alone, on those and on questions made from the shared
agent sessions' statements (lamina.bench.fusion); the shipped files keep their earlier
coefficients, with the coding kinds at 0, because those refits were no better on the tuning
halves of the real coding questions and lower on LoCoMo dev (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..errors import ReadError
from ..memories import Memory
from ..text.entities import extract_entities
from ..text.units import SUMMARY

__all__ = [
    "ADJUSTMENTS",
    "CHANNEL_FEATURES",
    "FEATURES",
    "KINDS",
    "MEMORY_FEATURES",
    "RERANK",
    "FusionModel",
    "channel_features",
    "default_model",
    "fit_logistic",
    "memory_features",
    "model_for",
    "named_participants",
    "pool_features",
    "read_model",
    "rerank_features",
    "shipped_models",
    "stage_order",
]

logger = logging.getLogger(__name__)

_DATA = Path(__file__).parents[1] / "data"

CHANNEL_FEATURES = ("lexical", "dense", "time", "entities")
"""Features from the channels alone: known for every candidate before any memory is read."""
KINDS = ("line", "window", "turn", "part", "activity")
"""The memory kinds with a weight of their own (lamina.text.units: `line` and `window` in a
chat, `turn`, `part` and `activity` in an agent's session; any other kind weighs none)."""
MEMORY_FEATURES = (*KINDS, "restates", "own_speaker", "other_speaker", "length")
"""Features from the memory itself: computed for the best `RERANK` candidates only."""
FEATURES = CHANNEL_FEATURES + MEMORY_FEATURES
ADJUSTMENTS = ("list_window",)
"""Weights set by hand, never fitted (the synthetic questions each ask for one turn), absent
(0) from a model unless its file sets them: `list_window` is added to a window's score when the
question asks for several things (see lamina.bank.recall.LIST_QUESTION)."""
RERANK = 64
"""Candidates (best by their channel features) whose memory features are added: two pages of
the store's fetch along the fused order."""


@dataclass(frozen=True, slots=True)
class FusionModel:
    weights: Mapping[str, float]
    bias: float = 0.0

    def vector(self, names: Sequence[str]) -> npt.NDArray[np.float64]:
        return np.array([self.weights.get(n, 0.0) for n in names], dtype=np.float64)

    def as_dict(self) -> dict[str, Any]:
        names = FEATURES + tuple(n for n in ADJUSTMENTS if n in self.weights)
        return {
            "features": list(FEATURES),
            "weights": {n: round(self.weights.get(n, 0.0), 6) for n in names},
            "bias": round(self.bias, 6),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FusionModel:
        weights = data.get("weights")
        if not isinstance(weights, Mapping):
            raise ValueError("fusion model: no 'weights' object")
        return cls({str(k): float(v) for k, v in weights.items()}, float(data.get("bias", 0.0)))


@lru_cache(maxsize=1)
def default_model() -> FusionModel:
    """The shipped coefficients for the default embedder (`lamina.embed.DEFAULT_MODEL`)."""
    from ..embed import DEFAULT_MODEL

    return shipped_models()[DEFAULT_MODEL]


@lru_cache(maxsize=1)
def shipped_models() -> dict[str, FusionModel]:
    """The shipped models (lamina/data/fusion*.json) by the name of the embedder each was
    fitted for (its "embedder", the name stored with that embedder's vectors)."""
    models: dict[str, FusionModel] = {}
    for path in sorted(_DATA.glob("fusion*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        name = data.get("embedder")
        if isinstance(name, str) and name not in models:
            models[name] = FusionModel.from_dict(data["model"])
    return models


_HASH = "hash-ngram@1"
"""`lamina.embed.HashEmbedder`'s vectors: it matches spelling, not meaning, and gets the default
embedder's model without a warning."""
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def model_for(embedder: str) -> FusionModel:
    """The shipped model fitted for the embedder called `embedder` (the name stored with its
    vectors: the dense channel's scores have that model's scale and spread); for an embedder
    without one, the default embedder's model, saying so once per process."""
    found = shipped_models().get(embedder)
    if found is not None:
        return found
    if embedder == _HASH:  # shipped for tests and model-less installs: nothing to fit it for
        return default_model()
    with _WARNED_LOCK:
        first = embedder not in _WARNED
        _WARNED.add(embedder)
    if first:
        logger.warning(
            "no fusion model fitted for embedder %r; recall uses the default embedder's "
            "(fit one: lamina bench fusion --embedder NAME --write PATH)",
            embedder,
        )
    return default_model()


def read_model(path: str | Path) -> FusionModel:
    """A fusion model from a file `lamina bench fusion --write` made (its "model" object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return FusionModel.from_dict(data.get("model", data))
    except OSError as e:
        raise ReadError(path, e.strerror or str(e)) from None
    except (ValueError, TypeError, AttributeError, KeyError) as e:
        raise ReadError(path, f"not a fusion model ({e})") from None


def _normalised(
    ranking: Sequence[int], scores: npt.NDArray[np.floating[Any]], slots: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    top = scores[list(ranking)].astype(np.float64)
    low, high = float(top.min()), float(top.max())
    if high <= low:
        return (scores[slots] >= high).astype(np.float64)
    spread: npt.NDArray[np.float64] = (scores[slots].astype(np.float64) - low) / (high - low)
    return np.clip(spread, 0.0, None)


def channel_features(
    channels: Mapping[str, tuple[Sequence[int], npt.NDArray[np.floating[Any]]]],
    slots: npt.NDArray[np.int64],
    entity_scale: float,
) -> npt.NDArray[np.float64]:
    """The CHANNEL_FEATURES of each slot (rows in the order of `slots`)."""
    out = np.zeros((len(slots), len(CHANNEL_FEATURES)), dtype=np.float64)
    column = {name: i for i, name in enumerate(CHANNEL_FEATURES)}
    for name, (ranking, scores) in channels.items():
        if not len(ranking):
            continue
        if name in ("lexical", "dense"):
            out[:, column[name]] = _normalised(ranking, scores, slots)
        elif name == "time":
            out[:, column["time"]] = scores[slots].astype(np.float64)
        elif name == "entities":
            out[:, column["entities"]] = np.clip(scores[slots] / entity_scale, 0.0, 1.0)
    return out


def named_participants(query_entities: Sequence[str], memories: Sequence[Memory]) -> frozenset[str]:
    """The speakers of these memories that the query names (lowercased)."""
    speakers = {s.lower() for m in memories for s in m.speakers}
    return frozenset(e for e in query_entities if e in speakers)


def memory_features(memory: Memory, named: frozenset[str], tokens: int) -> list[float]:
    """The MEMORY_FEATURES of one memory; `named` the participants the query names."""
    speakers = {s.lower() for s in memory.speakers}
    own = bool(named) and bool(speakers) and speakers <= named
    other = bool(named) and bool(speakers) and not (speakers & named)
    return [
        *(float(memory.kind == kind) for kind in KINDS),
        float(memory.speakers == (SUMMARY,)),
        float(own),
        float(other),
        math.log1p(max(tokens, 0)) / math.log(1000),
    ]


def pool_features(
    channels: Mapping[str, tuple[Sequence[int], npt.NDArray[np.floating[Any]]]],
    entity_scale: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Every slot some channel proposed (ascending) and its CHANNEL_FEATURES (one row each):
    the first stage, for recall and for the fit alike."""
    pool = sorted({slot for ranking, _scores in channels.values() for slot in ranking})
    slots = np.array(pool, dtype=np.int64)
    if not pool:
        return slots, np.zeros((0, len(CHANNEL_FEATURES)), dtype=np.float64)
    return slots, channel_features(channels, slots, entity_scale)


def stage_order(slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]) -> list[int]:
    """Row numbers by score, best first (ties: lower slot first); the first RERANK of them are
    the ones whose memories are read."""
    return [int(i) for i in np.lexsort((slots, -scores))]


def rerank_features(
    query: str, memories: Sequence[Memory | None], tokens: Sequence[int]
) -> npt.NDArray[np.float64]:
    """The MEMORY_FEATURES of the re-ranked candidates (one row each; zeros for a memory that
    is gone): the second stage, for recall and for the fit alike. The participants the query
    names are those among these memories' speakers."""
    found = [m for m in memories if m is not None]
    named = named_participants(extract_entities(query), found) if found else frozenset()
    out = np.zeros((len(memories), len(MEMORY_FEATURES)), dtype=np.float64)
    for row, (memory, count) in enumerate(zip(memories, tokens, strict=True)):
        if memory is not None:
            out[row] = memory_features(memory, named, count)
    return out


def fit_logistic(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    l2: float = 1.0,
    iterations: int = 50,
    sample_weight: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.float64], float]:
    """Weights and bias of an L2-regularised logistic regression (Newton's method; the bias
    is not regularised)."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    sw = np.ones(n) if sample_weight is None else sample_weight
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ w, -30, 30)))
        gradient = a.T @ (sw * (p - y)) + penalty * w
        hessian = (a * (sw * p * (1 - p))[:, None]).T @ a + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w[:-1], float(w[-1])
