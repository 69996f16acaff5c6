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
compiling    compile's work, and its short path without click (`lamina.entry` takes it)
output       JSON and lines written without click

`cli` and `main` are imported on first use (PEP 562): the compile short path imports this
package without click.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .main import cli, main

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        module = importlib.import_module(".main", __name__)
        # Importing the submodule bound `main` to it: the entry point is what this names.
        globals().update(cli=module.cli, main=module.main)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
