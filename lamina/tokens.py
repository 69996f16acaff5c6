"""Token counting, with one tokenizer used throughout Lamina.

The default counter is OpenAI's `o200k_base` BPE run by `tiktoken`. Its vocabulary ships inside
this package (`lamina/data/o200k_base.bpe`, packed from OpenAI's MIT-licensed file by
tools/build_o200k_vocab.py), so nothing is downloaded at run time. Anthropic publishes no
offline tokenizer for current Claude models; how far o200k is from Claude's own counts is
measured by `lamina bench tokens` on recorded Claude Code sessions (see docs/concepts.md). The
vocabulary is loaded once per process, on first use.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Protocol

import orjson

from .messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "CountMemo",
    "TiktokenCounter",
    "TokenCounter",
    "count_message",
    "count_text",
    "counting_with",
    "default_counter",
    "read_vocabulary",
]

MESSAGE_OVERHEAD = 4
"""Tokens a provider adds per message for the role and framing (an approximation)."""

IMAGE_TOKENS = 1_600
"""What an image of unknown size is counted as (a large image on Anthropic's scale)."""

_CHUNK = 1 << 15
"""Texts longer than this are counted in pieces split at whitespace, which keeps BPE fast on
pathological inputs (megabytes without a space) at the cost of a few tokens at the seams."""

# The pre-tokenisation pattern of o200k_base, as published with the vocabulary.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class TokenCounter(Protocol):
    """Counts tokens of text. Implementations must be thread-safe."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


_VOCABULARY = Path(__file__).with_name("data") / "o200k_base.bpe"
_MAGIC = b"LAMINA-BPE 1\n"


def read_vocabulary(path: Path) -> dict[bytes, int]:
    """A packed BPE vocabulary (tools/build_o200k_vocab.py): its tokens, ranked in file order.
    Slicing one bytes object takes a quarter of the CPU of decoding tiktoken's base64 lines, and
    every process that counts tokens pays it once."""
    data = path.read_bytes()
    if not data.startswith(_MAGIC):
        raise ValueError(f"{path}: not a packed vocabulary")
    start = len(_MAGIC) + 4
    (count,) = struct.unpack_from("<I", data, len(_MAGIC))
    ends = list(accumulate(data[start : start + count], initial=start + count))
    if ends[-1] != len(data):
        raise ValueError(f"{path}: {len(data)} bytes where its lengths add up to {ends[-1]}")
    return dict(zip(map(data.__getitem__, map(slice, ends, ends[1:])), range(count), strict=True))


class TiktokenCounter:
    """A tiktoken BPE whose ranks file ships in `lamina/data`."""

    def __init__(self, name: str = "o200k_base") -> None:
        if name != "o200k_base":
            raise ValueError(f"no bundled vocabulary named {name!r}")
        self._name = name
        self._encoding: object | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    def _load(self) -> object:
        import tiktoken

        ranks = read_vocabulary(_VOCABULARY)
        encoding = tiktoken.Encoding(
            self._name,
            pat_str=_O200K_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        )
        # The encoder copied the ranks into its own tables; the Python dict it also keeps is
        # read again only to pickle the encoding, which Lamina never does. Emptied, it gives
        # back about 27 MB for as long as the process lives (a retain, a compile, a server).
        ranks.clear()
        return encoding

    def _get(self) -> object:
        if self._encoding is None:
            with self._lock:
                if self._encoding is None:
                    self._encoding = self._load()
        return self._encoding

    def count(self, text: str) -> int:
        if not text:
            return 0
        encode = self._get().encode_ordinary  # type: ignore[attr-defined]
        if len(text) <= _CHUNK:
            return len(encode(text))
        total = 0
        start = 0
        while start < len(text):
            end = min(start + _CHUNK, len(text))
            if end < len(text):
                cut = text.rfind(" ", start + _CHUNK // 2, end)
                end = cut if cut > start else end
            total += len(encode(text[start:end]))
            start = end
        return total


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """The process-wide default counter (o200k_base, loaded lazily)."""
    return TiktokenCounter()


class CountMemo:
    """Default-counter counts of texts by digest, carried from one process to the next (a
    stored log keeps those of its last compile), so a process that counts only texts counted
    before never loads the tokenizer. `used`: the counts asked for while it was in use."""

    def __init__(self, known: Mapping[str, int] | None = None) -> None:
        self.known = dict(known or {})
        self.used: dict[str, int] = {}

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    def count(self, text: str) -> int:
        key = self.digest(text)
        found = self.known.get(key)
        if found is None:
            found = _count_default(text)
            self.known[key] = found
        self.used[key] = found
        return found


_MEMO: ContextVar[CountMemo | None] = ContextVar("lamina_count_memo", default=None)


@contextmanager
def counting_with(memo: CountMemo) -> Iterator[CountMemo]:
    """`count_text` with the default counter looks texts up in `memo` first, in this thread
    for the duration of the block."""
    token = _MEMO.set(memo)
    try:
        yield memo
    finally:
        _MEMO.reset(token)


def count_text(text: str, counter: TokenCounter | None = None) -> int:
    if counter is None:
        memo = _MEMO.get()
        if memo is not None and text:
            return memo.count(text)
        return _count_default(text)
    return counter.count(text)


@lru_cache(maxsize=16_384)
def _count_default(text: str) -> int:
    """Counts with the default counter, remembered: a compile counts the same message texts
    on every call (a string's hash is computed once, so a repeat costs a dict lookup)."""
    return default_counter().count(text)


def _json_text(value: object) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def count_message(message: Message, counter: TokenCounter | None = None) -> int:
    """Tokens a message costs when sent: its text, thinking, tool calls (name and JSON input),
    tool results, a fixed estimate per image, and the per-message framing."""
    counter = counter or default_counter()
    total = MESSAGE_OVERHEAD
    for block in message.blocks:
        total += _count_block(block, counter)
    return total


def _count_block(block: object, counter: TokenCounter) -> int:
    if isinstance(block, TextBlock):
        return counter.count(block.text)
    if isinstance(block, ThinkingBlock):
        return counter.count(block.thinking)
    if isinstance(block, ToolUseBlock):
        return counter.count(block.name) + counter.count(_json_text(block.input)) + 8
    if isinstance(block, ToolResultBlock):
        return 4 + sum(_count_block(b, counter) for b in block.content)
    if isinstance(block, ImageBlock):
        return IMAGE_TOKENS
    if isinstance(block, UnknownBlock):
        text = _json_text(block.data)
        # Embedded documents arrive as base64; estimate them instead of tokenizing megabytes.
        return counter.count(text) if len(text) <= _CHUNK else len(text) // 4
    return 0
