"""Property: a transcript damaged by lines no reader can use (bad JSON, invalid UTF-8, NUL
bytes, values of the wrong shape, deep nesting, blank lines) retains into the same bank as the
clean transcript: the same memories, with the same texts."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.store import open_store

from ..conftest import CC

DAMAGE = [
    b'{"type": "user", "message": {"role": "user", "content": "cut off',
    b"\xff\xfe not utf-8 \xc3\x28",
    b'{"type": "assistant", "nul": "a\x00b"}',
    b"[1, 2, 3]",
    b"42",
    b'"just a string"',
    b"{" * 2000,
    b'{"a":' * 1500 + b"1" + b"}" * 1500,
    b"   ",
    b"\x00" * 3,
]

words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
    max_size=60,
).filter(lambda s: s.strip() != "" and "<" not in s and not s.lstrip().startswith("/"))  # fmt: skip

_homes = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.tuples(words, words), min_size=1, max_size=8),
    damage=st.lists(
        st.tuples(st.integers(min_value=0, max_value=40), st.sampled_from(DAMAGE)), max_size=8
    ),
)
def test_damaged_transcript_retains_as_the_clean_one(
    tmp_path_factory: object, turns: list[tuple[str, str]], damage: list[tuple[int, bytes]]
) -> None:
    root = Path(tmp_path_factory.mktemp(f"prop{next(_homes)}"))  # type: ignore[attr-defined]
    cc = CC()
    for prompt, reply in turns:
        cc.user(prompt)
        cc.assistant(reply)
    clean = [line.encode() for line in cc.lines()]
    damaged = list(clean)
    for position, line in damage:
        damaged.insert(min(position, len(damaged)), line)
    (root / "clean.jsonl").write_bytes(b"\n".join(clean) + b"\n")
    (root / "damaged.jsonl").write_bytes(b"\n".join(damaged) + b"\n")
    bank = MemoryBank(open_store(root / "lamina.db"), HashEmbedder())
    bank.retain_file(root / "clean.jsonl", "clean", document="d", format="claude-code")
    report = bank.retain_file(root / "damaged.jsonl", "damaged", document="d",
                              format="claude-code")  # fmt: skip
    assert len(report.warnings) <= len(damage)

    def memories(name: str) -> list[tuple[str, str, str]]:
        return sorted((m.id, m.kind, m.text) for m in bank.memories(name))

    assert memories("damaged") == memories("clean")
