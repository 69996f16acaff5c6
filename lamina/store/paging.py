"""The SQL of `Store.page_memories`' filter, written once for both databases: each store
supplies its dialect (placeholder, how a tag and a word are tested, how a time bound is
passed), and gets the WHERE conditions and their parameters in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .base import MemoryFilter


@dataclass(frozen=True, slots=True)
class Dialect:
    mark: str
    """The parameter placeholder: `?` or `%s`."""
    has_tag: str
    """A condition true when the memory `m` carries the tag given as its one parameter."""
    has_ascii_word: str
    """A condition true when `m.text` contains the (lower-cased, ASCII) word, taken literally."""
    has_word: str
    """The same for any other word, given as `word_param(word)`."""
    word_param: Callable[[str], Any]
    time_param: Callable[[datetime], Any]


def filter_conditions(
    where: MemoryFilter, bank_id: int, dialect: Dialect
) -> tuple[list[str], list[Any]]:
    """The conditions (joined with AND) selecting the memories `where` asks for from the
    bank's table alias `m`, and their parameters. The first condition is always the bank's."""
    mark = dialect.mark
    clauses = [f"m.bank_id = {mark}"]
    params: list[Any] = [bank_id]
    if where.document is not None:
        clauses.append(
            f"m.document_id = (SELECT id FROM documents WHERE bank_id = {mark} AND name = {mark})"
        )
        params += [bank_id, where.document]
    if where.kind is not None:
        clauses.append(f"m.kind = {mark}")
        params.append(where.kind)
    if where.tag is not None:
        clauses.append(dialect.has_tag)
        params.append(where.tag)
    if where.since is not None:
        clauses.append(f"m.t >= {mark}")
        params.append(dialect.time_param(where.since))
    if where.until is not None:
        clauses.append(f"m.t <= {mark}")
        params.append(dialect.time_param(where.until))
    for word in where.words:
        if word.isascii():
            clauses.append(dialect.has_ascii_word)
            params.append(word.lower())
        else:
            clauses.append(dialect.has_word)
            params.append(dialect.word_param(word))
    return clauses, params
