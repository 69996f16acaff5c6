"""The recall query: what Lamina searches memory with before the next prompt.

It is the latest prompt plus the conversational text of the last N turns before it, one entry per
message, oldest first, each labelled with its role:

    user: can we cache the parsed config?
    assistant: Yes; the loader is pure, so an lru_cache on load() is enough.
    user: and what did we decide about the retry limit?

`context_turns` counts the turns *before* the latest prompt; the prompt itself is never one of
them and never appears twice (a transcript whose last turn already is this prompt, not yet
replied to, is not read twice; the same words asked again after a reply are a new asking). The
whole string, labels and newlines included, is capped at `max_chars`: the newest context entries are
kept whole while they fit, and the one that does not fit is shortened to the room left (its
beginning kept, where a reply or a question usually says what it is about, ending in "…"), so one
long reply never leaves the query as the bare prompt; older entries are dropped. The prompt is
kept, and cut only when it alone is over the cap (its beginning and its end are kept, joined by
" … ", since a pasted log often carries the question at either end).
The work is bounded: the transcript is walked backwards and the walk stops once N turns are
gathered or the cap is reached, so a huge transcript costs no more than a small one.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ReadWarning
from ..messages import SYNTHETIC_KINDS, Message, Role
from ..readers import detect_format, get_reader
from ..readers.base import (
    Line,
    LineTailReader,
    TailReader,
    WarningSink,
    iter_json_lines,
    next_line_start,
    tail_start,
)
from ..readers.claude_code import claude_code_builder, is_subagent_file
from ..readers.gemini import chat_messages, first_mentions, is_jsonl, record_ids
from ..turns import DEFAULT_RULES, TurnRules, clean_text, conversational_text, is_turn_start

__all__ = [
    "QueryOptions",
    "RecallQuery",
    "TailQueries",
    "compose_recall_query",
    "only_appended",
    "recall_query_for_file",
]

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


DEFAULT_WINDOW = 256 * 1024
"""The bytes of a transcript's end `recall_query_for_file` reads first."""


def compose_recall_query(
    messages: Sequence[Message],
    prompt: str | None = None,
    options: QueryOptions | None = None,
) -> RecallQuery:
    """Compose the recall query for the next prompt.

    With `prompt` None, the transcript's last turn is the prompt. With a prompt given, a
    transcript whose last turn already says the same thing, with no reply after it, is not
    counted twice. (Deciding that needs only the messages back to the last turn or reply, so a
    file's end decides it whenever the query does not reach further back.)
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
            if _speaks(messages[j], False, opts.roles) and conversational_text(messages[j], rules):
                j = -1  # a reply came after the last turn: that was an earlier asking
                break
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
    window: int | None = None,
) -> RecallQuery:
    """Compose the recall query from a transcript file. A transcript whose reader can read a
    file's end alone (`TailReader`: Claude Code, Codex, Gemini, Copilot) is read from its end,
    a window at a time (growing fourfold while the query wants turns from before it), so the
    cost follows what the query needs, not the size of the file; the query is the one a whole
    read gives."""
    sink: WarningSink = warn or (lambda _w: None)
    window = window or DEFAULT_WINDOW
    reader = get_reader(format, path) if format else detect_format(path)
    if not isinstance(reader, TailReader):
        return compose_recall_query(list(reader.read(path, sink)), prompt, options)
    seen: set[ReadWarning] = set()

    def once(w: ReadWarning) -> None:  # a growing window re-reads lines; report each once
        if w not in seen:
            seen.add(w)
            sink(w)

    if isinstance(reader, LineTailReader):
        return _query_by_spans(reader, path, prompt, options, window, once)
    while True:
        messages, whole = reader.read_tail(path, window, once)
        result = compose_recall_query(messages, prompt, options)
        if whole or not result.reached_start:
            return result
        window *= 4


def _query_by_spans(
    reader: LineTailReader,
    path: str,
    prompt: str | None,
    options: QueryOptions | None,
    window: int,
    warn: WarningSink,
) -> RecallQuery:
    """`recall_query_for_file` for a format read in spans: each wider window reads only the
    lines before those the narrower one read, and puts their messages in front."""
    messages: list[Message] = []
    read_from: int | None = None  # where the lines read so far begin
    while True:
        start = tail_start(path, window)
        low = start or 0
        if read_from is None or low < read_from:
            messages[:0] = reader.read_span(path, low, read_from, warn)
            read_from = low
        result = compose_recall_query(messages, prompt, options)
        if start is None or not result.reached_start:
            return result
        window *= 4


_FINGERPRINT = 64
"""Bytes before the read position kept to tell an appended file from a rewritten one."""


def _ignore(_w: ReadWarning) -> None:
    return None


@dataclass(slots=True)
class _Tail:
    """What a `TailQueries` keeps of one transcript: the messages built so far (those that
    can still fall in the window), the builder that made them (to go on with the next lines)
    and where reading stopped."""

    ino: tuple[int, int]
    start: int
    """Where the kept messages begin (a line start; 0 when built from the first line)."""
    read_to: int
    """Just past the last complete line fed to the builder."""
    fingerprint: bytes
    """The bytes just before `read_to`."""
    builder: Any
    messages: list[Message]
    reach: int = -1
    """How far the messages no longer kept reached (just past their last line)."""
    subagent: bool | None = None
    """Whether the file is a subagent's own, as a read of its end decides (once needed)."""
    spans: LineTailReader | None = None
    """The reader of a format read in spans (Codex, Copilot), which needs no builder kept."""
    chat: bool = False
    """A Gemini chat (JSON Lines): its parsed lines are kept in `lines`, not messages."""
    lines: list[Line] = field(default_factory=list)
    mentions: dict[bytes, int] = field(default_factory=dict)
    """A Gemini chat's ids, each with where the file first names it (lamina.readers.gemini.
    first_mentions): whether a message's first copy is before a window."""


def only_appended(
    handle: Any,
    ino: tuple[int, int],
    size: int,
    known_ino: tuple[int, int],
    known_size: int,
    fingerprint: bytes,
) -> bool:
    """Whether an open file (`ino`: its device and inode, `size` now) is the one seen before at
    `known_size` bytes, only appended to since: the same file, no shorter, and the
    `fingerprint` bytes that ended it still in place. Moves the handle's position."""
    if ino != known_ino or size < known_size:
        return False
    if fingerprint:
        handle.seek(known_size - len(fingerprint))
        if handle.read(len(fingerprint)) != fingerprint:
            return False
    return True


class TailQueries:
    """Recall queries for transcripts that keep growing, for a long-lived process (the warm
    server): per transcript it keeps the messages of the file's last window and reads only the
    bytes appended since the previous query. Each answer is the one `recall_query_for_file`
    gives for the same file and prompt; whenever the kept state cannot give that with certainty
    (the file shrank, was replaced or rewritten, the query needs messages from before the
    window, message ids clash), it reads the file as `recall_query_for_file` does. Claude Code
    transcripts, Codex rollouts and Copilot sessions keep messages; a Gemini chat (JSON Lines)
    keeps its parsed lines, since a message appended again moves to its first copy's place.
    Other formats are read anew each time.

    Memory is bounded: the `sessions` most recently used transcripts, each holding the
    messages (or lines) of one span. Safe to share between threads (one query at a time)."""

    def __init__(self, sessions: int = 8, window: int = DEFAULT_WINDOW, spans: int = 2) -> None:
        if sessions < 1 or window < 1 or spans < 1:
            raise ValueError("sessions, window and spans must be at least 1")
        self.sessions = sessions
        self.window = window
        self.span = window * 4 ** (spans - 1)
        """Bytes of each transcript's end whose messages are kept: the windows a fresh read
        tries first (`window`, then 4 times as many, `spans` of them)."""
        self.kept: OrderedDict[str, _Tail] = OrderedDict()
        self.hits = 0
        """Queries answered from kept state (appended bytes read only)."""
        self.rereads = 0
        """Queries for which the file was read as `recall_query_for_file` reads it."""
        self._lock = threading.Lock()

    def query(
        self, path: str, prompt: str | None = None, options: QueryOptions | None = None
    ) -> RecallQuery:
        with self._lock:
            return self._query(path, prompt, options or QueryOptions())

    def _query(self, path: str, prompt: str | None, opts: QueryOptions) -> RecallQuery:
        try:
            result = self._from_kept(path, prompt, opts)
        except Exception:  # what was kept is dropped, never trusted; the file is read anew
            self.kept.pop(path, None)
            result = None
        if result is not None:
            self.hits += 1
            return result
        self.rereads += 1
        return recall_query_for_file(path, prompt, opts, window=self.window)

    def _from_kept(self, path: str, prompt: str | None, opts: QueryOptions) -> RecallQuery | None:
        with Path(path).open("rb") as handle:
            st = os.fstat(handle.fileno())
            size, ino = st.st_size, (st.st_dev, st.st_ino)
            tail = self.kept.get(path)
            if tail is not None and not self._trusted(tail, handle, size, ino):
                tail = None
            if tail is None:
                tail = self._new(path, handle, size, ino)
                if tail is None:
                    return None
            self.kept[path] = tail
            self.kept.move_to_end(path)
            while len(self.kept) > self.sessions:
                self.kept.popitem(last=False)
            handle.seek(tail.read_to)
            appended = handle.read(max(0, size - tail.read_to))
        if tail.spans is not None:
            return self._from_spans(tail, tail.spans, path, size, appended, prompt, opts)
        if tail.chat:
            return self._from_chat(tail, path, size, appended, prompt, opts)
        complete = tail.read_to + appended.rfind(b"\n") + 1
        if complete > tail.read_to:
            lines = iter_json_lines(
                path, _ignore, start=tail.read_to, stop=complete, first_line=None
            )
            for line in lines:
                tail.messages.extend(tail.builder.feed(line))
            done = appended[: complete - tail.read_to]
            tail.fingerprint = (tail.fingerprint + done)[-_FINGERPRINT:]
            tail.read_to = complete
        # The open response and a last line still being written, as a fresh read sees them.
        probe = tail.builder.fork()
        extra: list[Message] = []
        if complete < size:
            for line in iter_json_lines(path, _ignore, start=complete, first_line=None):
                extra.extend(probe.feed(line))
        extra.extend(probe.flush())
        _forget_before(tail, size - self.span)
        messages = tail.messages + extra
        # As `recall_query_for_file`: the messages of the last `window` bytes, then of 4 times
        # as many while the query wants more. A read starting at the first line at or after
        # `low` gives the kept messages from `low` on, save for a response begun before `low`
        # (whole here, in part there, and first): it must not be one the query needs.
        window = self.window
        while window <= self.span:
            if window >= size:  # a fresh read reads the whole file, as the builder did
                if tail.start == 0 and tail.reach < 0:
                    return compose_recall_query(messages, prompt, opts)
                return None
            if tail.subagent is None:
                tail.subagent = is_subagent_file(path)
            if tail.builder.subagent not in (None, tail.subagent):
                return None  # a fresh read of the end takes the file for another kind
            low = size - window
            first = 0
            while first < len(messages) and _offset(messages[first]) < low:
                first += 1
            inside = messages[first:]
            if any(_offset(m) < low or "#" in m.id for m in inside):
                return None
            result = compose_recall_query(inside, prompt, opts)
            if not result.reached_start:
                return result
            # The fresh read reached its start too, unless a response begun before its first
            # line goes on after it (that response's later lines are the read's first message).
            # A subagent's response found inline is such a part too, but never speaks.
            with Path(path).open("rb") as handle:
                begin = next_line_start(handle, low)
            if tail.reach > begin or any(
                _end(m) > begin and not (tail.subagent is False and _all_sidechain(m))
                for m in messages[:first]
            ):
                return None
            window *= 4
        return None

    def _from_spans(
        self,
        tail: _Tail,
        reader: LineTailReader,
        path: str,
        size: int,
        appended: bytes,
        prompt: str | None,
        opts: QueryOptions,
    ) -> RecallQuery | None:
        """`_from_kept` for a format read in spans: the appended lines are read alone, and the
        messages from a window's first line on are the ones a fresh read of that window gives
        (as far as the query can tell: `LineTailReader`)."""
        complete = tail.read_to + appended.rfind(b"\n") + 1
        if complete > tail.read_to:
            tail.messages.extend(reader.read_span(path, tail.read_to, complete, _ignore))
            done = appended[: complete - tail.read_to]
            tail.fingerprint = (tail.fingerprint + done)[-_FINGERPRINT:]
            tail.read_to = complete
        # A last line still being written, as a fresh read sees it.
        extra = list(reader.read_span(path, complete, None, _ignore)) if complete < size else []
        _forget_before(tail, size - self.span)
        messages = tail.messages + extra
        window = self.window
        while window <= self.span:
            if window >= size:  # a fresh read reads the whole file
                if tail.start == 0 and tail.reach < 0:
                    return compose_recall_query(messages, prompt, opts)
                return None
            # A fresh read begins at the first line starting at or after `low`: the kept
            # messages from `low` on (kept from a line start at or before it, none dropped).
            low = size - window
            first = 0
            while first < len(messages) and _offset(messages[first]) < low:
                first += 1
            result = compose_recall_query(messages[first:], prompt, opts)
            if not result.reached_start:
                return result
            window *= 4
        return None

    def _from_chat(
        self, tail: _Tail, path: str, size: int, appended: bytes, prompt: str | None,
        opts: QueryOptions,
    ) -> RecallQuery | None:  # fmt: skip
        """`_from_kept` for a Gemini chat (JSON Lines), whose message appended again is read at
        the place of its first copy: the parsed lines are kept (those of the last `span`
        bytes) and each window's messages built from them, starting, as `read_gemini_tail`
        does, at the line of a first copy written before the window."""
        complete = tail.read_to + appended.rfind(b"\n") + 1
        if complete > tail.read_to:
            done = appended[: complete - tail.read_to]
            first_mentions(done, tail.read_to, tail.mentions)
            tail.lines.extend(
                iter_json_lines(path, _ignore, start=tail.read_to, stop=complete, first_line=None)
            )
            tail.fingerprint = (tail.fingerprint + done)[-_FINGERPRINT:]
            tail.read_to = complete
        extra = []  # a last line still being written, as a fresh read sees it
        if complete < size:
            extra = list(iter_json_lines(path, _ignore, start=complete, first_line=None))
        drop = 0
        while drop < len(tail.lines) and tail.lines[drop].offset < size - self.span:
            tail.reach = max(tail.reach, tail.lines[drop].end)
            drop += 1
        del tail.lines[:drop]
        lines = tail.lines + extra
        window = self.window
        while window <= self.span:
            # Where a fresh read begins: the first line starting in the window.
            start = 0 if window >= size else _line_start(path, size - window)
            while start > 0:
                inside = [line for line in lines if line.offset >= start]
                messages = list(chat_messages(path, inside, _ignore))
                ids = record_ids(messages)
                earlier = [at for i in ids if (at := tail.mentions.get(i, start)) < start]
                if not earlier:
                    break
                at = min(earlier)  # the read starts at the line of that first copy instead
                line = next((x for x in tail.lines if x.offset <= at < x.end), None)
                if line is None:
                    return None  # before what was kept, or a line that does not parse
                start = line.offset
            if start == 0:  # a fresh read reads the whole file
                if tail.start == 0 and tail.reach < 0:
                    return compose_recall_query(list(chat_messages(path, lines, _ignore)),
                                                prompt, opts)  # fmt: skip
                return None
            result = compose_recall_query(messages, prompt, opts)
            if not result.reached_start:
                return result
            window *= 4
        return None

    def _trusted(self, tail: _Tail, handle: Any, size: int, ino: tuple[int, int]) -> bool:
        """Whether the file is the one read before, only appended to since."""
        return only_appended(handle, ino, size, tail.ino, tail.read_to, tail.fingerprint)

    def _new(self, path: str, handle: Any, size: int, ino: tuple[int, int]) -> _Tail | None:
        reader = detect_format(path)
        if isinstance(reader, LineTailReader):
            start = 0 if size <= self.span else _line_start(path, size - self.span)
            handle.seek(max(0, start - _FINGERPRINT))
            fingerprint = handle.read(start - max(0, start - _FINGERPRINT))
            return _Tail(ino, start, start, fingerprint, None, [], spans=reader)
        if reader.name == "gemini" and is_jsonl(path):
            start = 0 if size <= self.span else _line_start(path, size - self.span)
            handle.seek(0)
            before = handle.read(start)
            tail = _Tail(ino, start, start, before[-_FINGERPRINT:], None, [], chat=True)
            first_mentions(before, 0, tail.mentions)
            return tail
        if reader.name != "claude-code":
            return None
        if size <= self.span:  # from the first line, as a whole-file read (subagent undecided)
            return _Tail(ino, 0, 0, b"", claude_code_builder(path, _ignore), [])
        start = size - self.span
        handle.seek(start - 1)
        data = handle.read(self.span + 1)
        newline = data.find(b"\n")  # the first line starting at or after size - span
        start += newline if newline >= 0 else len(data)
        handle.seek(max(0, start - _FINGERPRINT))
        fingerprint = handle.read(start - max(0, start - _FINGERPRINT))
        subagent = is_subagent_file(path)
        builder = claude_code_builder(path, _ignore, subagent=subagent)
        return _Tail(ino, start, start, fingerprint, builder, [], subagent=subagent)


def _forget_before(tail: _Tail, low: int) -> None:
    """Keep only the messages of a tail from offset `low` on (none is needed before it again),
    remembering how far the ones let go reached."""
    drop = 0
    while drop < len(tail.messages) and _offset(tail.messages[drop]) < low:
        tail.reach = max(tail.reach, _end(tail.messages[drop]))
        drop += 1
    del tail.messages[:drop]


def _line_start(path: str, at: int) -> int:
    """The first line start at or after `at` (where a read of the file's end begins)."""
    with Path(path).open("rb") as handle:
        return next_line_start(handle, at)


def _all_sidechain(message: Message) -> bool:
    """Whether every record of a message is a subagent's (so is any part of it, read alone)."""
    return all(isinstance(r, dict) and r.get("isSidechain") for r in message.records)


def _end(message: Message) -> int:
    source = message.source
    return -1 if source is None or source.end_offset is None else source.end_offset


def _offset(message: Message) -> int:
    source = message.source
    return -1 if source is None or source.offset is None else source.offset
