"""The recall query: what Lamina searches memory with before the next prompt.

It is the latest prompt plus the conversational text of the last N turns before it, one entry per
message, oldest first, each labelled with its role:

    user: can we cache the parsed config?
    assistant: Yes; the loader is pure, so an lru_cache on load() is enough.
    user: and what did we decide about the retry limit?

`context_turns` counts the turns *before* the latest prompt; the prompt itself is never one of
them and never appears twice (a transcript that already holds it is not read twice). The whole
string, labels and newlines included, is capped at `max_chars`: the newest context entries are
kept whole while they fit, and the one that does not fit is shortened to the room left (its
beginning kept, where a reply or a question usually says what it is about, ending in "…"), so one
long reply never leaves the query as the bare prompt; older entries are dropped. The prompt is
kept, and cut only when it alone is over the cap (its beginning and its end are kept, joined by
" … ", since a pasted log often carries the question at either end).
The work is bounded: the transcript is walked backwards and the walk stops once N turns are
gathered or the cap is reached, so a huge transcript costs no more than a small one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ReadWarning
from ..messages import SYNTHETIC_KINDS, Message, Role
from ..readers import detect_format, get_reader
from ..readers.base import WarningSink
from ..readers.claude_code import read_tail
from ..turns import DEFAULT_RULES, TurnRules, clean_text, conversational_text, is_turn_start

__all__ = ["QueryOptions", "RecallQuery", "compose_recall_query", "recall_query_for_file"]

MIN_SHORTENED = 40
"""A context entry that does not fit is shortened to the room left when that holds at least
this many characters of it (less says too little to help recall)."""


@dataclass(frozen=True, slots=True)
class QueryOptions:
    context_turns: int = 3
    """Turns of context before the latest prompt (the prompt is not counted among them)."""
    max_chars: int = 800
    """Cap on the whole composed query, labels and separators included."""
    roles: frozenset[Role] = frozenset({Role.USER, Role.ASSISTANT})
    """Whose words enter the context."""
    rules: TurnRules = field(default=DEFAULT_RULES)

    def __post_init__(self) -> None:
        if self.context_turns < 0:
            raise ValueError(f"context_turns must be 0 or more, got {self.context_turns}")
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {self.max_chars}")


@dataclass(frozen=True, slots=True)
class ContextEntry:
    role: Role
    text: str
    message_id: str

    def render(self) -> str:
        return f"{self.role.value}: {self.text}"


@dataclass(frozen=True, slots=True)
class RecallQuery:
    query: str
    """The composed query string (what recall searches with)."""
    prompt: str
    """The latest prompt's text as it appears in the query (cut if it alone was over the cap)."""
    context: tuple[ContextEntry, ...]
    """The context entries kept, oldest first."""
    turns: int
    """Conversational turns of context the kept entries come from (the prompt not counted)."""
    truncated: bool
    """True when the cap cut the context short (the oldest entry kept shortened, older ones
    dropped) or cut the prompt."""
    reached_start: bool = False
    """True when the walk ran out of transcript before it had what it wanted (callers reading a
    file from its end use this to know they must read further back)."""

    @property
    def chars(self) -> int:
        return len(self.query)


def compose_recall_query(
    messages: Sequence[Message],
    prompt: str | None = None,
    options: QueryOptions | None = None,
) -> RecallQuery:
    """Compose the recall query for the next prompt.

    With `prompt` None, the transcript's last turn is the prompt. With a prompt given, a
    transcript whose last turn already says the same thing is not counted twice.
    """
    opts = options or QueryOptions()
    rules = opts.rules
    end = len(messages)

    # Find the prompt: the given text, or the last turn start of the transcript.
    i = end - 1
    if prompt is None:
        while i >= 0 and not is_turn_start(messages[i], rules):
            i -= 1
        if i < 0:  # no turn at all: nothing to ask about
            return RecallQuery("", "", (), 0, truncated=False, reached_start=True)
        prompt_text = conversational_text(messages[i], rules)
        i -= 1
    else:
        prompt_text = clean_text(prompt, rules)
        j = i
        while j >= 0 and not is_turn_start(messages[j], rules):
            j -= 1
        if j >= 0 and conversational_text(messages[j], rules) == prompt_text:
            i = j - 1  # the transcript already holds this prompt: start the context before it

    prompt_line = f"{Role.USER.value}: {prompt_text}" if prompt_text else ""
    if len(prompt_line) > opts.max_chars:
        prompt_text = _cut(prompt_text, opts.max_chars - len(f"{Role.USER.value}: "))
        prompt_line = f"{Role.USER.value}: {prompt_text}"[: opts.max_chars]
        return RecallQuery(prompt_line, prompt_text, (), 0, truncated=True)

    # Walk backwards through the context turns, newest first, while entries still fit.
    budget = opts.max_chars - len(prompt_line) - (1 if prompt_line else 0)
    kept: list[ContextEntry] = []
    turns_seen = turns_kept = 0
    kept_in_turn = truncated = False
    while i >= 0 and turns_seen < opts.context_turns:
        message = messages[i]
        starts_turn = is_turn_start(message, rules)
        if _speaks(message, starts_turn, opts.roles):
            text = conversational_text(message, rules)
            if text:
                entry = ContextEntry(message.role, text, message.id)
                cost = len(entry.render()) + 1
                if cost > budget:
                    truncated = True  # the cap drops the oldest entries: stop gathering
                    room = budget - (len(entry.render()) - len(text)) - 1
                    if room >= MIN_SHORTENED:  # this one shortened to the room left
                        kept.append(ContextEntry(message.role, _start(text, room), message.id))
                        kept_in_turn = True
                    break
                kept.append(entry)
                kept_in_turn = True
                budget -= cost
        if starts_turn:
            turns_seen += 1
            turns_kept += kept_in_turn
            kept_in_turn = False
        i -= 1
    turns_kept += kept_in_turn  # entries before the first turn start of the transcript

    kept.reverse()
    lines = [e.render() for e in kept] + ([prompt_line] if prompt_line else [])
    reached_start = i < 0 and not truncated and turns_seen < opts.context_turns
    query = "\n".join(lines)
    return RecallQuery(query, prompt_text, tuple(kept), turns_kept, truncated, reached_start)


def _start(text: str, limit: int) -> str:
    """The beginning of `text` within `limit` characters, cut at a word where one is near,
    ending in "…"."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit * 3 // 4:
        head = head[:space]
    return head.rstrip() + "…"


def _cut(text: str, limit: int) -> str:
    """Text cut to `limit` characters, keeping its beginning and its end."""
    if len(text) <= limit:
        return text
    marker = " … "
    if limit <= len(marker) + 2:
        return text[:limit]
    head = (limit - len(marker)) // 2
    tail = limit - len(marker) - head
    return f"{text[:head]}{marker}{text[-tail:]}"


def _speaks(message: Message, starts_turn: bool, roles: frozenset[Role]) -> bool:
    """Whether a message can contribute a context entry: a turn start, or a reply of a role
    asked for; never a synthetic record (sidechains, compaction summaries, host notices)."""
    if message.role not in roles or message.kind in SYNTHETIC_KINDS:
        return False
    return starts_turn or message.role is not Role.USER


def recall_query_for_file(
    path: str,
    prompt: str | None = None,
    options: QueryOptions | None = None,
    *,
    format: str | None = None,
    warn: WarningSink | None = None,
    window: int = 256 * 1024,
) -> RecallQuery:
    """Compose the recall query from a transcript file. Claude Code transcripts are read from
    their end, a window at a time (doubling), so the cost follows what the query needs, not the
    size of the file."""
    sink: WarningSink = warn or (lambda _w: None)
    reader = get_reader(format, path) if format else detect_format(path)
    if reader.name != "claude-code":
        return compose_recall_query(list(reader.read(path, sink)), prompt, options)
    seen: set[ReadWarning] = set()

    def once(w: ReadWarning) -> None:  # a growing window re-reads lines; report each once
        if w not in seen:
            seen.add(w)
            sink(w)

    while True:
        messages, whole = read_tail(path, window, once)
        result = compose_recall_query(messages, prompt, options)
        if whole or not result.reached_start:
            return result
        window *= 4
