"""`Store.page_memories`' query, for both databases: the store's dialect says how a tag and
a word are tested, how a time bound is passed and how times sort (lamina.store.dialect); the
store runs the queries, gets the page's seqs, the total and the counts per kind, and reads the
page's rows itself."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .base import MemoryFilter
from .dialect import Dialect


def filter_conditions(
    where: MemoryFilter, bank_id: int, dialect: Dialect
) -> tuple[list[str], list[Any]]:
    """The conditions (joined with AND) selecting the memories `where` asks for from the
    bank's table alias `m`, and their parameters. The first condition is always the bank's."""
    clauses = ["m.bank_id = ?"]
    params: list[Any] = [bank_id]
    if where.document is not None:
        clauses[0] = dialect.bank_with_document
        clauses.append("m.document_id = (SELECT id FROM documents WHERE bank_id = ? AND name = ?)")
        params += [bank_id, where.document]
    if where.documents is not None:
        if not where.documents:
            clauses.append("1 = 0")
        else:
            marks = ", ".join("?" * len(where.documents))
            named = f"SELECT id FROM documents WHERE bank_id = ? AND name IN ({marks})"
            clauses.append(f"m.document_id IN ({named})")
            params += [bank_id, *where.documents]
    if where.kind is not None:
        clauses.append("m.kind = ?")
        params.append(where.kind)
    if where.tag is not None:
        clauses.append(dialect.has_tag)
        params.append(where.tag)
    if where.since is not None:
        clauses.append("m.t >= ?")
        params.append(dialect.bound_in(where.since))
    if where.until is not None:
        clauses.append("m.t <= ?")
        params.append(dialect.bound_in(where.until))
    for word in where.words:
        if word.isascii():
            clauses.append(dialect.has_ascii_word)
            params.append(word.lower())
        else:
            clauses.append(dialect.has_word)
            params.append(dialect.word_param(word))
    return clauses, params


Execute = Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]]
"""Runs one query (written with `?` placeholders) with its parameters and gives its rows."""


def page_seqs(
    execute: Execute,
    bank_id: int,
    where: MemoryFilter,
    limit: int,
    offset: int,
    dialect: Dialect,
    *,
    oldest_first: bool = False,
    count_kinds: bool = True,
) -> tuple[list[int], int, dict[str, int]]:
    """The seqs of the page `page_memories` lists, the total matching `where`, and the bank's
    count per kind (empty without `count_kinds`). Only seqs are sorted (from the bank's time
    index when nothing but times filters); the caller reads the rows of the page alone."""
    kinds: dict[str, int] = {}
    if count_kinds:
        counted = execute(
            "SELECT kind, count(*) FROM memories WHERE bank_id = ? GROUP BY kind ORDER BY kind",
            (bank_id,),
        )
        kinds = {str(kind): int(n) for kind, n in counted}
    clauses, params = filter_conditions(where, bank_id, dialect)
    condition = " AND ".join(clauses)
    by = dialect.oldest_first if oldest_first else dialect.newest_first
    order = f"SELECT m.seq FROM memories m WHERE {condition} ORDER BY {by}"
    if where.words:  # the texts are scanned once: every match's seq, then the page
        matched = [int(row[0]) for row in execute(order, params)]
        return matched[offset : offset + limit], len(matched), kinds
    rows = execute(f"{order} LIMIT ? OFFSET ?", (*params, limit, offset))
    seqs = [int(row[0]) for row in rows]
    if len(clauses) > 1 or not count_kinds:
        counted = execute(f"SELECT count(*) FROM memories m WHERE {condition}", params)
        total = sum(int(row[0]) for row in counted)
    else:
        total = sum(kinds.values())
    return seqs, total, kinds
