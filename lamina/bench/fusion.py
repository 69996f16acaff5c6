"""`lamina bench fusion`: fit recall's calibrated fusion on synthetic questions, and check it.

The questions are made from the shared conversations' own turns, never from a benchmark's
questions or answers: a turn with enough content words gives a question of a few of them (kept in
order), most often with its speaker's name in a question frame ("When did Caroline ... ?"),
sometimes with a word of another turn of the conversation as noise, sometimes with the month the
turn was said in. The memories holding that turn are the relevant ones. For each question the
candidates recall re-scores (the first RERANK by the channels) get their features, computed by
the same functions recall uses (lamina.bank.fusion), and a label, and a logistic regression is
fitted on them with numpy (fixed seed: the same data gives the same coefficients).

The JSON reports, for held-out synthetic questions, how often the turn is found in the top 10
under the fitted model and under the hand-set CombSUM, fitting on one half of the conversations
and testing on the other (both ways), then the coefficients fitted on all of them; `--write`
stores those, with the name of the embedder they were fitted with (`--embedder`: the dense
channel's scores have its scale and spread). Recall reads the model shipped for the embedder
that made a bank's vectors:

    lamina bench fusion --write lamina/data/fusion.json                   # the bundled model
    lamina bench fusion --embedder minilm-l6 --write lamina/data/fusion-minilm-l6.json
"""

from __future__ import annotations

import json
import math
import random
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np
import numpy.typing as npt

from ..bank.bank import MemoryBank
from ..bank.fusion import (
    FEATURES,
    RERANK,
    FusionModel,
    fit_logistic,
    pool_features,
    rerank_features,
    stage_order,
)
from ..bank.recall import RecallOptions, entity_scale
from ..embed import get_embedder
from ..progress import Progress
from ..readers.locomo import LocomoSample, read_locomo_samples
from ..store.sqlite import SQLiteStore
from ..text.lexical import STOP_WORDS
from .common import emit, locomo_file
from .locomo import HALVES, _bank_name, _now

__all__ = ["fusion_bench", "synthetic_questions"]

SEED = 17
PER_CONVERSATION = 300
MIN_WORDS = 2
"""Content words a turn needs to give a question."""
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_CONTENT = re.compile(r"(?<![\w'])[A-Za-z][A-Za-z-]{2,}(?![\w'])")
_IMAGE = frozenset({"shares", "image"})
"""The words of the image caption marker ("[shares an image: ...]")."""
FRAMES = (
    "When did {s} {w}?",
    "What did {s} say about {w}?",
    "Why did {s} {w}?",
    "How does {s} feel about {w}?",
    "What is {s}'s {w}?",
    "Did {s} {w}?",
    "What {w} did {s} mention?",
)
"""Question frames with the speaker's name; a question without one is just the words."""


@dataclass(frozen=True, slots=True)
class Synthetic:
    sample: str
    question: str
    turn: str
    """The record id of the turn the question was made from."""
    time_text: str | None


def _content_words(text: str, speakers: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for word in _CONTENT.findall(text):
        low = word.lower()
        if low not in STOP_WORDS and low not in speakers and low not in _IMAGE:
            seen.setdefault(word, None)
    return list(seen)


def _weighted_sample(rng: random.Random, weights: Sequence[float], k: int) -> list[int]:
    """k distinct indices, each drawn with probability proportional to its weight."""
    left = list(range(len(weights)))
    out: list[int] = []
    for _ in range(k):
        total = sum(weights[i] for i in left)
        at = rng.random() * total
        for j, i in enumerate(left):
            at -= weights[i]
            if at <= 0 or j == len(left) - 1:
                out.append(left.pop(j))
                break
    return out


def synthetic_questions(
    samples: Sequence[LocomoSample], per_conversation: int = PER_CONVERSATION, seed: int = SEED
) -> list[Synthetic]:
    """Questions made from each conversation's turns (see the module's docstring)."""
    rng = random.Random(seed)
    out: list[Synthetic] = []
    for sample in samples:
        speakers = {sample.speaker_a.lower(), sample.speaker_b.lower()}
        turns = [
            (session, message, words)
            for session in sample.sessions
            for message in session.messages
            if len(words := _content_words(message.text, speakers)) >= MIN_WORDS
        ]
        df: dict[str, int] = {}
        for _session, _message, words in turns:
            for w in {w.lower() for w in words}:
                df[w] = df.get(w, 0) + 1
        # The words of the turn before (the other speaker, whose words often set the topic).
        neighbours: dict[str, list[str]] = {}
        for session in sample.sessions:
            for before, message in zip(session.messages, session.messages[1:], strict=False):
                neighbours[message.id] = _content_words(before.text, speakers)
        chosen = rng.sample(turns, min(per_conversation, len(turns)))
        for session, message, words in chosen:
            k = rng.randint(1, min(3, len(words)))
            # Rarer words are likelier: a question names what a turn is about, not its "wow".
            weights = [math.log(len(turns) / df[w.lower()]) ** 2 + 1e-3 for w in words]
            picked = sorted(_weighted_sample(rng, weights, k))
            part = [words[i] for i in picked]
            if rng.random() < 0.8:
                other = rng.choice(turns)[2]
                part.insert(rng.randrange(len(part) + 1), rng.choice(other))
            if rng.random() < 0.5 and (near := neighbours.get(message.id)):
                part.insert(rng.randrange(len(part) + 1), rng.choice(near))
            text = " ".join(part)
            speaker = message.speaker or ""
            if speaker and rng.random() < 0.85:
                question = rng.choice(FRAMES).format(s=speaker, w=text)
            else:
                question = text[0].upper() + text[1:] + "?"
            time_text = None
            if session.date_time is not None and rng.random() < 0.15:
                when = session.date_time
                time_text = f"in {MONTHS[when.month - 1]} {when.year}"
                question = f"{question[:-1]} {time_text}?"
            out.append(Synthetic(sample.sample_id, question, message.id, time_text))
    return out


@dataclass
class Rows:
    x: list[npt.NDArray[np.float64]]
    y: list[npt.NDArray[np.float64]]
    group: list[str]
    """The conversation of each question (for the split)."""
    turns: list[list[tuple[str, ...]]]
    """Each question's candidates' records (row order)."""
    target: list[str]


def collect(
    bank: MemoryBank, samples: Sequence[LocomoSample], questions: Sequence[Synthetic]
) -> Rows:
    """Each question's re-scored candidates (the first RERANK, as recall reads them): their
    features and labels."""
    rows = Rows([], [], [], [], [])
    by_id = {s.sample_id: s for s in samples}
    with Progress("features", total=len(questions), unit="q") as progress:
        for done, q in enumerate(questions, 1):
            sample = by_id[q.sample]
            options = RecallOptions(now=_now(sample), time_text=q.time_text or "")
            plan = bank.plan(q.question, _bank_name(sample), options, bank.embedder)
            found = plan.search(bank.embedder)
            slots, base = pool_features(found.channels, entity_scale(plan.counts[0]))
            if not len(slots):
                continue
            # Only what recall re-scores: the first RERANK by the channels (tied weights, so
            # by their sum), whose memories it reads.
            head = stage_order(slots, base.sum(axis=1))[:RERANK]
            base = base[head]
            found.prefetch([int(s) for s in slots[head]])
            read = [found.memory_at(int(s)) for s in slots[head]]
            memories = [m for m in read if m is not None]
            extra = rerank_features(
                q.question, memories, [found.tokens_at(int(s)) for s in slots[head]]
            )
            rows.x.append(np.hstack([base, extra]))
            # A memory holding the turn counts in proportion to the share of it the turn is:
            # a window of four turns spends four places of a ranking on it.
            rows.y.append(
                np.array([float(q.turn in m.record_ids) / len(m.record_ids) for m in memories])
            )
            rows.group.append(q.sample)
            rows.turns.append([m.record_ids for m in memories])
            rows.target.append(q.turn)
            progress.update(done)
    return rows


TIED: tuple[tuple[str, ...], ...] = (("lexical", "dense", "time", "entities"),)
"""Features that share one weight: a channel's score weighs what the others' do (CombSUM's
equal weights, scaled by the fit), and so do the channels' ranks. Cloze questions share their
words with their turn; fitted freely, they weigh the lexical channel far above the dense one,
which real questions, worded otherwise, need (on LoCoMo, any@10 0.80 fitted freely against 0.85
tied)."""


def _fit(
    rows: Rows, keep: Sequence[int], l2: float, tied: Sequence[Sequence[str]] = TIED
) -> FusionModel:
    x = np.vstack([rows.x[i] for i in keep])
    y = np.concatenate([rows.y[i] for i in keep])
    # Each question weighs the same, however many candidates it has.
    weight = np.concatenate([np.full(len(rows.y[i]), 100.0 / len(rows.y[i])) for i in keep])
    groups = [[FEATURES.index(f) for f in group] for group in tied]
    grouped = {i for group in groups for i in group}
    groups += [[i] for i in range(len(FEATURES)) if i not in grouped]
    design = np.hstack([x[:, group].sum(axis=1, keepdims=True) for group in groups])
    w, b = fit_logistic(design, y, l2=l2, sample_weight=weight)
    weights = {FEATURES[i]: float(v) for group, v in zip(groups, w, strict=True) for i in group}
    return FusionModel(weights, b)


HANDSET = FusionModel({"lexical": 1.0, "dense": 1.0, "time": 1.0, "entities": 1.0})
"""CombSUM with equal weights, as features: the fusion before the fitted one."""


def found_at(rows: Rows, keep: Sequence[int], model: FusionModel, k: int = 10) -> float:
    """Share of the questions whose turn is among the first k turns of the ranked memories."""
    w = model.vector(FEATURES)
    hits = 0
    for i in keep:
        scores = rows.x[i] @ w
        seen: dict[str, None] = {}
        for j in np.argsort(-scores, kind="stable"):
            for record in rows.turns[i][j]:
                seen.setdefault(record, None)
            if len(seen) >= k:
                break
        hits += rows.target[i] in list(seen)[:k]
    return round(hits / max(len(keep), 1), 4)


@click.command("fusion")
@click.option("--data", default=None, help="LoCoMo JSON file (default: the shared dev set).")
@click.option("--per-conversation", default=PER_CONVERSATION, show_default=True)
@click.option("--l2", default=1.0, show_default=True, help="L2 penalty of the fit.")
@click.option(
    "--write",
    "write",
    default=None,
    metavar="PATH",
    help="Write the model fitted on all conversations here, with the embedder's name "
    "(lamina/data/fusion*.json ship; recall reads the one for the bank's embedder).",
)
@click.option(
    "--embedder",
    "embedder_name",
    default="default",
    show_default=True,
    help="Fit for this dense channel's model (see lamina.embed.get_embedder: 'default' or "
    "'minilm-l6').",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def fusion_bench(
    data: str | None,
    per_conversation: int,
    l2: float,
    write: str | None,
    embedder_name: str,
    as_json: bool,
) -> None:
    """Fit the calibrated fusion on synthetic questions from the conversations' own turns,
    for one embedder; report held-out synthetic recall against the hand-set fusion.

    Example: lamina bench fusion --embedder minilm-l6 --write lamina/data/fusion-minilm-l6.json
    """
    data = locomo_file(data)
    samples = read_locomo_samples(data)
    questions = synthetic_questions(samples, per_conversation)
    embedder = get_embedder(embedder_name)
    with tempfile.TemporaryDirectory(prefix="lamina-fusion-") as tmp:
        bank = MemoryBank(SQLiteStore(Path(tmp) / "lamina.db"), embedder)
        for sample in samples:
            bank.retain_messages(sample.messages, _bank_name(sample), sample.sample_id)
        rows = collect(bank, samples, questions)
        bank.close()
    everything = list(range(len(rows.x)))
    splits: dict[str, Any] = {}
    for name, ids in HALVES.items():
        test = [i for i in everything if rows.group[i] in ids]
        train = [i for i in everything if rows.group[i] not in ids]
        if not test or not train:
            continue
        model = _fit(rows, train, l2)
        splits[f"test_{name}"] = {
            "questions": len(test),
            "learned_any@10": found_at(rows, test, model),
            "combsum_any@10": found_at(rows, test, HANDSET),
            "model": model.as_dict(),
        }
    model = _fit(rows, everything, l2)
    result = {
        "benchmark": "fusion",
        "data": data,
        "embedder": embedder.name,
        "questions": len(rows.x),
        "splits": splits,
        "all": {
            "learned_any@10": found_at(rows, everything, model),
            "combsum_any@10": found_at(rows, everything, HANDSET),
        },
        "model": model.as_dict(),
    }
    if write:
        refit = "" if embedder_name == "default" else f" --embedder {embedder_name}"
        document = {
            "about": f"Recall's calibrated fusion (lamina.bank.fusion) for the embedder "
            f"{embedder.name}; refit with `lamina bench fusion{refit} --write "
            f"lamina/data/{Path(write).name}`.",
            "embedder": embedder.name,
            "fitted_on": {
                "data": Path(data).name,
                "questions": len(rows.x),
                "per_conversation": per_conversation,
                "seed": SEED,
                "l2": l2,
            },
            "model": model.as_dict(),
        }
        Path(write).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    emit(result, as_json)
