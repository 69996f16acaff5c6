"""`lamina bench agent`: does recall find what was decided in long agentic sessions?

The question set (`lamina/bench/data/agent_questions.json`, shipped with the package) was written
from the shared Claude Code sessions before anyone looked at what Lamina returns: questions a
developer returning to the project would ask (what was decided, why a bug happened, which file,
setting, command or number), each with a phrase that answers it and the lines of the records that
state it. Every session goes into one bank; each question is recalled within a token budget
(1,000 and 1,500 by default). A question counts as found when a returned memory covers one of
its evidence lines and its text, as returned, holds the answer.

The baseline, measured in the same run, is plain BM25 over single conversational records (user
prompts and assistant text, a subagent's inline ones included, lower-cased word tokens, no
stemming), filled to the same budget in rank order. `ceiling` is the share of questions some
memory of the bank could answer within the budget at all (perfect ranking). Scores are reported for
all questions and for both halves: `tune` (odd-numbered, used while designing units) and `check`
(even-numbered, held out), and per half of each round of writing (`round3_check`: the held-out
questions of the third round), so questions added later, and harder, are not averaged away.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions
from ..bank.retain import RetainOptions
from ..embed import Embedder, get_embedder
from ..errors import InputError
from ..messages import SYNTHETIC_KINDS, Kind, Role
from ..progress import Progress
from ..readers.claude_code import read_claude_code
from ..store.sqlite import SQLiteStore
from ..text.units import UnitOptions
from ..tokens import count_text
from ..turns import conversational_text
from .common import (
    count_option,
    embedder_option,
    emit,
    json_option,
    shared_data_dir,
    shipped_or_file,
)

__all__ = [
    "AgentQuestion",
    "Evidence",
    "Part",
    "QuestionSet",
    "agent_bench",
    "found_in",
    "load_question_set",
    "load_questions",
    "run_agent_bench",
    "session_files",
]

DEFAULT_BUDGETS = (1_000, 1_500)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Evidence:
    first_line: int
    last_line: int


@dataclass(frozen=True, slots=True)
class Part:
    """One fact a question needs: a phrase that states it and the lines that say it."""

    answers: tuple[str, ...]
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True, slots=True)
class AgentQuestion:
    id: str
    file: str
    question: str
    answers: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    half: str
    round_no: int = 1
    tags: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()

    @property
    def needs(self) -> tuple[Part, ...]:
        """The facts a recall must return for the question to count as found."""
        return self.parts or (Part(self.answers, self.evidence),)


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A question file: its questions and the shared data folder its sessions are in."""

    questions: list[AgentQuestion]
    data: str = "claude-code"


#: Question sets shipped with the package, by the name `--questions` accepts.
SHIPPED = {
    "claude-code": "agent_questions.json",
    "entire-dev": "agent_questions_entire_dev.json",
    "entire-heldout": "agent_questions_entire_heldout.json",
}


def _evidence(raw: Sequence[Mapping[str, Any]]) -> tuple[Evidence, ...]:
    return tuple(Evidence(int(e["first_line"]), int(e["last_line"])) for e in raw)


def load_question_set(path: str | Path | None = None) -> QuestionSet:
    """A shipped question set (None or a name of `SHIPPED`), or one in the same shape from a
    file."""
    name = where = "claude-code" if path is None else str(path)
    raw = shipped_or_file(name, SHIPPED, "the question set", "shipped sets")
    try:
        data = json.loads(raw)
        questions = [
            AgentQuestion(
                id=str(q["id"]),
                file=str(q["file"]),
                question=str(q["question"]),
                answers=tuple(str(a) for a in q["answers"]),
                evidence=_evidence(q["evidence"]),
                half=str(q.get("half", "tune")),
                round_no=int(q.get("round", 1)),
                tags=tuple(str(t) for t in q.get("tags", ())),
                parts=tuple(
                    Part(tuple(str(a) for a in p["answers"]), _evidence(p["evidence"]))
                    for p in q.get("parts", ())
                ),
            )
            for q in data["questions"]
        ]
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{where}: not a question set ({type(e).__name__}: {e})") from None
    return QuestionSet(questions, str(data.get("data", "claude-code")))


def load_questions(path: str | Path | None = None) -> list[AgentQuestion]:
    """The shipped question set, or one in the same shape from `path`."""
    return load_question_set(path).questions


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def states(
    part: Part | AgentQuestion, text: str, first_line: int | None, last_line: int | None
) -> bool:
    """True when a text that spans these lines covers an evidence line and states the answer."""
    if first_line is None:
        return False
    last = last_line if last_line is not None else first_line
    if not any(e.first_line <= last and first_line <= e.last_line for e in part.evidence):
        return False
    body = _norm(text)
    return any(_norm(a) in body for a in part.answers)


def answers_it(
    question: AgentQuestion, text: str, first_line: int | None, last_line: int | None
) -> bool:
    """True when one text states every fact the question needs."""
    return all(states(p, text, first_line, last_line) for p in question.needs)


Span = tuple[str, str, int | None, int | None]  # file, text, first line, last line


def found_in(question: AgentQuestion, returned: Iterable[Span]) -> bool:
    """True when, among what was returned, every fact the question needs is stated by some
    text of the question's session."""
    own = [(t, a, b) for f, t, a, b in returned if f == question.file]
    return all(any(states(p, t, a, b) for t, a, b in own) for p in question.needs)


# -- the baseline: BM25 over single conversational records --------------------------------------
@dataclass(frozen=True, slots=True)
class _Record:
    file: str
    text: str
    first_line: int | None
    last_line: int | None
    tokens: int


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class _BM25:
    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.terms = [Counter(_words(d)) for d in docs]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.avg = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for t in self.terms:
            df.update(t.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def rank(self, query: str) -> list[int]:
        words = set(_words(query))
        scores: list[tuple[float, int]] = []
        for i, tf in enumerate(self.terms):
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            for w in words:
                f = tf.get(w, 0)
                if f:
                    score += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            if score > 0:
                scores.append((score, i))
        scores.sort(key=lambda s: (-s[0], s[1]))
        return [i for _s, i in scores]


def conversational_records(path: Path) -> list[_Record]:
    """Each user prompt and assistant message with conversational text, on its own (a
    subagent's messages written inline in its parent's transcript count too)."""
    out: list[_Record] = []
    for message in read_claude_code(str(path), lambda _w: None):
        sidechain = message.kind is Kind.SIDECHAIN
        if (message.kind in SYNTHETIC_KINDS and not sidechain) or message.role is Role.SYSTEM:
            continue
        text = conversational_text(message)
        if not text:
            continue
        label = "user" if message.role is Role.USER else "assistant"
        label = f"subagent {label}" if sidechain else label
        body = f"{label}: {text}"
        out.append(
            _Record(
                path.name,
                body,
                message.source.line,
                message.source.end_line or message.source.line,
                count_text(body),
            )
        )
    return out


def _fill(sizes: Iterable[tuple[int, int]], budget: int) -> list[int]:
    """Items (index, tokens) taken in rank order while they fit the budget."""
    used = 0
    taken: list[int] = []
    for index, tokens in sizes:
        if used + tokens <= budget:
            taken.append(index)
            used += tokens
    return taken


# -- the run ---------------------------------------------------------------------------------------
def _size_stats(values: Sequence[int]) -> dict[str, int]:
    if not values:
        return {"count": 0, "median": 0, "p95": 0, "max": 0}
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "median": int(statistics.median(ordered)),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max": ordered[-1],
    }


def _share(found: Mapping[str, bool], chosen: Sequence[AgentQuestion]) -> float:
    return round(sum(found[q.id] for q in chosen) / max(len(chosen), 1), 4)


def _halves(questions: Sequence[AgentQuestion]) -> list[str]:
    return sorted({q.half for q in questions}, key=lambda h: (h != "tune", h != "check", h))


def _shares(found: Mapping[str, bool], questions: Sequence[AgentQuestion]) -> dict[str, float]:
    """Share found overall, per half, per half of each round when the set has several, per tag
    (`tag:tool`: answered only by what a tool did or printed; `tag:two_fact`) and per session."""
    out: dict[str, float] = {"all": _share(found, questions)}
    halves = _halves(questions)
    for half in halves:
        out[half] = _share(found, [q for q in questions if q.half == half])
    rounds = sorted({q.round_no for q in questions})
    if len(rounds) > 1:
        for r in rounds:
            for half in halves:
                chosen = [q for q in questions if q.round_no == r and q.half == half]
                if chosen:
                    out[f"round{r}_{half}"] = _share(found, chosen)
    for tag in sorted({t for q in questions for t in q.tags}):
        out[f"tag:{tag}"] = _share(found, [q for q in questions if tag in q.tags])
    files = sorted({q.file for q in questions})
    if len(files) > 1:
        for f in files:
            out[f"session:{f}"] = _share(found, [q for q in questions if q.file == f])
    return out


def session_files(folder: Path, questions: Sequence[AgentQuestion]) -> list[str]:
    """The sessions the questions ask about, sorted; an error naming those not in `folder`."""
    files = sorted({q.file for q in questions})
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise InputError(f"{folder}: missing transcripts {', '.join(missing)}")
    return files


def run_agent_bench(
    folder: Path,
    questions: Sequence[AgentQuestion],
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    bank: MemoryBank | None = None,
    units: UnitOptions | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Retain the question set's sessions into one bank and score recall and the baseline
    (units made with `units` when given, to compare unit designs)."""
    files = session_files(folder, questions)
    with tempfile.TemporaryDirectory(prefix="lamina-agent-") as tmp:
        own = bank is None
        retain = RetainOptions(units=units) if units is not None else None
        mb = bank or MemoryBank(
            SQLiteStore(Path(tmp) / "lamina.db"), embedder, retain_options=retain
        )
        name = "agent-bench"
        documents: dict[str, str] = {}
        started = time.perf_counter()
        for f in files:
            report = mb.retain_file(folder / f, name)
            documents[report.document] = f
        retain_s = time.perf_counter() - started
        memories = list(mb.memories(name, with_embeddings=False))
        sizes: dict[str, list[int]] = {}
        for m in memories:
            sizes.setdefault(m.kind, []).append(count_text(m.text))
        records = [r for f in files for r in conversational_records(folder / f)]
        bm25 = _BM25([r.text for r in records])

        lamina: dict[int, dict[str, bool]] = {b: {} for b in budgets}
        baseline: dict[int, dict[str, bool]] = {b: {} for b in budgets}
        ceiling: dict[int, dict[str, bool]] = {b: {} for b in budgets}
        unbounded: dict[str, bool] = {}
        latencies: list[float] = []
        mb.embedder.embed_query("warm up")
        with Progress("questions", total=len(questions), unit="q") as progress:
            for done, q in enumerate(questions, 1):
                # The smallest memory that states each fact: a perfect ranking's cost.
                cheapest = [
                    min(
                        (
                            count_text(m.text)
                            for m in memories
                            if documents.get(m.document) == q.file
                            and states(part, m.text, m.first_line, m.last_line)
                        ),
                        default=None,
                    )
                    for part in q.needs
                ]
                unbounded[q.id] = all(c is not None for c in cheapest)
                ranked = bm25.rank(q.question)
                for b in budgets:
                    ceiling[b][q.id] = unbounded[q.id] and sum(c or 0 for c in cheapest) <= b
                    t0 = time.perf_counter()
                    result = mb.recall(q.question, name, RecallOptions(budget=b))
                    latencies.append((time.perf_counter() - t0) * 1000)
                    lamina[b][q.id] = found_in(
                        q,
                        (
                            (
                                documents.get(h.memory.document, ""),
                                h.text,
                                h.memory.first_line,
                                h.memory.last_line,
                            )
                            for h in result.hits
                        ),
                    )
                    taken = _fill(((i, records[i].tokens) for i in ranked), b)
                    baseline[b][q.id] = found_in(
                        q,
                        (
                            (r.file, r.text, r.first_line, r.last_line)
                            for r in (records[i] for i in taken)
                        ),
                    )
                progress.update(done)
        if own:
            mb.close()
    return {
        "questions": len(questions),
        "halves": {h: sum(q.half == h for q in questions) for h in _halves(questions)},
        "tags": {
            t: sum(t in q.tags for q in questions)
            for t in sorted({t for q in questions for t in q.tags})
        },
        "sessions": files,
        "memories": len(memories),
        "unit_tokens": {kind: _size_stats(v) for kind, v in sorted(sizes.items())},
        "retain_s": round(retain_s, 2),
        "recall_ms_median": round(statistics.median(latencies), 2) if latencies else 0.0,
        "lamina": {f"any@{b}": _shares(lamina[b], questions) for b in budgets},
        "bm25_records": {f"any@{b}": _shares(baseline[b], questions) for b in budgets},
        "ceiling": {
            **{f"any@{b}": _shares(ceiling[b], questions) for b in budgets},
            "unbounded": _shares(unbounded, questions),
        },
        "missed": {
            f"any@{b}": sorted(q.id for q in questions if not lamina[b][q.id]) for b in budgets
        },
    }


@click.command("agent")
@click.option(
    "--data",
    default=None,
    help="Folder of the sessions (default: the question set's folder under ../shared/data).",
)
@click.option(
    "--questions",
    "questions_path",
    default=None,
    help=f"A shipped question set ({', '.join(SHIPPED)}; default claude-code) or a file in "
    "the same shape.",
)
@count_option(
    "--budget", "budgets", at_least=1, multiple=True, help="Token budgets (default: 1000 and 1500)."
)
@count_option(
    "--max-tokens",
    at_least=0,
    help="Unit design to measure: the cap on a unit's tokens (0: one unit per turn, as before "
    "units had a cap).",
)
@count_option("--context-tokens", at_least=0, help="Prompt context.")
@click.option("--no-packing", is_flag=True, help="One part per statement.")
@click.option("--part-windows", is_flag=True, help="Windows of two parts within a turn too.")
@click.option("--no-tool-words", is_flag=True, help="Leave out what the user said through tools.")
@click.option("--no-subagents", is_flag=True, help="Leave out what inline subagents said and did.")
@click.option(
    "--no-activity", is_flag=True, help="No activity units (parts carry an actions line)."
)
@embedder_option()
@json_option
def agent_bench(
    data: str | None,
    questions_path: str | None,
    budgets: tuple[int, ...],
    max_tokens: int | None,
    context_tokens: int | None,
    no_packing: bool,
    part_windows: bool,
    no_tool_words: bool,
    no_subagents: bool,
    no_activity: bool,
    embedder_name: str,
    as_json: bool,
) -> None:
    """Recall on long agentic sessions: questions about decisions, causes, files, settings and
    numbers, scored as evidence found within a token budget, against BM25 over single
    conversational records.

    Example: lamina bench agent --json; lamina bench agent --questions entire-dev --json"""
    qset = load_question_set(questions_path)
    if data is None:
        found = shared_data_dir(qset.data)
        if found is None:
            raise InputError(f"no --data given and ../shared/data/{qset.data} not found")
        folder = found
    else:
        folder = Path(data)
    questions = qset.questions
    base = UnitOptions()
    units = UnitOptions(
        max_tokens=base.max_tokens if max_tokens is None else (max_tokens or None),
        context_tokens=base.context_tokens if context_tokens is None else context_tokens,
        pack=not no_packing,
        part_windows=part_windows,
        said_through_tools=not no_tool_words,
        subagents=not no_subagents,
        activity=not no_activity,
    )
    embedder = get_embedder(embedder_name)
    result = run_agent_bench(
        folder, questions, budgets or DEFAULT_BUDGETS, units=units, embedder=embedder
    )
    design = {
        "max_tokens": units.max_tokens,
        "context_tokens": units.context_tokens,
        "pack": units.pack,
        "part_windows": units.part_windows,
        "said_through_tools": units.said_through_tools,
        "subagents": units.subagents,
        "activity": units.activity,
    }
    emit(
        {
            "benchmark": "agent",
            "data": str(folder),
            "embedder": embedder.name,
            "units": design,
            **result,
        },
        as_json,
    )
