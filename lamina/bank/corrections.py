"""Corrections: a memory marked wrong, or superseded by a newer one, and how recall applies it.

A mark is kept by memory id in the store (`Store.save_correction`), beside the memory rather
than in it, so a retain that rewrites the memory, a reindex, or a forget followed by a retain
keep it; export and import carry it (lamina.bank.transfer). `unmark` removes it.

Recall reads the bank's marks once per query (`Corrections.load`: one probe of a table as large
as the user's marks, whatever the bank's size) and applies them while it fills the budget:

- a memory marked **wrong** is left out (with `RecallOptions.show_wrong`, shown after every
  other result, carrying its mark): the prompt hook never injects it;
- a memory **superseded** by a newer one yields to it: the newer is shown in its place (once,
  when both would be), with `replaces` naming the older; a replacement itself marked wrong,
  gone, or outside the recall's filters leaves nothing in that place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError, NotFoundError
from ..memories import CORRECTION_STATES, Correction, Memory

if TYPE_CHECKING:
    from ..store.base import Store
    from ..store.search import SearchFilter

__all__ = ["Corrections", "mark_memory", "unmark_memory"]

_CHAIN = 8
"""How many replacements recall follows (a superseded by b superseded by c ...)."""


@dataclass(frozen=True, slots=True)
class Corrections:
    """The marks of one bank, as one recall applies them."""

    marks: Mapping[str, Correction]
    fetch: Callable[[str], Memory | None]
    """A memory of the bank by id (a replacement the search did not propose)."""
    replaces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Newer memory id -> the ids it supersedes."""

    @classmethod
    def load(cls, store: Store, bank: str) -> Corrections | None:
        """The bank's marks, or None when it has none (recall then does nothing more)."""
        marks = store.load_corrections(bank)
        if not marks:
            return None
        replaces: dict[str, list[str]] = {}
        for mark in marks.values():
            if mark.state == "superseded" and mark.replacement:
                replaces.setdefault(mark.replacement, []).append(mark.memory)

        def fetch(memory_id: str) -> Memory | None:
            found = store.get_memories(bank, [memory_id])
            return found[0] if found else None

        return cls(marks, fetch, {k: tuple(v) for k, v in replaces.items()})

    def resolve(
        self, memory: Memory, where: SearchFilter, show_wrong: bool = False
    ) -> tuple[Memory | None, dict[str, Any] | None]:
        """What recall shows for a candidate: the memory itself, its replacement (when it
        passes the recall's filter `where`: it was not searched for), or nothing (None); and
        the note the result carries (its mark, or the memories it replaces)."""
        mark = self.marks.get(memory.id)
        if mark is None:
            return memory, self._replacing(memory.id)
        if mark.state == "wrong":
            return (memory if show_wrong else None), mark.as_dict()
        current, seen = memory, {memory.id}
        while mark is not None and mark.state == "superseded" and mark.replacement:
            if mark.replacement in seen or len(seen) > _CHAIN:
                return None, None
            newer = self.fetch(mark.replacement)
            if newer is None or not where.admits(newer):
                return None, None
            current = newer
            seen.add(newer.id)
            mark = self.marks.get(newer.id)
        if mark is not None and mark.state == "wrong":
            return None, None
        return current, self._replacing(current.id)

    def _replacing(self, memory_id: str) -> dict[str, Any] | None:
        olds = self.replaces.get(memory_id)
        return {"replaces": list(olds)} if olds else None


def mark_memory(
    store: Store, bank: str, memory_id: str, state: str, *, replacement: str | None = None,
    note: str = "",
) -> Correction:  # fmt: skip
    """Mark a memory `wrong`, or `superseded` by `replacement` (both must be memories of the
    bank: `NotFoundError` otherwise); replaces the mark it had."""
    if state not in CORRECTION_STATES:
        raise InputError(f"unknown mark {state!r}: expected one of {', '.join(CORRECTION_STATES)}")
    wanted = [memory_id] + ([replacement] if replacement else [])
    found = {m.id for m in store.get_memories(bank, wanted)}
    for memory in wanted:
        if memory not in found:
            raise NotFoundError(
                f"no memory {memory!r} in bank {bank!r}", what="memory", name=memory
            )
    if state == "superseded":
        if not replacement:
            raise InputError("a superseded memory needs the id of the memory that replaces it")
        if replacement == memory_id:
            raise InputError("a memory cannot supersede itself")
    elif replacement:
        raise InputError("only a superseded memory has a replacement")
    if note.strip():
        from ..text.redact import Redactor

        note = Redactor().redact(note.strip())[0]  # nothing secret is stored (invariant 9)
    correction = Correction(memory_id, state, replacement, note.strip()[:2000])
    store.save_correction(bank, correction)
    return store.load_corrections(bank, [memory_id])[memory_id]


def unmark_memory(store: Store, bank: str, memory_id: str) -> Correction:
    """Remove a memory's mark (returned); `NotFoundError` when it has none."""
    held = store.load_corrections(bank, [memory_id]).get(memory_id)
    if held is None or not store.delete_correction(bank, memory_id):
        raise NotFoundError(
            f"memory {memory_id!r} in bank {bank!r} has no mark", what="mark", name=memory_id
        )
    return held
