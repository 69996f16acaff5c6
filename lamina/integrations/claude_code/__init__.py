"""Claude Code integration: `lamina hook` serves every hook event.

The names are imported on first use, so that the hook's warm path
(lamina.integrations.claude_code.warm_client) loads nothing but the standard library."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # not `typing`: importing it would cost every warm prompt a few ms
    from typing import Any

    from .hook import HookSettings, run_hook
    from .retain_worker import run_worker

__all__ = ["HookSettings", "run_hook", "run_worker"]


def __getattr__(name: str) -> Any:
    if name == "run_worker":
        from .retain_worker import run_worker

        return run_worker
    if name in __all__:
        from . import hook

        return getattr(hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
