"""Token counting with the bundled o200k vocabulary."""

from __future__ import annotations

import base64
import hashlib
import random
from pathlib import Path

import pytest

import lamina.tokens
from lamina import Kind, Message, Role, TextBlock, ToolUseBlock, count_message, count_text
from lamina.messages import ImageBlock, ToolResultBlock
from lamina.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, TiktokenCounter, read_vocabulary

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""What OpenAI publishes for o200k_base.tiktoken (tiktoken_ext/openai_public.py)."""


def test_known_o200k_counts_from_the_bundled_vocabulary() -> None:
    assert count_text("") == 0
    assert count_text("hello world") == 2
    assert count_text("The quick brown fox jumps over the lazy dog.") == 10


def test_long_texts_are_counted_in_pieces_within_a_hair_of_the_whole() -> None:
    rng = random.Random(7)
    words = ["memory", "recall", "token", "budget", "summary", "the", "a", "of", "cache"]
    text = " ".join(rng.choice(words) for _ in range(60_000))
    counter = TiktokenCounter()
    whole = len(counter._get().encode_ordinary(text))  # type: ignore[attr-defined]
    assert abs(counter.count(text) - whole) <= whole * 0.001
    # A pathological input (megabytes without a space) still counts, and quickly.
    assert counter.count("x" * 2_000_000) > 0


def test_message_cost_includes_tool_calls_results_images_and_framing() -> None:
    text_only = Message(
        id="1", role=Role.USER, blocks=(TextBlock("hello world"),), kind=Kind.PROMPT
    )
    assert count_message(text_only) == 2 + MESSAGE_OVERHEAD
    call = Message(
        id="2",
        role=Role.ASSISTANT,
        blocks=(ToolUseBlock("t1", "Bash", {"command": "pytest -q tests/test_long_name.py"}),),
        kind=Kind.TOOL_ACTIVITY,
    )
    assert count_message(call) > count_text("pytest -q tests/test_long_name.py")
    result = Message(
        id="3",
        role=Role.USER,
        blocks=(
            ToolResultBlock("t1", (TextBlock("12 passed in 0.4s"), ImageBlock("image/png", {}))),
        ),
        kind=Kind.TOOL_ACTIVITY,
    )
    assert count_message(result) >= IMAGE_TOKENS + count_text("12 passed in 0.4s")


def test_the_packed_vocabulary_is_openais_o200k_base_to_the_byte() -> None:
    # Written back in tiktoken's own form, the shipped vocabulary must hash to the SHA-256 that
    # OpenAI publishes for o200k_base.tiktoken (tiktoken_ext.openai_public).
    ranks = read_vocabulary(Path(lamina.tokens.__file__).with_name("data") / "o200k_base.bpe")
    assert sorted(ranks.values()) == list(range(len(ranks))) and len(ranks) == 199_998
    text = b"".join(
        base64.b64encode(token) + b" %d\n" % rank
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )
    assert hashlib.sha256(text).hexdigest() == O200K_SHA256


def test_a_damaged_vocabulary_is_refused_not_read_wrong(tmp_path: Path) -> None:
    source = Path(lamina.tokens.__file__).with_name("data") / "o200k_base.bpe"
    cut = tmp_path / "cut.bpe"
    cut.write_bytes(source.read_bytes()[:-1])
    with pytest.raises(ValueError, match="lengths add up"):
        read_vocabulary(cut)
    other = tmp_path / "other.bpe"
    other.write_bytes(b"not a vocabulary")
    with pytest.raises(ValueError, match="not a packed vocabulary"):
        read_vocabulary(other)
