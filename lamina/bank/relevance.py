"""Relevance: one number per recalled memory, from 0 to 1, higher is better.

Recall ranks by a *fused* score whose scale depends on the fusion: with the default, learned
fusion (lamina.bank.fusion) it is the logistic model's log-odds that the memory holds what the
query asks about (any real number; the best hit of a typical query scores about -0.9); with
`combsum` a weighted sum of normalised channel scores; with `rrf` a sum of reciprocal ranks.
None of these reads as "how relevant", so every surface (`RecallHit.score`, the CLI, its JSON,
HTTP, MCP, the inspector) shows this instead:

- learned fusion: the logistic of the fused score, `1 / (1 + exp(-fused))`: the model's own
  estimate of the probability that the memory holds the answer (-0.878 becomes 0.294; 0
  becomes 0.5). It is calibrated on single-answer synthetic questions, so it is modest for a
  good hit: compare results, do not read it as a threshold;
- `combsum`: the fused score divided by the sum of the weights of the channels that took part
  (each channel contributes at most its weight), so 1 is "best in every channel";
- `rrf`: the fused score divided by what first place in every channel that took part would get.

Both mappings are increasing, so they never reorder anything. The results themselves are not
always in fused order (a list question spreads its first results over episodes; a restatement
of a memory shown above comes after the rest), so the relevance shown is capped by the one
above it: `ranked` takes the running minimum down the results. Scores are thus in [0, 1] and
never increase from one result to the next, and the ranking is exactly recall's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = ["ceiling", "ranked", "relevance"]


def relevance(fused: float, fusion: str, top: float = 1.0) -> float:
    """A fused score as relevance in [0, 1] (see the module's doc). `top` is the fused score
    that counts as 1 for `combsum` and `rrf` (`ceiling`); the learned fusion ignores it."""
    if fusion == "learned":
        if fused >= 0:
            return 1.0 / (1.0 + math.exp(-fused))
        odds = math.exp(fused)  # the same, without overflow for a very negative score
        return odds / (1.0 + odds)
    if top <= 0 or math.isnan(fused):
        return 0.0
    return min(1.0, max(0.0, fused / top))


def ceiling(
    fusion: str, weights: Mapping[str, float], channels: Iterable[str], rrf_k: int
) -> float:
    """The best fused score `combsum` or `rrf` can give with these `channels` taking part:
    each channel's weight (`combsum`), or its weight over first place's `rrf_k + 1` (`rrf`)."""
    used = [weights.get(name, 0.0) for name in channels if weights.get(name, 0.0) > 0]
    if fusion == "rrf":
        return sum(w / (rrf_k + 1) for w in used)
    return sum(used)


def ranked(values: Iterable[float]) -> list[float]:
    """`values` (relevance in result order) capped by each one before: never increasing."""
    out: list[float] = []
    low = 1.0
    for value in values:
        low = min(low, value)
        out.append(low)
    return out
