"""`lamina bench fusion`: fit recall's calibrated fusion on synthetic questions, and check it.

The questions are made from two kinds of shared data, never from a benchmark's questions or
answers, nor from ../shared/data/claude-code-entire (the sessions recall is checked on):

- **chat** (the LoCoMo conversations' own turns): a turn with enough content words gives a
  question of a few of them (kept in order), most often with its speaker's name in a question
  frame ("When did Caroline ... ?"), sometimes with a word of another turn of the conversation as
  noise, sometimes with the month the turn was said in. The memories holding that turn are the
  relevant ones, a window in proportion to the share of it the turn is.
- **coding** (the shared Claude Code, Codex, Gemini and Copilot sessions, retained as recall
  retains them): a statement of a memory (a line of a prompt or a reply, a command, a line a tool
  printed) gives a question worded in one of three ways in turn (`STYLES`): a few of its words
  with noise in a question frame, as above; only one or two of its rarest words among words of
  the statements around it; or none of its words, each replaced by a word that goes with it
  elsewhere in the sessions. The memories holding the statement are the relevant ones, in
  proportion to the tokens they spend on it (the smallest one's over their own).

For each question the candidates recall re-scores (the first RERANK by the channels) get their
features, computed by the same functions recall uses (lamina.bank.fusion), and a label, and a
logistic regression is fitted on both kinds together with numpy (fixed seed: the same data
gives the same coefficients).

The JSON reports held-out synthetic figures under the fitted model and under the hand-set
CombSUM, fitting on everything but one half of the conversations (or of the sessions) and
testing on that half: for chat questions how often the turn is in the top 10 (`any@10`), for
coding ones how often a memory holding the statement is returned within 1,000 and 1,500 tokens.
Then the coefficients fitted on all of them; `--write` stores those, with the name of the
embedder they were fitted with (`--embedder`: the dense channel's scores have its scale and
spread). Recall reads the model shipped for the embedder that made a bank's vectors:

    lamina bench fusion --write lamina/data/fusion-minilm-l6.json         # the default embedder
    lamina bench fusion --embedder minilm-l3 --write lamina/data/fusion.json
"""

from __future__ import annotations

import json
import math
import random
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from ..embed import Embedder, get_embedder
from ..memories import Memory
from ..progress import Progress
from ..readers.locomo import LocomoSample, read_locomo_samples
from ..store.sqlite import SQLiteStore
from ..text.lexical import STOP_WORDS, tokenize
from ..text.units import SUMMARY
from .common import embedder_option, emit, json_option, locomo_file, shared_data_dir
from .locomo import HALVES, _bank_name, _now

__all__ = [
    "CodingQuestion",
    "coding_questions",
    "fusion_bench",
    "statements",
    "synthetic_questions",
]

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
    x: list[npt.NDArray[np.float64]] = field(default_factory=list)
    y: list[npt.NDArray[np.float64]] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    """The conversation or session of each question (for the split)."""
    turns: list[list[tuple[str, ...]]] = field(default_factory=list)
    """Each question's candidates' records (row order)."""
    target: list[str] = field(default_factory=list)
    relevant: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    """Which candidates hold what the question was made from."""
    tokens: list[npt.NDArray[np.int64]] = field(default_factory=list)
    """Each candidate's tokens (for the found-within-a-budget figures)."""
    corpus: list[str] = field(default_factory=list)
    """`chat` (LoCoMo) or `coding` (agent sessions)."""
    style: list[str] = field(default_factory=list)
    """How each question was worded (`chat`, or one of the coding STYLES)."""

    def extend(self, other: Rows) -> None:
        for name in ("x", "y", "group", "turns", "target", "relevant", "tokens", "corpus", "style"):
            getattr(self, name).extend(getattr(other, name))


def collect(
    bank: MemoryBank, samples: Sequence[LocomoSample], questions: Sequence[Synthetic]
) -> Rows:
    """Each question's re-scored candidates (the first RERANK, as recall reads them): their
    features and labels."""
    rows = Rows()
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
            kept = [int(s) for s in slots[head] if found.memory_at(int(s)) is not None]
            memories = [m for s in kept if (m := found.memory_at(s)) is not None]
            sizes = [found.tokens_at(s) for s in kept]
            base = base[[i for i, s in enumerate(slots[head]) if int(s) in set(kept)]]
            extra = rerank_features(q.question, memories, sizes)
            rows.x.append(np.hstack([base, extra]))
            # A memory holding the turn counts in proportion to the share of it the turn is:
            # a window of four turns spends four places of a ranking on it.
            rows.y.append(
                np.array([float(q.turn in m.record_ids) / len(m.record_ids) for m in memories])
            )
            rows.group.append(q.sample)
            rows.turns.append([m.record_ids for m in memories])
            rows.target.append(q.turn)
            rows.relevant.append(np.array([q.turn in m.record_ids for m in memories]))
            rows.tokens.append(np.array(sizes))
            rows.corpus.append("chat")
            rows.style.append("chat")
            progress.update(done)
    return rows


# -- coding sessions -------------------------------------------------------------------------
CODING = ("claude-code", "codex", "gemini", "copilot")
"""The shared folders of agent sessions the coding questions come from (never
claude-code-entire: its sessions are the ones recall is checked on)."""
PER_SESSION = 150
"""Questions per session at most (a subagent's transcript counts with its parent's)."""
CODING_HALVES: dict[str, frozenset[str]] = {
    "sessions-a": frozenset(
        {"spotter-258c7280", "ccviewer-fe5e1c67", "drmaciver-python-to-rust-port", "codex"}
    ),
    "sessions-b": frozenset({"spotter-8463c716", "obra-long-conversation", "gemini", "copilot"}),
}
"""The coding sessions' split: fit on one half, test on the other (each about as large)."""
CODING_MIN_WORDS = 3
STYLES = ("words", "rare", "related")
"""How a coding question words what it asks about: `words` as the chat questions do (a few of
the statement's words, rarer ones likelier, with words of other statements as noise); `rare`
only one or two of its rarest words among words of the statements around it; `related` none of
its words, each replaced by a word that goes with it elsewhere in the sessions (`_Related`: a
paraphrase as far as the lexical channel can tell)."""
FIT_STYLES = ("words",)
"""The coding questions the model is fitted on: the other STYLES are reported, held out. Fitted
on all three, the model is no better on held-out synthetic questions (within 1,500 tokens 0.680
/ 0.708 on the two halves of the sessions, against 0.676 / 0.706) and worse on the tuning half
of the real coding questions (`lamina bench agent`: 0.912 against 0.930 within 1,500 tokens;
entire-dev 0.458 against 0.479 within 1,000)."""
CODING_FRAMES = (
    "What did we decide about {w}?",
    "Why did {w} fail?",
    "How did we fix {w}?",
    "Which file has {w}?",
    "What was the {w}?",
    "What happened with {w}?",
    "Which command {w}?",
    "What was said about {w}?",
    "Where did we {w}?",
)
_CODE_WORD = re.compile(r"(?<![\w'])[A-Za-z][\w-]{2,}(?![\w'])")
_LABEL = re.compile(r"^(?:[\w' ]{1,40}?(?: \([^)]{0,80}\))?):\s+")
_BULLET = re.compile(r"^(?:[-*#>→•]+|\d+[.)])\s*")
MAX_PHRASE_WORDS = 24
"""A statement longer than this is asked about by its first words only."""


@dataclass(frozen=True, slots=True)
class CodingQuestion:
    session: str
    """The session it was made from (the split's group)."""
    document: str
    question: str
    phrase: str
    """The statement (lowercased, spaces collapsed) a memory holds to answer it."""
    style: str


def _flat(text: str) -> str:
    return " ".join(text.lower().split())


def _session_group(document: str, source: str) -> str:
    """A session's group: its transcript's name (a subagent's transcript goes with its
    parent's); the other agents' short sessions are one group per agent."""
    if source != "claude-code":
        return source
    return document.split(".", 1)[0]


def statements(memory: Memory) -> list[str]:
    """What a memory says, statement by statement: its lines without their speaker or tool
    label and list marks, the prompt a part opens with left out (it is the prompt's own
    memory's statement)."""
    out: list[str] = []
    for line in memory.text.split("\n"):
        if line.endswith(" […]") or line.strip() in ("activity:", ""):
            continue
        body = _BULLET.sub("", _LABEL.sub("", line.strip(), count=1)).strip()
        words = body.split()
        if len(words) > MAX_PHRASE_WORDS:
            body = " ".join(words[:MAX_PHRASE_WORDS])
        if body:
            out.append(body)
    return out


def _code_words(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _CODE_WORD.findall(text):
        if word.lower() not in STOP_WORDS:
            seen.setdefault(word, None)
    return list(seen)


class _Related:
    """For a word, a word that goes with it in other statements of the sessions (one of the
    three of highest pointwise mutual information over distinct statements, at least twice
    together, said in at least three), sharing no index term with the statement asked
    about."""

    def __init__(self, texts: Sequence[str]) -> None:
        texts = sorted({_flat(t) for t in texts})
        self.terms = [set(tokenize(t)) for t in texts]
        self.where: dict[str, list[int]] = {}
        surface: dict[str, dict[str, int]] = {}
        for i, text in enumerate(texts):
            for term in self.terms[i]:
                self.where.setdefault(term, []).append(i)
            for word in _code_words(text):
                for term in tokenize(word):
                    forms = surface.setdefault(term, {})
                    forms[word] = forms.get(word, 0) + 1
        self.surface = {t: max(f, key=lambda w: (f[w], w)) for t, f in surface.items()}
        self.n = len(texts)

    def best(self, word: str, avoid: set[str], rng: random.Random) -> str | None:
        terms = tokenize(word)
        if not terms:
            return None
        term = terms[0]
        together: dict[str, int] = {}
        for i in self.where.get(term, ())[:400]:
            for other in self.terms[i]:
                if other not in avoid and other in self.surface and len(self.where[other]) > 2:
                    together[other] = together.get(other, 0) + 1
        own = len(self.where.get(term, ()))
        scored = sorted(
            (
                (math.log(c * self.n / (own * len(self.where[t]))), t)
                for t, c in together.items()
                if c >= 2
            ),
            reverse=True,
        )
        if not scored:
            return None
        return self.surface[rng.choice(scored[:3])[1]]


def coding_questions(
    memories: Sequence[tuple[str, Memory]],
    per_session: int = PER_SESSION,
    seed: int = SEED,
) -> list[CodingQuestion]:
    """Questions made from what agent sessions' memories say (each with its source folder):
    one statement each (a prompt's or a reply's line, a command or a line it printed), in the
    three STYLES in turn; the memories holding that statement are the relevant ones."""
    rng = random.Random(seed)
    by_session: dict[str, dict[tuple[str, str], list[str]]] = {}
    around: dict[tuple[str, str], list[str]] = {}
    texts: list[str] = []
    for source, memory in memories:
        if memory.kind not in ("turn", "line", "part", "activity"):
            continue
        if memory.speakers == (SUMMARY,):
            continue  # a restatement: its statements are the originals'
        said = statements(memory)
        for n, phrase in enumerate(said):
            words = _code_words(phrase)
            texts.append(phrase)
            if len(words) < CODING_MIN_WORDS:
                continue
            key = (memory.document, _flat(phrase))
            group = by_session.setdefault(_session_group(memory.document, source), {})
            if key not in group:
                group[key] = words
                around[key] = [w for p in said[max(n - 2, 0) : n + 3] for w in _code_words(p)]
    related = _Related(texts)
    df: dict[str, int] = {}
    for text in texts:
        for term in set(tokenize(text)):
            df[term] = df.get(term, 0) + 1

    def rarity(word: str) -> float:
        terms = tokenize(word)
        return math.log(len(texts) / max(min((df.get(t, 1) for t in terms), default=1), 1))

    pool = [w for group in by_session.values() for words in group.values() for w in words]
    out: list[CodingQuestion] = []
    for session in sorted(by_session):
        group = by_session[session]
        keys = sorted(group)
        chosen = rng.sample(keys, min(per_session, len(keys)))
        for n, key in enumerate(chosen):
            words = group[key]
            style = STYLES[n % len(STYLES)]
            weights = [rarity(w) ** 2 + 1e-3 for w in words]
            own = set(tokenize(" ".join(words)))
            if style == "words":
                k = rng.randint(1, min(3, len(words)))
                part = [words[i] for i in sorted(_weighted_sample(rng, weights, k))]
                if rng.random() < 0.8:
                    part.insert(rng.randrange(len(part) + 1), rng.choice(pool))
            elif style == "rare":
                k = rng.randint(1, 2)
                part = [words[i] for i in sorted(_weighted_sample(rng, [w**2 for w in weights], k))]
                near = [w for w in around[key] if not set(tokenize(w)) & own]
                for _ in range(min(2, len(near))):
                    part.insert(rng.randrange(len(part) + 1), rng.choice(near))
            else:
                k = rng.randint(2, min(3, len(words)))
                picked = [words[i] for i in sorted(_weighted_sample(rng, weights, k))]
                part = []
                for word in picked:
                    other = related.best(word, own, rng)
                    if other is not None and other not in part:
                        part.append(other)
                if len(part) < 2:
                    continue
            text = " ".join(part)
            if rng.random() < 0.8:
                question = rng.choice(CODING_FRAMES).format(w=text)
            else:
                question = text[0].upper() + text[1:] + "?"
            out.append(CodingQuestion(session, key[0], question, key[1], style))
    return out


def collect_coding(bank: MemoryBank, name: str, questions: Sequence[CodingQuestion]) -> Rows:
    """As `collect`, for questions on agent sessions retained into the bank `name`: a
    candidate is relevant when it holds the statement; it counts in proportion to the share
    of it the statement is, as the smallest relevant candidate's tokens over its own (a
    budget spends that many more tokens on it)."""
    rows = Rows()
    with Progress("coding features", total=len(questions), unit="q") as progress:
        for done, q in enumerate(questions, 1):
            plan = bank.plan(q.question, name, RecallOptions(), bank.embedder)
            found = plan.search(bank.embedder)
            slots, base = pool_features(found.channels, entity_scale(plan.counts[0]))
            if not len(slots):
                continue
            head = stage_order(slots, base.sum(axis=1))[:RERANK]
            found.prefetch([int(s) for s in slots[head]])
            rows_kept = [
                (i, m)
                for i, s in enumerate(slots[head])
                if (m := found.memory_at(int(s))) is not None
            ]
            base = base[head][[i for i, _m in rows_kept]]
            memories = [m for _i, m in rows_kept]
            tokens = np.array(
                [found.tokens_at(int(slots[head][i])) for i, _m in rows_kept], dtype=np.int64
            )
            extra = rerank_features(q.question, memories, list(tokens))
            relevant = np.array(
                [m.document == q.document and q.phrase in _flat(m.text) for m in memories]
            )
            cheapest = float(tokens[relevant].min()) if relevant.any() else 1.0
            rows.x.append(np.hstack([base, extra]))
            rows.y.append(relevant * np.minimum(1.0, cheapest / np.maximum(tokens, 1)))
            rows.group.append(q.session)
            rows.turns.append([m.record_ids for m in memories])
            rows.target.append(q.phrase)
            rows.relevant.append(relevant)
            rows.tokens.append(tokens)
            rows.corpus.append("coding")
            rows.style.append(q.style)
            progress.update(done)
    return rows


def coding_rows(embedder: Embedder, per_session: int, tmp: Path) -> Rows:
    """The coding questions' rows: each shared folder of agent sessions retained into a bank
    of its own, its questions asked there."""
    rows = Rows()
    bank = MemoryBank(SQLiteStore(tmp / "coding.db"), embedder)
    try:
        memories: list[tuple[str, Memory]] = []
        for source in CODING:
            folder = shared_data_dir(source)
            if folder is None:
                continue
            for path in sorted(p for p in folder.iterdir() if p.suffix in (".json", ".jsonl")):
                bank.retain_file(path, source, document=path.name)
            memories += [(source, m) for m in bank.memories(source, with_embeddings=False)]
        questions = coding_questions(memories, per_session)
        for source in CODING:
            asked = [q for q in questions if _source_of(q.session) == source]
            if asked:
                rows.extend(collect_coding(bank, source, asked))
    finally:
        bank.close()
    return rows


def _source_of(session: str) -> str:
    return session if session in CODING else "claude-code"


def found_within(rows: Rows, keep: Sequence[int], model: FusionModel, budget: int) -> float:
    """Share of the questions a relevant candidate is returned for within `budget` tokens
    (taken in the model's order, one that no longer fits passed over)."""
    w = model.vector(FEATURES)
    hits = 0
    for i in keep:
        used = 0
        for j in np.argsort(-(rows.x[i] @ w), kind="stable"):
            cost = int(rows.tokens[i][j])
            if used + cost > budget:
                continue
            used += cost
            if rows.relevant[i][j]:
                hits += 1
                break
    return round(hits / max(len(keep), 1), 4)


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
@click.option(
    "--per-session",
    default=PER_SESSION,
    show_default=True,
    help="Questions per agent session (0: none, the chat questions alone).",
)
@click.option("--l2", default=1.0, show_default=True, help="L2 penalty of the fit.")
@click.option(
    "--write",
    "write",
    default=None,
    metavar="PATH",
    help="Write the model fitted on all questions here, with the embedder's name "
    "(lamina/data/fusion*.json ship; recall reads the one for the bank's embedder).",
)
@embedder_option(
    "Fit for this dense channel's model (see lamina.embed.get_embedder: 'default' or 'minilm-l3')."
)
@json_option
def fusion_bench(
    data: str | None,
    per_conversation: int,
    per_session: int,
    l2: float,
    write: str | None,
    embedder_name: str,
    as_json: bool,
) -> None:
    """Fit the calibrated fusion on synthetic questions from the LoCoMo conversations' turns
    and the shared agent sessions' statements, for one embedder; report held-out synthetic
    recall against the hand-set fusion.

    Example: lamina bench fusion --embedder minilm-l3 --write lamina/data/fusion.json
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
        if per_session > 0:
            rows.extend(coding_rows(embedder, per_session, Path(tmp)))
    result = report(rows, l2)
    result = {"benchmark": "fusion", "data": data, "embedder": embedder.name, **result}
    if write:
        refit = "" if embedder_name == "default" else f" --embedder {embedder_name}"
        document = {
            "about": f"Recall's calibrated fusion (lamina.bank.fusion) for the embedder "
            f"{embedder.name}; refit with `lamina bench fusion{refit} --write "
            f"lamina/data/{Path(write).name}`.",
            "embedder": embedder.name,
            "fitted_on": {
                "data": Path(data).name,
                "questions": result["fitted_on"],
                "per_conversation": per_conversation,
                "per_session": per_session,
                "sessions": [s for s in CODING if per_session > 0],
                "styles": list(FIT_STYLES) if per_session > 0 else [],
                "seed": SEED,
                "l2": l2,
            },
            "model": result["model"],
        }
        Path(write).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    emit(result, as_json)


def _scores(rows: Rows, test: Sequence[int], model: FusionModel) -> dict[str, float]:
    chat = [i for i in test if rows.corpus[i] == "chat"]
    coding = [i for i in test if rows.corpus[i] == "coding"]
    out: dict[str, float] = {}
    if chat:
        out["any@10"] = found_at(rows, chat, model)
    if coding:
        out["within_1000t"] = found_within(rows, coding, model, 1_000)
        out["within_1500t"] = found_within(rows, coding, model, 1_500)
        for style in STYLES:
            asked = [i for i in coding if rows.style[i] == style]
            if asked:
                out[f"{style}_within_1500t"] = found_within(rows, asked, model, 1_500)
    return out


def report(rows: Rows, l2: float) -> dict[str, Any]:
    """Held-out figures (for each half of the conversations and of the sessions: fitted on
    everything else, tested there, against CombSUM), then the model fitted on everything (the
    coding questions of FIT_STYLES)."""
    everything = list(range(len(rows.x)))
    fitted = [i for i in everything if rows.style[i] in ("chat", *FIT_STYLES)]
    halves = {**HALVES, **CODING_HALVES}
    splits: dict[str, Any] = {}
    for name, ids in halves.items():
        test = [i for i in everything if rows.group[i] in ids]
        train = [i for i in fitted if rows.group[i] not in ids]
        if not test or not train:
            continue
        model = _fit(rows, train, l2)
        splits[f"test_{name}"] = {
            "questions": len(test),
            "learned": _scores(rows, test, model),
            "combsum": _scores(rows, test, HANDSET),
            "model": model.as_dict(),
        }
    model = _fit(rows, fitted, l2)
    return {
        "questions": len(rows.x),
        "fitted_on": len(fitted),
        "corpora": {c: rows.corpus.count(c) for c in sorted(set(rows.corpus))},
        "splits": splits,
        "all": {
            "learned": _scores(rows, everything, model),
            "combsum": _scores(rows, everything, HANDSET),
        },
        "model": model.as_dict(),
    }
