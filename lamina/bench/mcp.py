"""`lamina bench mcp`: how many tokens of the calling model's context an MCP `recall` costs.

The sessions of the agent question set (`lamina bench agent`) go into one bank; each question is
recalled through the MCP server's own `recall` tool at a token budget (400 by default), and the
text of the tool's result, what the calling model reads, is counted. The baseline, measured in
the same run, is the result as the server gave it before the compact default: every memory with
its scores per channel, source span and speakers, plus the `<lamina_memories>` block, as JSON
indented by two spaces. `detail` is today's `recall(detail=true)`. `overhead` is what the result
costs beyond the memories' own tokens.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import click
import orjson

from ..access import Gate
from ..bank.bank import MemoryBank
from ..bank.recall import RecallOptions
from ..errors import InputError
from ..store.sqlite import SQLiteStore
from ..tokens import count_text
from .agent import load_questions
from .common import count_option, emit, json_option, shared_data_dir

__all__ = ["mcp_bench", "run_mcp_bench"]


def _summary(values: list[int]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 1), "median": statistics.median(values),
            "max": max(values)}  # fmt: skip


def run_mcp_bench(folder: Path, budget: int = 400) -> dict[str, Any]:
    """Recall every question of the agent set through the MCP tool and count its result."""
    try:
        from mcp.types import TextContent

        from ..context.logs import ContextLogs, log_summariser
        from ..integrations.mcp_tools import Tools
    except ImportError:
        raise InputError("this benchmark needs the MCP server: pip install 'lamina[mcp]'") from None
    questions = load_questions()
    files = sorted({q.file for q in questions})
    if missing := [f for f in files if not (folder / f).is_file()]:
        raise InputError(f"{folder}: missing transcripts {', '.join(missing)}")
    sizes: dict[str, list[int]] = {"compact": [], "detail": [], "before": [], "memories": []}
    with tempfile.TemporaryDirectory(prefix="lamina-bench-mcp-") as tmp:
        memory = MemoryBank(SQLiteStore(Path(tmp) / "lamina.db"))
        try:
            for f in files:
                memory.retain_file(folder / f, "bench")
            store = memory.store
            tools = Tools(memory, Gate.at_start(store, "127.0.0.1"), "bench",
                          ContextLogs(store, log_summariser(store)))  # fmt: skip

            def text(detail: bool, query: str) -> str:
                result = tools.recall(query=query, budget=budget, detail=detail)
                return "".join(c.text for c in result.content if isinstance(c, TextContent))

            for q in questions:
                sizes["compact"].append(count_text(text(False, q.question)))
                sizes["detail"].append(count_text(text(True, q.question)))
                found = memory.recall(q.question, "bench", RecallOptions(budget=budget))
                former = {"bank": "bench", **found.as_dict(), "block": found.block()}
                indented = orjson.dumps(former, option=orjson.OPT_INDENT_2).decode()
                sizes["before"].append(count_text(indented))
                sizes["memories"].append(found.tokens)
        finally:
            memory.close()
    compact, before = statistics.fmean(sizes["compact"]), statistics.fmean(sizes["before"])
    return {
        "benchmark": "mcp",
        "budget": budget,
        "questions": len(questions),
        "result_tokens": {name: _summary(values) for name, values in sizes.items()},
        "overhead": {
            "compact": round(compact - statistics.fmean(sizes["memories"]), 1),
            "before": round(before - statistics.fmean(sizes["memories"]), 1),
        },
        "compact_vs_before": round(compact / before, 3),
    }


@click.command("mcp")
@click.option(
    "--data", default=None, help="Folder of the sessions (default: ../shared/data/claude-code)."
)
@count_option("--budget", at_least=1, default=400, help="The recall budget.", show_default=False)
@json_option
def mcp_bench(data: str | None, budget: int, as_json: bool) -> None:
    """Tokens of an MCP recall result, compact against the former detailed shape.

    Example: lamina bench mcp --budget 400 --json
    """
    folder = Path(data) if data else shared_data_dir("claude-code")
    if folder is None:
        raise InputError("no --data given and ../shared/data/claude-code not found")
    emit(run_mcp_bench(folder, budget), as_json)
