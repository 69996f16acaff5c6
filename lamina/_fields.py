"""A dataclass's fields as a plain dict, for the `as_dict` / `to_json` methods of reports.

`dataclasses.asdict` copies deeply (and would walk into a report's cached internals); a report
only wants its own fields, in their declared order, as they are, with a few left out or
written another way by the caller.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields
from typing import Any

__all__ = ["field_dict"]


def field_dict(instance: Any, leave_out: Collection[str] = ()) -> dict[str, Any]:
    """The fields of dataclass `instance` by name, in declaration order, values as they are
    (not copied), without those named in `leave_out`."""
    return {f.name: getattr(instance, f.name) for f in fields(instance) if f.name not in leave_out}
