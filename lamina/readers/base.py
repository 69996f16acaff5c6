"""The reader protocol, the registry, and the line splitter every JSONL reader shares.

A reader turns one source (a file) into `Message`s. It never raises on a damaged record: it calls
`warn(ReadWarning)` naming the file, line and reason, and goes on. It raises `ReadError` only when
the source as a whole cannot be read.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

import orjson

from ..errors import ReadError, ReadWarning, UnknownFormatError
from ..messages import Message, Source

__all__ = [
    "HEAD_BYTES",
    "IdMaker",
    "Line",
    "LineTailReader",
    "Reader",
    "TailReader",
    "WarningSink",
    "get_reader",
    "iter_json_lines",
    "json_object",
    "line_source",
    "next_line_start",
    "read_lines_tail",
    "register_reader",
    "registered_readers",
    "tail_start",
    "tool_arguments",
]

HEAD_BYTES = 64 * 1024
"""How much of a file `sniff` gets to look at."""

WarningSink = Callable[[ReadWarning], None]


@runtime_checkable
class Reader(Protocol):
    """A transcript format. Register one with `register_reader`."""

    name: str
    """Short format name used on the command line (`claude-code`, `openai`, ...)."""
    description: str

    def sniff(self, head: bytes, path: str) -> float:
        """Confidence in [0, 1] that a file starting with `head` is in this format."""
        ...

    def read(self, path: str, warn: WarningSink) -> Iterator[Message]:
        """The messages of the file, in order, streamed."""
        ...


@runtime_checkable
class TailReader(Protocol):
    """A reader that can read a file's end alone. The prompt hook's recall query needs only the
    last turns (lamina.bank.query.recall_query_for_file): a fresh hook process per prompt then
    pays for the end of a session, not for all of it."""

    def read_tail(self, path: str, window: int, warn: WarningSink) -> tuple[list[Message], bool]:
        """The messages of the file's last `window` bytes (from the first line that starts in
        them), each as a whole read gives it, save for what only the file's earlier lines
        would say (line numbers, the session id, ids made unique against earlier ones, copies
        of earlier records left out); and whether that read is the whole file. Where the
        format lets a record's place or content depend on lines before the window (a Gemini
        message appended again), the reader starts earlier, at the line that decides it, or
        reads the whole file and says so. (Claude Code's first message may be the later part
        of a response begun before the window, as its reader has always given it.)"""
        ...


@runtime_checkable
class LineTailReader(Protocol):
    """A `TailReader` that also reads spans: for a format whose every line's messages come from
    that line alone, as far as a recall query can tell (Codex, Copilot), what earlier lines
    add (the session id, the model, leaving out a compaction's copies of earlier items) never
    speaking. Such a file can be read in byte spans, back to front: a window widened further
    back reads only the lines before those already read (lamina.bank.query.
    recall_query_for_file), and a reader that stays alive reads only the lines appended since
    (lamina.bank.query.TailQueries)."""

    def read_span(
        self, path: str, start: int, stop: int | None, warn: WarningSink
    ) -> Iterator[Message]:
        """The messages of the lines from byte `start` (a line start; 0: the first line, with
        line numbers) to byte `stop` (a line start; None: the end of the file)."""
        ...


_REGISTRY: dict[str, Reader] = {}


def register_reader(reader: Reader, *, replace: bool = False) -> Reader:
    """Add a reader to the registry (built-in readers are registered the same way)."""
    if reader.name in _REGISTRY and not replace:
        raise ValueError(f"a reader named {reader.name!r} is already registered")
    _REGISTRY[reader.name] = reader
    return reader


def registered_readers() -> dict[str, Reader]:
    from . import _builtin_readers  # noqa: F401  (registers the built-in readers once)

    return dict(_REGISTRY)


def get_reader(name: str, path: str = "<input>") -> Reader:
    readers = registered_readers()
    try:
        return readers[name]
    except KeyError:
        known = ", ".join(sorted(readers))
        raise UnknownFormatError(path, f"unknown format {name!r} (known: {known})") from None


@dataclass(frozen=True, slots=True)
class Line:
    """One parsed JSON line with its place in the file."""

    number: int | None
    """1-based line number (None when reading started mid-file at an unknown line)."""
    offset: int
    """Byte offset of the line's first byte."""
    end: int
    """Byte offset just past the line's newline."""
    value: Any


def tail_start(path: str, window: int) -> int | None:
    """Where a read of a JSON Lines file's last `window` bytes begins: the first line start at
    or after `size - window` (a line cut by the window's edge is left out); None when the window
    holds the whole file (then read it from its first line, line numbers known)."""
    with open_source(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if window >= size:
            return None
        return next_line_start(handle, size - window)


def next_line_start(handle: BinaryIO, at: int) -> int:
    """The first line start at or after offset `at` (> 0) of an open file; the file's end when
    no line starts there."""
    handle.seek(at - 1)
    while chunk := handle.read(64 * 1024):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline
        at += len(chunk)
    return handle.tell()


def read_lines_tail(
    read: Callable[..., Iterator[Message]], path: str, window: int, warn: WarningSink
) -> tuple[list[Message], bool]:
    """`TailReader.read_tail` for a format whose every line is a record of its own, read by
    `read(path, warn, start=...)`, which builds each line's messages from that line alone."""
    start = tail_start(path, window)
    if start is None:
        return list(read(path, warn)), True
    return list(read(path, warn, start=start)), False


def _open_failure(path: str, exc: OSError) -> ReadError:
    """The one-line error for a source that cannot be opened."""
    if isinstance(exc, FileNotFoundError):
        return ReadError(path, "no such file")
    if isinstance(exc, IsADirectoryError):
        return ReadError(path, "is a directory, not a transcript file")
    return ReadError(path, exc.strerror or str(exc))


def open_source(path: str) -> BinaryIO:
    """Open a transcript for reading: a regular file only. A FIFO, socket or device would block
    or never end, so it is refused with one line before anything opens it."""
    try:
        mode = Path(path).stat().st_mode
    except OSError as exc:
        raise _open_failure(path, exc) from None
    if stat.S_ISDIR(mode):
        raise ReadError(path, "is a directory, not a transcript file")
    if not stat.S_ISREG(mode):
        raise ReadError(path, "not a regular file (a pipe, socket or device); give a file")
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise _open_failure(path, exc) from None


def _describe_json_error(raw: bytes, exc: Exception) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as ude:
        return f"invalid UTF-8 at byte {ude.start} of the line"
    message = str(exc).split("\n", 1)[0]
    return f"invalid JSON ({message})"


def iter_json_lines(
    path: str,
    warn: WarningSink,
    *,
    start: int = 0,
    stop: int | None = None,
    first_line: int | None = 1,
) -> Iterator[Line]:
    """Parse a JSON Lines file record by record in constant memory.

    Blank lines are skipped. A line that is not valid UTF-8 or not valid JSON produces a warning
    and is skipped. A last line without a newline that does not parse is reported as incomplete
    (a writer may still be appending to it); callers that track progress stop before it.
    `start`/`stop` restrict reading to a byte range (`start` must be a line start); `first_line`
    is the number of the line at `start`, or None when unknown (then lines carry no number).
    """
    handle = open_source(path)  # closed in finally (a generator)
    try:
        if start:
            handle.seek(start)
        offset = start
        number = None if first_line is None else first_line - 1
        for raw in handle:
            if number is not None:
                number += 1
            line_start = offset
            offset += len(raw)
            if stop is not None and line_start >= stop:
                break
            body = raw.strip()
            if not body:
                continue
            try:
                value = bound_depth(orjson.loads(body), raw=body)
            except orjson.JSONDecodeError as exc:
                if not raw.endswith(b"\n"):
                    reason = "incomplete last line (no newline; still being written?)"
                else:
                    reason = _describe_json_error(body, exc)
                warn(ReadWarning(path, number, reason))
                continue
            yield Line(number, line_start, offset, value)
    finally:
        handle.close()


MAX_DEPTH = 64
"""Containers nested deeper than this in a record are kept as their JSON text (a string): every
later step (token counts, stores, requests, JSON encoders with their own depth limits) then sees
a value of bounded depth, whatever a transcript or a caller sends."""


class _Literal(str):
    """Output text of `json_text`, as opposed to a string value still to be encoded."""


def json_text(value: Any) -> str:
    """Compact JSON text of a value of any depth (no recursion)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Literal:
            out.append(item)
        elif isinstance(item, dict):
            parts: list[Any] = [_Literal("{")]
            for n, (key, inner) in enumerate(item.items()):
                parts.append(_Literal(("," if n else "") + orjson.dumps(str(key)).decode() + ":"))
                parts.append(inner)
            parts.append(_Literal("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, list | tuple):
            parts = [_Literal("[")]
            for n, inner in enumerate(item):
                if n:
                    parts.append(_Literal(","))
                parts.append(inner)
            parts.append(_Literal("]"))
            stack.extend(reversed(parts))
        else:
            try:
                out.append(orjson.dumps(item).decode())
            except TypeError:
                out.append(orjson.dumps(str(item)).decode())
    return "".join(out)


def bound_depth(value: Any, limit: int = MAX_DEPTH, raw: bytes | None = None) -> Any:
    """The value with every container nested deeper than `limit` replaced by its JSON text.
    Given the raw JSON, a value with fewer brackets than the limit is returned at once."""
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= limit:
        return value
    if not isinstance(value, dict | list):
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            inner = node[key]
            if isinstance(inner, dict | list):
                if depth >= limit:
                    node[key] = json_text(inner)
                else:
                    stack.append((inner, depth + 1))
    return value


def read_head(path: str) -> bytes:
    with open_source(path) as handle:
        try:
            return handle.read(HEAD_BYTES)
        except OSError as exc:
            raise _open_failure(path, exc) from None


def first_json_lines(head: bytes, limit: int = 20) -> list[Any]:
    """The JSON values of the first complete lines of `head` that parse (for sniffing)."""
    values: list[Any] = []
    lines = head.split(b"\n")
    if len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last piece may be cut off
    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            values.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
        if len(values) >= limit:
            break
    return values


def load_json_document(path: str) -> Any:
    """Parse a whole-file JSON document, raising ReadError with the reason when it is not one."""
    with open_source(path) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise _open_failure(path, exc) from None
    try:
        return bound_depth(orjson.loads(data), raw=data)
    except orjson.JSONDecodeError as exc:
        raise ReadError(path, _describe_json_error(data, exc)) from None


class IdMaker:
    """Message ids unique within one file: a repeated id gets `#2`, `#3`, ... With `recent`,
    only the last that many ids are remembered (a repeat further back keeps its id)."""

    def __init__(self, recent: int | None = None) -> None:
        self.seen: set[str] = set()
        self.order: deque[str] | None = None if recent is None else deque()
        self.recent = recent

    def __call__(self, wanted: str) -> str:
        candidate, n = wanted, 1
        while candidate in self.seen:
            n += 1
            candidate = f"{wanted}#{n}"
        self.seen.add(candidate)
        if self.order is not None:
            self.order.append(candidate)
            if len(self.order) > (self.recent or 0):
                self.seen.discard(self.order.popleft())
        return candidate

    def copy(self) -> IdMaker:
        """An independent copy that remembers the same ids."""
        other = IdMaker(self.recent)
        other.seen = set(self.seen)
        other.order = None if self.order is None else deque(self.order)
        return other


def line_source(path: str, index: int, first: Line, last: Line | None = None) -> Source:
    """Where a message built from one line (or from `first` through `last`) came from."""
    end = last or first
    return Source(
        path=path,
        index=index,
        line=first.number,
        end_line=end.number,
        offset=first.offset,
        end_offset=end.end,
    )


def json_object(line: Line, path: str, warn: WarningSink) -> Mapping[str, Any] | None:
    """The line's value when it is a JSON object; None, with a warning, when it is not."""
    if isinstance(line.value, Mapping):
        return line.value
    warn(ReadWarning(path, line.number, "not a JSON object; line skipped"))
    return None


def tool_arguments(raw: Any, fallback: str) -> Any:
    """The arguments object of a tool call, given as an object or as JSON text; for anything
    else (text that is not a JSON object, say) `{fallback: raw}`."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            parsed = bound_depth(orjson.loads(raw))
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {fallback: raw}
