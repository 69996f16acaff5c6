"""Which transcript a hook event names: a Claude Code session, a Codex rollout, a Gemini chat or
a Copilot session.

Codex, Gemini and Copilot give their hooks the same `transcript_path` field as Claude Code,
naming their own session file: a Codex rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-
<id>.jsonl`), a Gemini chat (`~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`) or
Copilot's `$COPILOT_HOME/session-state/<session id>/events.jsonl` (given at Stop only; for the
other events the hook finds it from the session id: lamina.integrations.copilot.install). The
retain worker reads it with the reader of its format; a file caught empty (just created) is
decided by its name, so it is "nothing new" for the right reader rather than an error.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["transcript_format"]


def transcript_format(path: str) -> str:
    """`codex` for a Codex rollout, `gemini` for a Gemini chat, `copilot` for a Copilot
    session, else `claude-code` (what hooks retained before)."""
    where = Path(path)
    name = where.name
    if name.startswith("rollout-") and name.endswith(".jsonl"):
        return "codex"
    if name == "events.jsonl" and where.parent.parent.name == "session-state":
        return "copilot"
    if (
        where.parent.name == "chats"
        and name.startswith("session-")
        and name.endswith((".jsonl", ".json"))
    ):
        return "gemini"
    from ..readers.base import read_head
    from ..readers.codex import CodexReader
    from ..readers.copilot import CopilotReader
    from ..readers.gemini import GeminiReader

    try:
        head = read_head(path)
    except Exception:  # missing or unreadable: the retain reports it
        return "claude-code"
    if CodexReader().sniff(head, path) > 0:
        return "codex"
    if GeminiReader().sniff(head, path) > 0:
        return "gemini"
    if CopilotReader().sniff(head, path) > 0:
        return "copilot"
    return "claude-code"
