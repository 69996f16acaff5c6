"""JSON values (dicts, lists, tuples, scalars) rewritten string by string without recursion,
so that a value of any depth works (tool inputs and source records come from files)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["map_strings"]


def map_strings(value: Any, text: Callable[[str, str | None], str]) -> Any:
    """A copy of `value` with `text(string, key)` in place of every string (`key`: the string
    key it is held under in an object, else None). Keys stay as they are; mappings become
    dicts and tuples lists; other values are kept."""
    if isinstance(value, str):
        return text(value, None)
    if not isinstance(value, Mapping | list | tuple):
        return value
    root: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        in_object = isinstance(source, Mapping)
        items = source.items() if in_object else enumerate(source)
        for key, item in items:
            if isinstance(item, str):
                new: Any = text(item, key if in_object and isinstance(key, str) else None)
            elif isinstance(item, Mapping | list | tuple):
                new = {} if isinstance(item, Mapping) else []
                stack.append((item, new))
            else:
                new = item
            if isinstance(target, dict):
                target[key] = new
            else:
                target.append(new)
    return root
