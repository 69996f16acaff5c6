"""`with` for objects that hold something to close (a database connection, a terminal line)."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base for classes with a `close()`: `with Thing(...) as thing:` closes it at the end of
    the block, whether the block ends normally or with an exception (which propagates)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
