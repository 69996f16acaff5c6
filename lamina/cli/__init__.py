"""The `lamina` command line, one module per area, each command a thin call into the library:

main         the group (commands loaded by name when they run) and the entry point
transcripts  show, turns, recall-query: reading a transcript without a bank
bank         retain, recall, banks, documents, forget, reindex, export/import, hook
admin        install/uninstall for Claude Code, status (doctor), mcp, serve, keys, compile
logs         context logs: list, show, delete
pins         pin and unpin stretches of a context log
store        migrate a database, copy banks between stores
warm         the warm hook server: start, stop, status
status       what `lamina status` reports
common       options and helpers every module shares (--json, --bank, confirmations)
"""

from __future__ import annotations

from .main import cli, main

__all__ = ["cli", "main"]
