"""A stored log's messages, read from the store a page at a time when first asked for.

A compile looks at few of a long log's messages: the head, the chunks cut since the last
compile, the raw stretches and the tail it shows, a chunk it summarises. Opening a log of
20,000 messages therefore reads those pages, not the whole log (its token counts, which the
frontier plans with, are stored apart). Messages appended in this process are held as given.
Iterating over all of it reads every page (what tools that want the whole log pay anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, MutableSequence
from dataclasses import replace
from typing import overload

from ..messages import Message

__all__ = ["PagedMessages", "light"]

PAGE = 256
"""Messages read from the store at once."""

PageReader = Callable[[int, int], list[Message]]
"""Reads the stored messages at positions `[start, end)`."""


def light(message: Message) -> Message:
    """The message as a log holds it: without its source records and the host's structured
    tool result, which no request shows (see `ContextLog`)."""
    if message.records or message.tool_use_result is not None:
        return replace(message, records=(), tool_use_result=None)
    return message


class PagedMessages(MutableSequence[Message]):
    """`stored` messages at positions `[0, stored)` read by `read` on demand, then what
    `append` adds (only appending is supported)."""

    def __init__(
        self, read: PageReader, stored: int, pages: dict[int, list[Message]] | None = None
    ) -> None:
        self._read = read
        self._stored = stored
        self._pages: dict[int, list[Message]] = pages if pages is not None else {}
        self._added: list[Message] = []
        self._lock = threading.Lock()

    @property
    def pages_read(self) -> int:
        return len(self._pages)

    def _page(self, number: int) -> list[Message]:
        page = self._pages.get(number)
        if page is None:
            with self._lock:
                page = self._pages.get(number)
                if page is None:
                    start = number * PAGE
                    end = min(self._stored, start + PAGE)
                    page = [light(m) for m in self._read(start, end)]
                    if len(page) != end - start:
                        raise IndexError(f"the store holds {len(page)} of messages {start}-{end}")
                    self._pages[number] = page
        return page

    def _one(self, index: int) -> Message:
        if index < self._stored:
            return self._page(index // PAGE)[index % PAGE]
        return self._added[index - self._stored]

    def __len__(self) -> int:
        return self._stored + len(self._added)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self._one(i) for i in range(start, stop, step)]
            out: list[Message] = []
            at = start
            while at < min(stop, self._stored):
                page = self._page(at // PAGE)
                upto = min(stop, (at // PAGE + 1) * PAGE, self._stored)
                out.extend(page[at % PAGE : at % PAGE + (upto - at)])
                at = upto
            if stop > self._stored:
                out.extend(self._added[max(0, start - self._stored) : stop - self._stored])
            return out
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        return self._one(index)

    def __iter__(self) -> Iterator[Message]:
        for number in range((self._stored + PAGE - 1) // PAGE):
            yield from self._page(number)
        yield from self._added

    def __setitem__(self, index: object, value: object) -> None:
        raise TypeError("a context log is only appended to")

    def __delitem__(self, index: object) -> None:
        raise TypeError("a context log is only appended to")

    def insert(self, index: int, value: Message) -> None:
        if index != len(self):
            raise TypeError("a context log is only appended to")
        self._added.append(value)

    def append(self, value: Message) -> None:
        self._added.append(value)

    def copy(self) -> PagedMessages:
        """A copy that later appends leave as it is (pages read are shared)."""
        other = PagedMessages(self._read, self._stored, self._pages)
        other._added = self._added[:]
        return other
