"""`lamina bench quiet`: does the prompt hook stay quiet when nothing in the bank answers?

A prompt that no memory answers ("write a haiku about autumn", "what's 17% of 240?") should get
no memories, not the least bad ten; a question about the project should still get them. For
each question set (`--questions`, default the shipped `claude-code` and `entire-dev` sets) its
sessions go into one bank, and every off-topic prompt (`--prompts`, default the shipped
`offtopic-dev` set, written for the claude-code-entire sessions) and every question of the set
is recalled as the prompt hook recalls a session's first prompt (its options,
`lamina.integrations.claude_code.prompt.prompt_options`; no transcript), twice: with the
floor off (the baseline, what the hook did before) and on (`lamina.bank.recall.Floor`). Both
with the dense channel (the warm path, and the cold one when the model is ready in time) and
without it (`lexical_only`: the cold path's answer when it is not; the floor is not applied
there, which the figures confirm).

Reported per set: the share of off-topic prompts that get memories with the floor off and on
(`quieted`: the share the floor silences), the share of questions that get memories and the
share whose answer is among them (found, as `lamina bench agent` scores it) with the floor off
and on, and a grid of both thresholds around the chosen ones, computed from the same recalls
(how sensitive the figures are to them). The prompts still answered and the questions
silenced are listed, so a change can be read and not only counted.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..bank.bank import MemoryBank
from ..bank.recall import Floor, FloorCheck, RecallResult
from ..embed import Embedder, get_embedder
from ..errors import InputError
from ..integrations.claude_code.prompt import PromptRequest, answer_prompt, prompt_options
from ..progress import Progress
from ..store.search import SearchFilter
from ..store.sqlite import SQLiteStore
from ..turns import clean_text
from .agent import SHIPPED, AgentQuestion, found_in, load_question_set, session_files
from .common import embedder_option, emit, json_option, shared_data_dir, shipped_or_file

__all__ = ["PROMPT_SETS", "load_ontopic", "load_prompts", "quiet_bench", "run_quiet_bench"]

PROMPT_SETS = {
    "offtopic-dev": "offtopic_prompts_dev.json",
    "offtopic-heldout": "offtopic_prompts_heldout.json",
}
"""Off-topic prompt sets shipped with the package, by the name `--prompts` accepts."""
DEFAULT_QUESTIONS = ("claude-code", "entire-dev")
DENSE_GRID = (0.24, 0.26, 0.28, 0.3, 0.32, 0.35)
COVERAGE_GRID = (0.4, 0.45, 0.5, 0.55, 0.6, 1.01)
"""Thresholds of the sensitivity grid (a coverage of 1.01: the dense score alone decides)."""
_OFF = Floor(0.0, 0.0)
_BUDGET = 1024


def load_prompts(source: str | None = None) -> list[str]:
    """A shipped prompt set (None or a name of `PROMPT_SETS`), or a file in the same shape:
    {"prompts": ["...", ...]}."""
    return [p for _file, p in _load(source, "prompts")]


def load_ontopic(source: str | None = None) -> list[tuple[str, str]]:
    """The (session file, prompt) pairs of a prompt set's "ontopic" list (none when it has
    none): prompts about one session, without answers marked, that must still get memories."""
    return [(f or "", p) for f, p in _load(source, "ontopic")]


def _load(source: str | None, key: str) -> list[tuple[str | None, str]]:
    name = "offtopic-dev" if source is None else source
    raw = shipped_or_file(name, PROMPT_SETS, "the prompts", "shipped")
    try:
        document = json.loads(raw)
        listed = document["prompts"] if key == "prompts" else document.get(key, [])
        if not isinstance(listed, list):
            raise TypeError(f"{key} is not a list")
        prompts: list[tuple[str | None, str]] = []
        for item in listed:
            if isinstance(item, str):
                prompts.append((None, item))
            elif isinstance(item, dict) and isinstance(item.get("prompt"), str):
                prompts.append((str(item.get("file", "")), item["prompt"]))
            else:
                raise TypeError(f"{key}: an entry is neither a prompt nor {{file, prompt}}")
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{name}: not a prompt set ({type(e).__name__}: {e})") from None
    return prompts


@dataclass(frozen=True, slots=True)
class _Asked:
    """One prompt recalled with the floor off and on (with or without the dense channel)."""

    injected: bool
    """Memories with the floor off."""
    kept: bool
    """Memories with the floor on."""
    check: FloorCheck
    found: bool = False
    """With the floor off, the memories hold the question's answer."""

    def quiet(self, dense: float, coverage: float) -> bool:
        """Whether a floor of these thresholds silences it (the same rule as `check_floor`)."""
        c = self.check
        above = c.dense is None or c.dated or c.dense >= dense or c.coverage >= coverage
        return self.injected and not above


def _share(flags: Sequence[bool]) -> float:
    return round(sum(flags) / max(len(flags), 1), 4)


def _ask(
    mb: MemoryBank, bank: str, text: str, floor: Floor, dense: bool
) -> tuple[RecallResult, RecallResult]:
    """Recall `text` as the prompt hook recalls a session's first prompt, floor off and on."""
    request = PromptRequest(prompt=text, bank=bank, budget=_BUDGET)
    query = clean_text(text)[: request.max_query_chars]
    model = mb.embedder_for(bank).name
    off = prompt_options(request, model)
    on = prompt_options(
        PromptRequest(
            prompt=text,
            bank=bank,
            budget=_BUDGET,
            floor_dense=floor.dense,
            floor_coverage=floor.coverage,
        ),
        model,
    )
    return mb.recall(query, bank, off, dense=dense), mb.recall(query, bank, on, dense=dense)


def _grid(offtopic: Sequence[_Asked], ontopic: Sequence[_Asked]) -> list[dict[str, Any]]:
    rows = []
    for d in DENSE_GRID:
        for c in COVERAGE_GRID:
            rows.append(
                {
                    "dense": d,
                    "coverage": c,
                    "offtopic_quieted": _share([a.quiet(d, c) for a in offtopic]),
                    "ontopic_injected": _share([a.injected and not a.quiet(d, c) for a in ontopic]),
                    "ontopic_found": _share([a.found and not a.quiet(d, c) for a in ontopic]),
                }
            )
    return rows


@dataclass(frozen=True, slots=True)
class _Run:
    """Every prompt and question recalled in one bank (or several: concatenated)."""

    offtopic: list[tuple[str, _Asked]]
    ontopic: list[tuple[str, _Asked]]

    def __add__(self, other: _Run) -> _Run:
        return _Run(self.offtopic + other.offtopic, self.ontopic + other.ontopic)


def _measure(
    mb: MemoryBank,
    bank: str,
    documents: Mapping[str, str],
    questions: Sequence[AgentQuestion],
    prompts: Sequence[str],
    floor: Floor,
    dense: bool,
    progress: Progress,
    done: list[int],
) -> _Run:
    run = _Run([], [])
    for prompt in prompts:
        off, on = _ask(mb, bank, prompt, floor, dense)
        assert on.floor is not None
        run.offtopic.append((prompt, _Asked(bool(off.hits), bool(on.hits), on.floor)))
        done[0] += 1
        progress.update(done[0])
    for q in questions:
        off, on = _ask(mb, bank, q.question, floor, dense)
        assert on.floor is not None
        spans = (
            (documents.get(h.memory.document, ""), h.text, h.memory.first_line, h.memory.last_line)
            for h in off.hits
        )
        run.ontopic.append(
            (q.id, _Asked(bool(off.hits), bool(on.hits), on.floor, found_in(q, spans)))
        )
        done[0] += 1
        progress.update(done[0])
    return run


def _report(run: _Run, grid: bool) -> dict[str, Any]:
    offtopic = [a for _p, a in run.offtopic]
    ontopic = [a for _q, a in run.ontopic]
    return {
        "offtopic": {
            "prompts": len(offtopic),
            "injected_floor_off": _share([a.injected for a in offtopic]),
            "injected_floor_on": _share([a.kept for a in offtopic]),
            "quieted": _share([a.injected and not a.kept for a in offtopic]),
            "still_injected": [
                {
                    "prompt": p[:100],
                    "dense": a.check.dense and round(a.check.dense, 3),
                    "coverage": round(a.check.coverage, 3),
                    "dated": a.check.dated,
                }
                for p, a in run.offtopic
                if a.kept
            ],
        },
        "ontopic": {
            "questions": len(ontopic),
            "injected_floor_off": _share([a.injected for a in ontopic]),
            "injected_floor_on": _share([a.kept for a in ontopic]),
            "found_floor_off": _share([a.found for a in ontopic]),
            "found_floor_on": _share([a.found and a.kept for a in ontopic]),
            "quieted": [q for q, a in run.ontopic if a.injected and not a.kept],
            "found_and_quieted": [q for q, a in run.ontopic if a.found and not a.kept],
        },
        **({"grid": _grid(offtopic, ontopic)} if grid else {}),
    }


MID_POINTS = 8
"""Real prompts of each session (after its first) at which the mid-session case is asked."""


@dataclass(frozen=True, slots=True)
class _Midway:
    """A prompt asked mid-session: the transcript up to a real prompt's line, that session's
    own memories left out (the hook leaves out what the session still holds in context)."""

    prompt: str
    offtopic: bool
    injected_before: bool
    """Memories when the floor judged the query with its last turns (Lamina before)."""
    injected: bool
    """Memories when the floor judges the prompt alone (Lamina now)."""


def _midway(
    mb: MemoryBank, bank: str, path: Path, document: str, prompts: Sequence[str], floor: Floor,
    tmp: Path, start: int,
) -> list[_Midway]:  # fmt: skip
    """At up to MID_POINTS real prompts of the session at `path` (after its first), the real
    prompt and an off-topic one (`prompts`, in turn from `start`), each recalled as the prompt
    hook recalls mid-session, with the floor judging the prompt alone and, as before, the
    query with its last turns."""
    from ..readers import read_transcript

    lines = path.read_text(encoding="utf-8").splitlines()
    said = [
        (m.source.line, m.text)
        for m in read_transcript(str(path)).messages
        if m.kind.value == "prompt" and m.source.line
    ][1:]
    step = max(1, len(said) // MID_POINTS)
    asked: list[_Midway] = []
    for n, (line, real) in enumerate(said[::step][:MID_POINTS]):
        cut = tmp / f"{document}-{line}.jsonl"
        cut.write_text("\n".join(lines[: line - 1]) + "\n", encoding="utf-8")
        for text, off in ((real, False), (prompts[(start + n) % len(prompts)], True)):
            request = PromptRequest(
                prompt=text, bank=bank, session=document, transcript=str(cut), budget=_BUDGET,
                floor_dense=floor.dense, floor_coverage=floor.coverage,
            )  # fmt: skip
            before = answer_prompt(mb, request, {}, judge_alone=False)
            now = answer_prompt(mb, request, {})
            asked.append(_Midway(text, off, bool(before.context), bool(now.context)))
    return asked


def _midway_report(asked: Sequence[_Midway]) -> dict[str, Any]:
    off = [a for a in asked if a.offtopic]
    real = [a for a in asked if not a.offtopic]
    return {
        "offtopic": {
            "prompts": len(off),
            "injected_judging_query": _share([a.injected_before for a in off]),
            "injected": _share([a.injected for a in off]),
        },
        "real_prompts": {
            "prompts": len(real),
            "injected_judging_query": _share([a.injected_before for a in real]),
            "injected": _share([a.injected for a in real]),
            "quieted": [a.prompt[:100] for a in real if a.injected_before and not a.injected],
        },
    }


def run_quiet_bench(
    folder: Path,
    questions: Sequence[AgentQuestion],
    prompts: Sequence[str],
    floor: Floor,
    embedder: Embedder | None = None,
    per_session: bool = False,
    ontopic_prompts: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Retain the questions' sessions from `folder` into one bank (with `per_session`, each
    session into a bank of its own, asked its own questions and every prompt) and recall every
    prompt and question with the floor off and on, with the dense channel and without.
    `ontopic_prompts` ((session file, prompt) pairs) are asked, with the dense channel, of
    the bank holding their session, and must still get memories."""
    files = session_files(folder, questions)
    if floor.off:
        raise InputError("the floor to measure is off (a threshold of 0)")
    groups = [[f] for f in files] if per_session else [files]
    full = lexical = _Run([], [])
    developer: list[tuple[str, _Asked]] = []
    midway: list[_Midway] = []
    memories: list[int] = []
    with tempfile.TemporaryDirectory(prefix="lamina-quiet-") as tmp:
        store = SQLiteStore(Path(tmp) / "lamina.db")
        mb = MemoryBank(store, embedder)
        try:
            mb.embedder.embed_query("warm up")
            done = [0]
            total = 2 * (len(prompts) * len(groups) + len(questions))
            with Progress("prompts", total=total, unit="p") as progress:
                for number, group in enumerate(groups):
                    bank = f"quiet-bench-{number}"
                    documents: dict[str, str] = {}
                    for f in group:
                        documents[mb.retain_file(folder / f, bank).document] = f
                    memories.append(store.count_memories(bank, SearchFilter()))
                    asked = [q for q in questions if q.file in group]
                    for dense in (True, False):
                        run = _measure(
                            mb, bank, documents, asked, prompts, floor, dense, progress, done
                        )
                        if dense:
                            full = full + run
                        else:
                            lexical = lexical + run
                    # Mid-session the hook leaves out the session's own memories: a bank of
                    # one session has nothing else to inject, so it is not asked there.
                    for document, f in documents.items() if len(documents) > 1 else ():
                        midway += _midway(
                            mb, bank, folder / f, document, prompts, floor, Path(tmp),
                            len(midway),
                        )  # fmt: skip
                    for file, prompt in ontopic_prompts:
                        if file in group:
                            off, on = _ask(mb, bank, prompt, floor, True)
                            assert on.floor is not None
                            developer.append(
                                (prompt, _Asked(bool(off.hits), bool(on.hits), on.floor))
                            )
        finally:
            mb.close()
    return {
        "sessions": files,
        "banks": len(groups),
        "memories": memories,
        "dense": _report(full, grid=True),
        "lexical_only": _report(lexical, grid=False),
        "mid_session": _midway_report(midway),
        **(
            {
                "ontopic_prompts": {
                    "prompts": len(developer),
                    "injected_floor_off": _share([a.injected for _p, a in developer]),
                    "injected_floor_on": _share([a.kept for _p, a in developer]),
                    "quieted": [p[:100] for p, a in developer if a.injected and not a.kept],
                }
            }
            if developer
            else {}
        ),
    }


@click.command("quiet")
@click.option(
    "--questions",
    "question_sets",
    multiple=True,
    help=f"On-topic question sets: shipped ({', '.join(SHIPPED)}) or files in the same shape "
    f"(default: {' and '.join(DEFAULT_QUESTIONS)}). Each is measured in a bank of its own "
    "sessions.",
)
@click.option(
    "--prompts",
    "prompts_source",
    default=None,
    help=f"Off-topic prompts: shipped ({', '.join(PROMPT_SETS)}; default offtopic-dev) or a "
    'file {"prompts": [...]}.',
)
@click.option(
    "--data",
    default=None,
    help="Folder of the sessions (default: each question set's folder under ../shared/data).",
)
@click.option(
    "--floor-dense",
    type=click.FloatRange(0, 1, min_open=True),
    default=Floor().dense,
    show_default=True,
    help="The floor's dense score to measure.",
)
@click.option(
    "--floor-coverage",
    type=click.FloatRange(0, 1.01, min_open=True),
    default=Floor().coverage,
    show_default=True,
    help="The floor's lexical coverage to measure.",
)
@click.option(
    "--per-session",
    is_flag=True,
    help="A bank per session (asked that session's questions and every prompt) instead of "
    "one bank per question set: a project with one session, the floor's hardest case.",
)
@embedder_option()
@json_option
def quiet_bench(
    question_sets: tuple[str, ...],
    prompts_source: str | None,
    data: str | None,
    floor_dense: float,
    floor_coverage: float,
    per_session: bool,
    embedder_name: str,
    as_json: bool,
) -> None:
    """The prompt hook's floor: off-topic prompts silenced, and on-topic questions still
    answered, with the floor off (the baseline) and on, in the same run.

    Example: lamina bench quiet --json; lamina bench quiet --questions entire-dev --json"""
    prompts = load_prompts(prompts_source)
    floor = Floor(floor_dense, floor_coverage)
    embedder = get_embedder(embedder_name)
    sets: dict[str, Any] = {}
    for name in question_sets or DEFAULT_QUESTIONS:
        qset = load_question_set(name)
        if data is not None:
            folder = Path(data)
        else:
            found = shared_data_dir(qset.data)
            if found is None:
                raise InputError(f"no --data given and ../shared/data/{qset.data} not found")
            folder = found
        sets[name] = {
            "data": str(folder),
            **run_quiet_bench(
                folder,
                qset.questions,
                prompts,
                floor,
                embedder,
                per_session,
                load_ontopic(prompts_source),
            ),
        }
    emit(
        {
            "benchmark": "quiet",
            "embedder": embedder.name,
            "prompts": prompts_source or "offtopic-dev",
            "floor": {"dense": floor.dense, "coverage": floor.coverage},
            "budget": _BUDGET,
            "sets": sets,
        },
        as_json,
    )
