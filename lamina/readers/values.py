"""Read a message list held in memory (a Python list or dict) with the transcript readers.

    messages = [{"role": "user", "content": "Which database?"},
                {"role": "assistant", "content": "Postgres."}]
    transcript = read_message_list(messages, format="openai")
    transcript.messages   # the same Messages `read_transcript` gives for that list in a file

The data is what a provider's API takes or returns: a list of message objects, or an object
with `messages` (and Anthropic's `system`). Objects of the provider SDKs (pydantic models such
as an OpenAI `ChatCompletionMessage` or the content blocks of an Anthropic `Message`) are taken
as they are. The caller's data is never changed.

Each item of a list is read as a JSON line of a file would be, so the formats, the ids
(`messages:<index>` where a message has none of its own), the warnings and the format detection
are those of the file readers. Every built-in format is read in memory (`claude-code`,
`anthropic`, `openai`, and `locomo` samples, a list of them or one); a format that has only a
file reader (e.g. a third-party one) is an error: nothing is written to disk for it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from ..errors import InputError, UnknownFormatError
from ..messages import Message
from .anthropic import MessageRecord, RecordContext, expand_container, is_container
from .anthropic import message_from_record as anthropic_message
from .base import HEAD_BYTES, MAX_DEPTH, Line, WarningSink, get_reader, json_text

__all__ = ["DEFAULT_SOURCE", "plain_values", "read_message_values", "with_content_ids"]

DEFAULT_SOURCE = "messages"
"""What messages read from memory name as their source (and the stem of the ids they get)."""


def _plain(value: Any) -> Any:
    """A JSON-like copy of `value`: SDK models dumped as their JSON fields (None left out),
    tuples as lists, containers nested deeper than `MAX_DEPTH` kept as their JSON text (as
    `bound_depth` does for a file's line); nothing of the caller's is shared or changed. No
    recursion: a hostile depth costs time in proportion to its size, never a stack overflow."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(root, 0, value, 1)]
    while stack:
        parent, key, item, depth = stack.pop()
        dump = getattr(item, "model_dump", None)
        if callable(dump) and not isinstance(item, type):
            item = dump(mode="json", exclude_none=True)
        if isinstance(item, Mapping | list | tuple) and depth > MAX_DEPTH:
            parent[key] = json_text(dict(item) if isinstance(item, Mapping) else item)
        elif isinstance(item, Mapping):
            out: dict[str, Any] = {str(k): None for k in item}
            parent[key] = out
            stack.extend((out, str(k), v, depth + 1) for k, v in item.items())
        elif isinstance(item, list | tuple):
            seq: list[Any] = [None] * len(item)
            parent[key] = seq
            stack.extend((seq, i, v, depth + 1) for i, v in enumerate(item))
        else:
            parent[key] = item
    return root[0]


def plain_values(data: Any) -> list[Any]:
    """The top-level values of a message list as the lines of a JSON Lines file would hold them:
    each message of a list, or the one object (`{"messages": ...}` or a single message)."""
    if isinstance(data, str | bytes):
        raise InputError("give a list of messages (or an object with 'messages'), not a string")
    dump = getattr(data, "model_dump", None)
    if callable(dump) and not isinstance(data, type):
        data = dump(mode="json", exclude_none=True)
    values = data if isinstance(data, list | tuple) else [data]
    return [_plain(v) for v in values]


def with_content_ids(scope: str, values: Sequence[Any]) -> list[Any]:
    """`values` (plain messages, as `plain_values` gives them) with an `id` for each message
    that has none (no `id`, no Claude Code `uuid`), made from its content: `scope` (a document
    or a context log), the message as sent, and how often the same message came earlier in the
    list. Sending the whole conversation again, or only what is new, gives every message the id
    it had, so each is stored once; the same message sent again in a *later* list (a second
    plain "ok") is the one thing content cannot tell apart: give such messages ids."""
    seen: Counter[str] = Counter()
    out: list[Any] = []
    for message in values:
        if not isinstance(message, dict) or message.get("id") or message.get("uuid"):
            out.append(message)
            continue
        body = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha1(scope.encode() + b"\x00" + body).hexdigest()[:24]
        seen[digest] += 1
        repeat = seen[digest]
        out.append({**message, "id": f"m_{digest}" + (f".{repeat}" if repeat > 1 else "")})
    return out


def _head(values: list[Any]) -> bytes:
    """The start of the values as a JSON Lines file: what the readers' sniffers look at."""
    out = bytearray()
    for value in values:
        out += json_text(value).encode() + b"\n"
        if len(out) >= HEAD_BYTES:
            break
    return bytes(out[:HEAD_BYTES])


def _records(values: list[Any]) -> Iterator[MessageRecord]:
    index = 0
    for value in values:
        if is_container(value):
            for record in expand_container(value, index, None):
                yield record
                index = record.index + 1
        else:
            yield MessageRecord(index, value, None)
            index += 1


def _read_claude_code(values: list[Any], source: str, warn: WarningSink) -> Iterator[Message]:
    from .claude_code import claude_code_builder

    builder = claude_code_builder(source, warn)
    for n, value in enumerate(values):
        yield from builder.feed(Line(n + 1, n, n + 1, value))
    yield from builder.flush()


def _read_openai(values: list[Any], source: str, warn: WarningSink) -> Iterator[Message]:
    from .openai import openai_builder

    builder = openai_builder(source, warn)
    for record in _records(values):
        message = builder.message(record)
        if message is not None:
            yield message


def _read_anthropic(values: list[Any], source: str, warn: WarningSink) -> Iterator[Message]:
    ctx = RecordContext(source, warn)
    for record in _records(values):
        message = anthropic_message(ctx, record)
        if message is not None:
            yield message


def _read_locomo(values: list[Any], source: str, warn: WarningSink) -> Iterator[Message]:
    from .locomo import locomo_messages

    return locomo_messages(values, source, warn)


_IN_MEMORY: dict[str, Callable[[list[Any], str, WarningSink], Iterator[Message]]] = {
    "claude-code": _read_claude_code,
    "openai": _read_openai,
    "anthropic": _read_anthropic,
    "locomo": _read_locomo,
}


def read_message_values(
    data: Any,
    *,
    format: str | None = None,
    source: str = DEFAULT_SOURCE,
    warn: WarningSink | None = None,
) -> tuple[str, list[Message]]:
    """The format read and the messages of an in-memory message list (see the module's doc)."""
    from . import best_reader

    sink: WarningSink = warn or (lambda _w: None)
    values = plain_values(data)
    if not values:
        return format or "", []
    if format:
        reader = get_reader(format, source)
    else:
        found = best_reader(_head(values), source)
        if found is None:
            raise UnknownFormatError(source, "not a message list Lamina knows (pass format=)")
        reader = found
    read = _IN_MEMORY.get(reader.name)
    if read is not None:
        return reader.name, list(read(values, source, sink))
    raise UnknownFormatError(source, f"{reader.name} is read from files, not message lists")
