"""Which transcript a hook event names: a Claude Code session or a Codex rollout.

Codex gives its hooks the same `transcript_path` field as Claude Code, naming its rollout
(`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`). The retain worker reads it with
the reader of its format; a file caught empty (just created) is decided by its name, so it is
"nothing new" for the right reader rather than an error.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["transcript_format"]


def transcript_format(path: str) -> str:
    """`codex` for a Codex rollout, else `claude-code` (what hooks retained before)."""
    name = Path(path).name
    if name.startswith("rollout-") and name.endswith(".jsonl"):
        return "codex"
    from ...readers.base import read_head
    from ...readers.codex import CodexReader

    try:
        head = read_head(path)
    except Exception:  # missing or unreadable: the retain reports it
        return "claude-code"
    return "codex" if CodexReader().sniff(head, path) > 0 else "claude-code"
