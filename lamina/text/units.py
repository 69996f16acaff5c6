"""Memory units: what retain stores, built from conversational turns (lamina.turns).

A **segment** runs from a turn start to the next one (a session change, as between LoCoMo
sessions, also starts one). Its unit text is what was said, line by line with the speaker: the
conversational text of each message, what the user said through tools (lamina.text.said:
answers to the agent's questions, plan approvals and rejections, messages typed while the agent
worked) and the plans the agent put up for approval, plus the tool activity condensed into short
lines of actions (`actions: Read app.py · Bash: pytest -q (error) · Edit app.py`), never pasted
whole. Synthetic records (host meta records, compaction summaries, sidechains, progress) add
nothing else to a turn, and a subagent's transcript is its own document. A compaction summary
(the message opening a continued session, a compaction agent's answer) restates the
conversation: it becomes `part` units of its own, spoken by `summary`, which recall shows
after the originals when those are in the bank, and in their place when they are not.

**Units a budget can hold.** A segment whose text fits `max_tokens` is one `turn` unit. A longer
one (an agentic turn: one prompt, hundreds of tool calls, many assistant messages) is cut into
`part` units of at most `max_tokens` tokens each: consecutive statements packed in order, each
part opening with the prompt it answers (cut to `context_tokens`) unless it holds the prompt
itself. Its tool activity goes into `activity` units: lines a question would use (what a
command was for, the command, a commit's whole message), each call followed by the few lines
its result printed that a question would look for (lamina.text.printed: the informative line
of an error, a test run's counts and failing tests, a commit's `[branch hash] subject`, a
linter's `file:line:col` lines, a pull request's URL, ...), packed under the cap (with
`activity` off, each part closes with the actions taken in its stretch instead, trimmed to
fit). A turn within the cap gets activity units too when a call printed something worth
keeping (its actions line names the calls already). Paths under the session's working
directory are shown relative to it. A statement too long for one part is split at paragraph,
line, sentence and word boundaries; nothing stated is dropped. Parts cover the segment's
records without overlap, except for the message a split statement came from.

A turn within the cap whose statements come from several messages (a LoCoMo exchange, a short
prompt and its answer) is stored as `line` units instead: one per message that says something,
one speaker's own words (`UnitOptions.lines`). Windows join `windows` consecutive whole turns or
lines, overlapping by windows-1 (with `part_windows`, also consecutive parts of one turn; never
across a turn boundary from a part), and never across a session change; activity units stand
beside them and are in no window. Secrets are redacted in what was said, and in what tools
printed, before anything is cut (`build_units(..., redact=...)`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..messages import SYNTHETIC_KINDS, Kind, Message, Role, ToolResultBlock, ToolUseBlock
from ..tokens import count_text
from ..turns import DEFAULT_RULES, TurnRules, clean_text, conversational_text, is_turn_start
from .actions import (
    Entry,
    Redact,
    action_entries,
    actions_line,
    activity_entries,
    cap_text,
    fit_actions,
    same,
)
from .printed import MAX_LINES as PRINTED_LINES
from .said import plan_text, user_said

__all__ = [
    "SUMMARY",
    "Segment",
    "Unit",
    "UnitOptions",
    "build_units",
    "memory_id",
    "memory_id_of",
    "segments",
    "split_text",
    "unit_keys",
    "units_signature",
    "whole_turns",
]

UNITS_VERSION = 6
"""Bumped whenever the unit rules change, so banks retained under older rules are rebuilt
(see `units_signature`)."""


@dataclass(frozen=True, slots=True)
class UnitOptions:
    windows: int = 4
    """Also store windows of this many consecutive units (0 or 1: none), within a session.
    Over `line` units (one speaker each), on LoCoMo (`lamina bench locomo`, any@10 / all@10 /
    evidence within 1,000 tokens): 2 lines 0.805 / 0.676 / 0.876, 3 lines 0.818 / 0.696 /
    0.904, 4 lines 0.825 / 0.703 / 0.904; over two-speaker turns, 2 turns 0.815 / 0.699 /
    0.880."""
    max_actions: int = 8
    """Action entries shown per unit; the rest are counted."""
    max_chars: int = 8_000
    """Unit text cap when `max_tokens` is None; longer texts keep their beginning and end."""
    max_tokens: int | None = 256
    """Hard cap on a unit's tokens: a turn over it is cut into parts (None: one unit per turn,
    cut to `max_chars`). Measured on the tuning half of `lamina bench agent` (share answered
    within 1,000 / 1,500 tokens, prompt context 48): 192 and 256 0.968 / 0.968, 320 0.935 /
    0.968, 400 0.903 / 0.935, 512 0.871 / 0.935, one unit per turn 0.839 / 0.871; with
    context 24, 192, 256 and 320 all 0.968 / 1.0."""
    context_tokens: int = 24
    """In a part that does not hold the prompt, the prompt it answers, cut to this many tokens
    (and to a quarter of the cap). On the tuning half at a 256 cap: 24 0.968 / 1.0, 48 0.968 /
    0.968, 96 0.968 / 0.968."""
    pack: bool = True
    """Parts pack consecutive statements up to the cap (False: one part per statement, which
    scored 0.871 / 0.935 on the tuning half at a 256 cap with three times as many memories)."""
    part_windows: bool = False
    """Windows also join consecutive parts of one turn (whole turns are always joined). Off:
    on the tuning half, windows of two or three parts scored the same with nearly twice as many
    memories."""
    said_through_tools: bool = True
    """Count what the user said through tools, and plans put up for approval, as said."""
    subagents: bool = True
    """Count what a subagent said inside its parent's transcript (older Claude Code writes a
    subagent's records inline, marked sidechain) as said, labelled `subagent`, and its tool
    activity as actions: in an orchestrating session that is where the work was done. They
    still start no turn. Off, as before, they added nothing."""
    window_step: int = 1
    """A window starts every this many units of a session (plus one ending with its last
    unit). On LoCoMo with 4-line windows (any@10 / all@10 / evidence within 1,000 tokens, any
    and all): step 1 0.825 / 0.703 / 0.905 / 0.799; step 2 0.830 / 0.705 / 0.911 / 0.796 with a
    fifth fewer memories, but all@1000t lower on both halves and all@10 on one, so not the
    default; 3 0.812 / 0.675 / 0.892 / 0.772; 4 0.791 / 0.657 / 0.879 / 0.765."""
    lines: bool = True
    """A turn within the cap that holds statements from several messages is stored as its
    statements: one `line` unit per message that says something (one speaker's own words),
    joined by windows, rather than one `turn`. A budget then holds more distinct statements
    and a question about one person finds their own words. On LoCoMo with 4-line windows
    any@10 0.825 against 0.815 for turns and 2-turn windows, better on both halves, and
    evidence within 1,000 tokens 0.893 against 0.880."""
    activity: bool = True
    """A turn cut into parts also gets `activity` units: its tool activity as lines a question
    would use (what a command was for, the command, a commit message or a reason given on the
    command line) and what each call printed that a question would look for
    (lamina.text.printed), packed under the cap; so does a turn within the cap when a call
    printed something. A part's actions line holds only what room its statements leave. On
    the tuning half of `lamina bench agent` (within 1,000 / 1,500 tokens) 0.825 / 0.895
    without them, 0.860 / 0.930 with call lines and errors' first lines. With what tools
    printed (on the shipped set 0.868 / 0.921 for all questions, 0.895 / 0.921 before; on the
    entire-dev set 0.552 / 0.615, before 0.438 / 0.500, its questions answered only by tool
    output 0.385 / 0.436, before 0.154 / 0.179). Recall treats them as pieces of their turn,
    like parts, that hide no statement and that no statement hides."""
    max_said_chars: int = 48_000
    """What is kept of one message's words: a longer one (a pasted log, a dumped file) keeps
    its first two thirds and last third of this many characters, cut at line ends, with a line
    saying how much was left out. Retain then takes time in proportion to what is kept: a 1 MB
    pasted log made 1,320 memories and took 56 s of CPU, capped a 40 MB one takes 3.8 s (the
    model's loading included); what a question asks of a paste is nearly always near its
    start (the command, the first error) or its end (the summary)."""
    summaries: bool = True
    """Keep compaction summaries as `part` units of their own, spoken by `summary` (see the
    module docstring); off, as before, they add nothing."""
    rules: TurnRules = field(default=DEFAULT_RULES)

    def __post_init__(self) -> None:
        if self.window_step < 1:
            raise ValueError(f"window_step must be at least 1, got {self.window_step}")
        if self.max_tokens is not None and self.max_tokens < _MIN_CAP:
            raise ValueError(f"max_tokens must be at least {_MIN_CAP}, got {self.max_tokens}")


_MIN_CAP = 32
"""The smallest cap a part can honour with its prompt context, a label and some words."""


def units_signature(options: UnitOptions) -> str:
    """A short tag of the unit rules: a bank retained under other rules is rebuilt."""
    described = (
        f"{UNITS_VERSION}|{options.windows}|{options.max_actions}|{options.max_chars}|"
        f"{options.max_tokens}|{options.context_tokens}|{options.pack}|{options.part_windows}|"
        f"{options.said_through_tools}|{options.lines}|{options.window_step}|{options.subagents}|"
        f"{options.activity}|{options.max_said_chars}|{options.summaries}|"
        f"{options.rules!r}"
    )
    return "u" + hashlib.sha1(described.encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    end: int
    """`messages[start:end]`."""


@dataclass(frozen=True, slots=True)
class Unit:
    key: str
    kind: str
    text: str
    record_ids: tuple[str, ...]
    occurred_at: datetime | None
    speakers: tuple[str, ...]
    first_line: int | None
    last_line: int | None
    parts: tuple[str, ...] = ()
    """For a window: the keys of the units it joins."""
    said_at: datetime | None = None
    """When it was said, where that differs from when it happened (a fact about last May)."""
    turn: str = ""
    """For a line: the key its turn would have as one unit (facts are read from whole turns)."""


def segments(messages: Sequence[Message], rules: TurnRules = DEFAULT_RULES) -> list[Segment]:
    """Cut a message sequence at turn starts and session changes."""
    out: list[Segment] = []
    start = 0
    session = messages[0].session_id if messages else None
    for i, message in enumerate(messages):
        if i == 0:
            continue
        new_session = message.session_id != session and message.session_id is not None
        if is_turn_start(message, rules) or new_session:
            out.append(Segment(start, i))
            start = i
            session = message.session_id
    if messages:
        out.append(Segment(start, len(messages)))
    return out


def _label(message: Message) -> str:
    return message.speaker or message.role.value


# -- what was said ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Said:
    """One statement of a segment: `label: text`, from `messages[index]`."""

    index: int
    label: str
    text: str


def cut_paste(text: str, limit: int) -> str:
    """`text` when it is within `limit` characters; else its first two thirds and last third
    of `limit`, cut at line ends where one is near, around a line naming what was left out."""
    if len(text) <= limit:
        return text
    head_end, tail_start = limit * 2 // 3, len(text) - limit // 3
    newline = text.rfind("\n", head_end - limit // 10, head_end)
    head_end = newline if newline > 0 else head_end
    newline = text.find("\n", tail_start, tail_start + limit // 10)
    tail_start = newline + 1 if newline >= 0 else tail_start
    left_out = tail_start - head_end
    return f"{text[:head_end]}\n[… {left_out:,} characters not kept …]\n{text[tail_start:]}"


def _statements(
    messages: Sequence[Message], options: UnitOptions, redact: Redact = same
) -> list[_Said]:
    out: list[_Said] = []
    keep = options.max_said_chars

    def kept(text: str) -> str:
        """What is kept of a statement (see `cut_paste`), redacted."""
        return redact(cut_paste(text, keep) if keep else text)

    tool_names: dict[str, str] = {}
    for i, message in enumerate(messages):
        for block in message.blocks:
            if isinstance(block, ToolUseBlock):
                tool_names[block.id] = block.name
        if options.said_through_tools:
            said = user_said(message, tool_names, options.rules)
            label = message.speaker or "user"
            out.extend(_Said(i, label, kept(text)) for text in said)
        if message.kind is Kind.SIDECHAIN and options.subagents:
            text = conversational_text(message, options.rules)
            if text:
                label = "subagent" if message.role is Role.ASSISTANT else "subagent's task"
                out.append(_Said(i, label, kept(text)))
            continue
        if message.kind in SYNTHETIC_KINDS or message.role is Role.SYSTEM:
            continue
        text = conversational_text(message, options.rules)
        if text:
            out.append(_Said(i, _label(message), kept(text)))
        if options.said_through_tools and message.role is Role.ASSISTANT:
            for block in message.blocks:
                if isinstance(block, ToolUseBlock) and (plan := plan_text(block)):
                    out.append(_Said(i, f"{_label(message)} (plan)", kept(clean_text(plan))))
    return out


_SENTENCE = re.compile(r"(?<=[.!?:;])\s+")


def _pieces_of(text: str) -> tuple[list[str], str]:
    """The text cut at its coarsest boundary present, with the separator that joins them."""
    for separator in ("\n\n", "\n"):
        if separator in text:
            return text.split(separator), separator
    sentences = _SENTENCE.split(text)
    if len(sentences) > 1:
        return sentences, " "
    words = text.split(" ")
    if len(words) > 1:
        return words, " "
    return [], ""


def _hard_cut(text: str, limit: int) -> list[str]:
    """A text with no boundary at all, cut into runs of at most `limit` tokens."""
    out: list[str] = []
    rest = text
    while rest:
        low, high = 1, len(rest)
        while low < high:  # the longest prefix within the limit
            mid = (low + high + 1) // 2
            if count_text(rest[:mid]) <= limit:
                low = mid
            else:
                high = mid - 1
        out.append(rest[:low])
        rest = rest[low:]
    return out


def split_text(text: str, limit: int) -> list[str]:
    """`text` in consecutive chunks of at most `limit` tokens each, cut at the coarsest
    boundaries that do it (paragraphs, lines, sentences, words); joined again they hold every
    word of the text, only whitespace at the cuts is lost."""
    limit = max(limit, 1)
    if count_text(text) <= limit:
        return [text] if text.strip() else []
    pieces, separator = _pieces_of(text)
    if not pieces:
        return _hard_cut(text, limit)
    out: list[str] = []
    current: list[str] = []
    used = 0
    for piece in pieces:
        if not piece.strip():
            continue
        cost = count_text(piece) + 1
        if cost > limit:
            if current:
                out.append(separator.join(current))
                current, used = [], 0
            out.extend(split_text(piece, limit))
            continue
        if current and used + cost > limit:
            out.append(separator.join(current))
            current, used = [], 0
        current.append(piece)
        used += cost
    if current:
        out.append(separator.join(current))
    # Counting pieces apart and together can differ by a token at the joins: check each.
    checked: list[str] = []
    for chunk in out:
        if count_text(chunk) <= limit:
            checked.append(chunk.strip())
        else:
            checked.extend(c.strip() for c in _hard_cut(chunk, limit))
    return [c for c in checked if c]


# -- units -------------------------------------------------------------------------------------
def _span(messages: Sequence[Message]) -> tuple[int | None, int | None]:
    lines_known = [m.source.line for m in messages if m.source.line is not None]
    ends = [m.source.end_line or m.source.line for m in messages]
    last_lines = [e for e in ends if e is not None]
    return (min(lines_known) if lines_known else None, max(last_lines) if last_lines else None)


def _unit(key: str, kind: str, text: str, messages: Sequence[Message], speakers: list[str]) -> Unit:
    first_line, last_line = _span(messages)
    return Unit(
        key=key,
        kind=kind,
        text=text,
        record_ids=tuple(m.id for m in messages),
        occurred_at=next((m.timestamp for m in messages if m.timestamp is not None), None),
        speakers=tuple(speakers),
        first_line=first_line,
        last_line=last_line,
    )


def _acting(messages: Sequence[Message], options: UnitOptions) -> list[Message]:
    """The messages whose tool activity a unit's actions line shows."""
    return [
        m
        for m in messages
        if m.kind not in SYNTHETIC_KINDS or (options.subagents and m.kind is Kind.SIDECHAIN)
    ]


def _speakers(said: Sequence[_Said]) -> list[str]:
    return list(dict.fromkeys(s.label.split(" (")[0] for s in said))


def _turn_units(messages: Sequence[Message], options: UnitOptions, redact: Redact) -> list[Unit]:
    """The units of one segment: one `turn`, or its `part`s when the turn is over the cap."""
    said = _statements(messages, options, redact)
    entries = action_entries(_acting(messages, options), redact)
    lines = [f"{s.label}: {s.text}" for s in said]
    actions = actions_line(entries, options.max_actions)
    if actions:
        lines.append(actions)
    if not lines:
        return []
    text = "\n".join(lines)
    cap = options.max_tokens
    if cap is None:
        return [
            _unit(
                messages[0].id, "turn", cap_text(text, options.max_chars), messages, _speakers(said)
            )
        ]
    if count_text(text) <= cap:
        apart = _lines(messages, said, actions) if options.lines else []
        whole = apart or [_unit(messages[0].id, "turn", text, messages, _speakers(said))]
        if options.activity:
            # Its actions line names each call already: activity units only for what the
            # calls printed.
            whole += _activity_units(messages, options, cap, redact, printed_only=True)
        return whole
    parts = _parts(messages, said, options, cap, redact)
    if options.activity:
        parts += _activity_units(messages, options, cap, redact)
    return parts


def _activity_units(
    messages: Sequence[Message],
    options: UnitOptions,
    cap: int,
    redact: Redact,
    *,
    printed_only: bool = False,
) -> list[Unit]:
    """A turn's tool activity in words, packed under the cap, each call with what it printed
    in one unit where they fit together (`printed_only`: none unless some call printed
    something). Without the prompt as context, unlike parts: on the tuning half of `lamina
    bench agent` the prompt's words made every activity unit of a session match questions
    about it (within 1,500 tokens 0.912 with the prompt, 0.930 without; within 1,000 the
    same)."""
    acting = {id(m) for m in _acting(messages, options)}
    entries = activity_entries(messages, redact, options.rules)
    entries = [e for e in entries if id(messages[e[0][0]]) in acting]
    if not entries or (printed_only and all(len(e) == 1 for e in entries)):
        return []
    room = cap - count_text("activity:") - 2
    groups: list[Entry] = []
    used = 0
    for entry in entries:
        # A call stays with what it printed, in one unit, unless together they are over the cap.
        chunks = [(i, c) for i, line in entry for c in split_text(line, max(room - 1, 4))]
        costs = [count_text(c) + 1 for _i, c in chunks]
        together = sum(costs) <= room
        if together and groups and used + sum(costs) > room:
            groups.append([])
            used = 0
        for chunk, cost in zip(chunks, costs, strict=True):
            if groups and used + cost <= room:
                groups[-1].append(chunk)
                used += cost
            else:
                groups.append([chunk])
                used = cost
    units: list[Unit] = []
    taken: dict[int, int] = {}
    for g, group in enumerate(groups):
        start = min(i for i, _c in group)
        end = groups[g + 1][0][0] + 1 if g + 1 < len(groups) else len(messages)
        # The stretch runs to the next group's first call (its results included), and at
        # least to the last result it shows lines of.
        end = max(end, max(i for i, _c in group) + 1)
        body = "\n".join(["activity:"] + [c for _i, c in group])
        n = taken.get(start, 0)
        taken[start] = n + 1
        key = f"{messages[start].id}~act{n}"
        stretch = messages[start:end]
        units.append(_unit(key, "activity", body, stretch, [_label(messages[start])]))
    return units


def _lines(messages: Sequence[Message], said: Sequence[_Said], actions: str) -> list[Unit]:
    """A turn's statements as `line` units, one per run of statements by one speaker (a
    person's message; a prompt, or the agent's messages up to the user's next words), each
    covering the messages up to the next run (the last one also carries the turn's actions);
    none when one speaker says everything."""
    runs: list[list[_Said]] = []
    for s in said:
        if runs and _speakers(runs[-1]) == _speakers([s]):
            runs[-1].append(s)
        else:
            runs.append([s])
    if len(runs) < 2:
        return []
    out: list[Unit] = []
    for n, run in enumerate(runs):
        start = run[0].index if n else 0
        end = runs[n + 1][0].index if n + 1 < len(runs) else len(messages)
        text = "\n".join(f"{s.label}: {s.text}" for s in run)
        if actions and n + 1 == len(runs):
            text += "\n" + actions
        key = messages[run[0].index].id
        unit = _unit(key, "line", text, messages[start : max(end, start + 1)], _speakers(run))
        out.append(replace(unit, turn=messages[0].id))
    return out


def _parts(
    messages: Sequence[Message],
    said: Sequence[_Said],
    options: UnitOptions,
    cap: int,
    redact: Redact,
) -> list[Unit]:
    prompt = next((s for s in said if s.index == 0), None)
    context = ""
    if prompt is not None:
        head = split_text(prompt.text, min(options.context_tokens, cap // 4))
        context = f"{prompt.label}: {head[0]}" + (" […]" if len(head) > 1 else "")
    room = cap - count_text(context) - 2
    # Every statement cut into pieces that fit a part next to the prompt's context.
    pieces: list[tuple[_Said, int, str]] = []
    for s in said:
        label_cost = count_text(f"{s.label}: ") + 1
        chunks = split_text(s.text, max(room - label_cost, 4))
        pieces.extend((s, n, f"{s.label}: {chunk}") for n, chunk in enumerate(chunks))
    groups: list[list[tuple[_Said, int, str]]] = []
    used = 0
    for piece in pieces:
        cost = count_text(piece[2]) + 1
        if groups and options.pack and used + cost <= room:
            groups[-1].append(piece)
            used += cost
        else:
            groups.append([piece])
            used = cost
    starts = [0] + [group[0][0].index for group in groups[1:]]
    units: list[Unit] = []
    for g, group in enumerate(groups):
        first, n, _text = group[0]
        start = starts[g]
        end = max(starts[g + 1] if g + 1 < len(groups) else len(messages), group[-1][0].index + 1)
        stretch = messages[start:end]
        lines = [p[2] for p in group]
        if context and not (first.index == 0 and n == 0):
            lines.insert(0, context)
        body = "\n".join(lines)
        # Its span covers every record whose words it carries: the prompt it opens with too
        # (the actions below are its own stretch's).
        carried = _with_prompt(messages, stretch) if context and start > 0 else stretch
        entries = action_entries(_acting(stretch, options), redact)
        # With activity units the actions are there, in more words: a part keeps its room for
        # what was said (tuning half the same, parts 220 tokens at the median, not 232).
        actions = (
            ""
            if options.activity
            else fit_actions(entries, options.max_actions, cap - count_text(body) - 1)
        )
        if actions:
            body += "\n" + actions
        key = f"{messages[first.index].id}#{n}"
        unit = _unit(key, "part", body, carried, _speakers([p[0] for p in group]))
        # It happened when its own stretch was said, not when the prompt was.
        units.append(replace(unit, occurred_at=_unit(key, "part", "", stretch, []).occurred_at))
    return units


def _with_prompt(messages: Sequence[Message], stretch: Sequence[Message]) -> list[Message]:
    """A part's records: the prompt of its turn (`messages[0]`, whose words it opens with),
    then its own stretch. Its span then runs from the prompt's line: "where was this said"
    finds both the prompt and the statements, and the part's records stay in file order."""
    return [messages[0], *(m for m in stretch if m is not messages[0])]


SUMMARY = "summary"
"""The speaker of a compaction summary's parts: a restatement of the conversation (recall
shows it after the originals when they are in the bank; see lamina.bank.recall)."""


def _summary_units(message: Message, options: UnitOptions, redact: Redact) -> list[Unit]:
    """A compaction summary (the message that opens a continued session, or a compaction
    agent's answer) as `part` units of its own, labelled `summary`, in no turn: where the
    conversation it restates is not in the bank (an earlier session not retained, or
    forgotten), it is what remains of it."""
    text = redact(conversational_text(message, options.rules))
    if not text:
        return []
    label = f"{SUMMARY}: "
    if options.max_tokens is None:
        chunks = [cap_text(text, options.max_chars)]
    else:
        chunks = split_text(text, options.max_tokens - count_text(label) - 1)
    return [
        _unit(f"{message.id}#{n}", "part", label + chunk, [message], [SUMMARY])
        for n, chunk in enumerate(chunks)
    ]


_WHOLE = ("turn", "line")
"""Units windows always join (parts only with `part_windows`, within their turn)."""


def _window_starts(count: int, size: int, step: int) -> list[int]:
    """Where the windows of a session's `count` units start: every `step` units, and one
    more ending with the session's last unit when the steps miss it."""
    starts = list(range(0, count - size + 1, step))
    if starts[-1] != count - size:
        starts.append(count - size)
    return starts


def _windows(
    base: Sequence[tuple[int, Unit]], session: Sequence[str | None], opts: UnitOptions
) -> list[Unit]:
    """Windows of `opts.windows` consecutive base units (`base`: each unit with its segment's
    number; `session`: each segment's session), within one session; a session with fewer
    units has one window of them all."""
    runs: list[list[tuple[int, Unit]]] = []
    for entry in base:
        if runs and session[runs[-1][-1][0]] == session[entry[0]]:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    out: list[Unit] = []
    for run in runs:
        size = min(opts.windows, len(run))
        if size < 2:
            continue
        for start in _window_starts(len(run), size, opts.window_step):
            group = [u for _n, u in run[start : start + size]]
            same_turn = len({n for n, _u in run[start : start + size]}) == 1
            if not all(u.kind in _WHOLE for u in group) and not (same_turn and opts.part_windows):
                continue
            out.append(
                Unit(
                    key=f"w{opts.windows}:{group[0].key}",
                    kind="window",
                    text=cap_text("\n".join(u.text for u in group), opts.max_chars * 2),
                    record_ids=tuple(dict.fromkeys(r for u in group for r in u.record_ids)),
                    occurred_at=group[0].occurred_at,
                    speakers=tuple(dict.fromkeys(s for u in group for s in u.speakers)),
                    first_line=group[0].first_line,
                    last_line=group[-1].last_line,
                    parts=tuple(u.key for u in group),
                )
            )
    return out


def build_units(
    messages: Sequence[Message], options: UnitOptions | None = None, redact: Redact | None = None
) -> tuple[list[Unit], list[Segment]]:
    """The units (turns or parts, and windows) of a message sequence, and the segments they
    came from. `redact`, when given, runs on every statement and action target before any
    cut (so a secret is never split where the redactor would no longer see it)."""
    opts = options or UnitOptions()
    segs = segments(messages, opts.rules)
    seen: dict[str, str] = {}

    def once(text: str) -> str:
        # A text redacted once per build (action targets are looked at for the turn and for
        # its part), so the redactor's count is not inflated.
        if text not in seen:
            seen[text] = redact(text) if redact is not None else text
        return seen[text]

    base: list[tuple[int, Unit]] = []
    for number, seg in enumerate(segs):
        turn = messages[seg.start : seg.end]
        base.extend((number, u) for u in _turn_units(turn, opts, once if redact else same))
    units = [u for _n, u in base]
    for message in messages:
        if opts.summaries and message.kind is Kind.COMPACT_SUMMARY:
            units.extend(_summary_units(message, opts, once if redact else same))
    if opts.windows > 1:
        # Activity units stand beside what was said: windows join what was said.
        said = [(n, u) for n, u in base if u.kind != "activity"]
        units.extend(_windows(said, [messages[seg.start].session_id for seg in segs], opts))
    return units, segs


def whole_turns(units: Sequence[Unit], wanted: Sequence[Unit]) -> list[Unit]:
    """The turns and parts among `wanted`, and for the lines among them, their whole turns
    (all the turn's lines among `units` joined, as the one `turn` unit it would be): the text
    facts are read from, with the question and its answer together."""
    out: list[Unit] = []
    done: set[str] = set()
    for unit in wanted:
        if unit.kind in ("turn", "part"):
            out.append(unit)
        elif unit.kind == "line" and unit.turn not in done:
            done.add(unit.turn)
            lines = [u for u in units if u.kind == "line" and u.turn == unit.turn]
            out.append(
                replace(
                    lines[0],
                    key=unit.turn,
                    kind="turn",
                    text="\n".join(u.text for u in lines),
                    record_ids=tuple(r for u in lines for r in u.record_ids),
                    speakers=tuple(dict.fromkeys(s for u in lines for s in u.speakers)),
                    last_line=lines[-1].last_line,
                    turn="",
                )
            )
    return out


def unit_keys(
    messages: Sequence[Message],
    segs: Sequence[Segment],
    units: Sequence[Unit],
    options: UnitOptions,
) -> list[tuple[str, str]]:
    """Every (kind, key) a unit built from these messages could have had, under these rules or
    others: where retain looks for memories that no longer exist (a turn that grew into parts,
    units of a bank retained under older rules). Turns and their windows are keyed by the
    message that starts a segment, parts by a message that says something."""
    pieces: dict[str, int] = {}
    for unit in units:
        if unit.kind == "part":
            message_id, _sep, number = unit.key.rpartition("#")
            pieces[message_id] = max(pieces.get(message_id, 0), int(number) + 1)
    starts = {messages[seg.start].id for seg in segs}
    everything = replace(options, said_through_tools=True)
    speaking = {messages[s.index].id for s in _statements(messages, everything)}
    keys: list[tuple[str, str]] = []
    # Windows of this many units, and of the sizes earlier rules used.
    sizes = sorted({2, 4, max(options.windows, 2)})
    for message in messages:
        if message.id in starts:
            keys += [("turn", message.id)]
            keys += [("window", f"w{w}:{message.id}") for w in sizes]
        if message.id in speaking:
            keys += [("line", message.id)]
            keys += [("window", f"w{w}:{message.id}") for w in sizes if message.id not in starts]
        calls = sum(isinstance(b, ToolUseBlock) for b in message.blocks)
        results = sum(isinstance(b, ToolResultBlock) for b in message.blocks)
        keys += [
            ("activity", f"{message.id}~act{n}")
            for n in range(2 * (calls + PRINTED_LINES * results))
        ]
        if message.id in speaking or message.id in pieces or message.kind is Kind.COMPACT_SUMMARY:
            for n in range(max(4, 2 * pieces.get(message.id, 0))):
                part = f"{message.id}#{n}"
                keys += [("part", part)] + [("window", f"w{w}:{part}") for w in sizes]
    return keys


def memory_id(document: str, unit: Unit) -> str:
    """Stable across retains: the same turn of the same document always has the same id."""
    return memory_id_of(document, unit.kind, unit.key)


def memory_id_of(document: str, kind: str, key: str) -> str:
    digest = hashlib.sha1(f"{document}\x00{kind}\x00{key}".encode()).hexdigest()
    return digest[:24]


def content_hash(unit: Unit, text: str) -> str:
    when = unit.occurred_at.isoformat() if unit.occurred_at else ""
    body = "\x00".join([text, when, *unit.record_ids])
    return hashlib.sha1(body.encode()).hexdigest()
