"""Claude Code integration: `lamina hook` serves every hook event."""

from .hook import HookSettings, run_hook, run_worker

__all__ = ["HookSettings", "run_hook", "run_worker"]
