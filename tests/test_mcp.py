"""An MCP client session from the official SDK against `lamina mcp` over stdio."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import EXAMPLE, needs_shared

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")


def payload(result: Any) -> dict[str, Any]:
    if result.structured_content is not None:
        content = result.structured_content
        return (
            content.get("result", content) if "result" in content and len(content) == 1 else content
        )
    return json.loads(result.content[0].text)


async def session_run(home: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lamina", "mcp", "--bank", "mcp-test"],
        env={**os.environ, "LAMINA_HOME": str(home)},
    )
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        out["tools"] = {t.name: t for t in tools.tools}
        out["retain"] = payload(
            await session.call_tool("retain_transcript", {"path": str(EXAMPLE)})
        )
        out["note"] = payload(
            await session.call_tool("retain_text", {"text": "The staging server is called ash."})
        )
        out["recall"] = payload(
            await session.call_tool(
                "recall", {"query": "which environment variable holds the database path?"}
            )
        )
        out["recall_detail"] = payload(
            await session.call_tool(
                "recall",
                {"query": "which environment variable holds the database path?", "detail": True},
            )
        )
        out["recall_text"] = (
            (await session.call_tool("recall", {"query": "database path", "budget": 400}))
            .content[0]
            .text
        )
        out["detail_text"] = (
            (
                await session.call_tool(
                    "recall", {"query": "database path", "budget": 400, "detail": True}
                )
            )
            .content[0]
            .text
        )
        out["staging"] = payload(
            await session.call_tool("recall", {"query": "staging server name"})
        )
        first = out["recall"]["memories"][0]["id"]
        out["marked"] = payload(
            await session.call_tool("correct_memory", {"memory": first, "mark": "wrong"})
        )
        out["after_wrong"] = payload(
            await session.call_tool(
                "recall", {"query": "which environment variable holds the database path?"}
            )
        )
        out["unmarked"] = payload(
            await session.call_tool("correct_memory", {"memory": first, "mark": "unmark"})
        )
        out["mark_missing"] = await session.call_tool(
            "correct_memory", {"memory": "nope", "mark": "wrong"}
        )
        out["bad"] = await session.call_tool("recall", {"query": "x", "bank": "missing"})
        out["bad_file"] = await session.call_tool("retain_transcript", {"path": "/nope.jsonl"})
        out["not_transcript"] = await session.call_tool(
            "retain_transcript", {"path": str(EXAMPLE.parent.parent / "pyproject.toml")}
        )
        out["unknown_shape"] = await session.call_tool(
            "append_to_log", {"log": "l", "messages": [{"nothing": "here"}]}
        )
        out["forget_missing"] = await session.call_tool("forget_document", {"document": "nope"})
        out["docs"] = payload(await session.call_tool("list_documents", {}))
        out["pages"] = [
            payload(await session.call_tool("list_documents", {"limit": 1, "offset": n}))
            for n in (0, 1, 2)
        ]
        out["compiled"] = payload(
            await session.call_tool("compile_transcript", {"path": str(EXAMPLE), "budget": 8000})
        )
        out["compiled_openai"] = payload(
            await session.call_tool(
                "compile_transcript",
                {"path": str(EXAMPLE), "budget": 8000, "request_format": "openai"},
            )
        )
        out["bad_format"] = await session.call_tool(
            "compile_transcript", {"path": str(EXAMPLE), "request_format": "gemini"}
        )
    return out


def schema_of(tool: Any, name: str) -> dict[str, Any]:
    """A parameter's schema with `anyOf [X, null]` and `$ref`s resolved to X."""
    found: dict[str, Any] = tool.input_schema["properties"][name]
    defs = tool.input_schema.get("$defs", {})
    for option in found.get("anyOf", []):
        if option.get("type") != "null":
            found = {**found, **option}
    if "$ref" in found:
        found = {**found, **defs[found["$ref"].rsplit("/", 1)[1]]}
    if "$ref" in found.get("items", {}):
        found["items"] = defs[found["items"]["$ref"].rsplit("/", 1)[1]]
    return found


def check_tool_schemas(tools: dict[str, Any]) -> None:
    """What a client (and the model choosing a tool) is told: every parameter described and
    typed, formats as enums, messages with an item schema, and each tool's hints."""
    for tool in tools.values():
        assert tool.description, tool.name
        for name in tool.input_schema["properties"]:
            assert schema_of(tool, name).get("description"), f"{tool.name}.{name} undescribed"
        assert tool.annotations is not None, tool.name
    for tool, name in [("retain_transcript", "format"), ("append_to_log", "format"),
                       ("compile_log", "request_format"), ("pin_log", "mode")]:  # fmt: skip
        assert schema_of(tools[tool], name).get("enum"), f"{tool}.{name} is a free string"
    assert "claude-code" in schema_of(tools["append_to_log"], "format")["enum"]
    items = schema_of(tools["append_to_log"], "messages")["items"]
    assert {"role", "content"} <= set(items["properties"]) and items.get("description")
    assert "assistant" in str(items["properties"]["role"])
    hints = {name: tool.annotations for name, tool in tools.items()}
    for name in ("recall", "list_banks", "list_documents", "list_logs", "compile_transcript"):
        assert hints[name].read_only_hint is True, name
    for name in ("forget_document", "delete_log", "unpin_log"):
        assert hints[name].destructive_hint is True and not hints[name].read_only_hint, name
    for name in ("retain_text", "retain_transcript", "append_to_log"):
        assert hints[name].destructive_hint is False and hints[name].idempotent_hint, name


def test_mcp_client_lists_tools_retains_and_recalls(tmp_path: Path) -> None:
    out = anyio.run(session_run, tmp_path / "home")
    tools = out["tools"]
    assert {
        "recall",
        "retain_text",
        "retain_transcript",
        "list_banks",
        "list_documents",
        "forget_document",
    } <= set(tools)
    assert tools["recall"].description and "query" in tools["recall"].input_schema["properties"]
    check_tool_schemas(tools)
    assert out["retain"]["status"] == "retained" and out["retain"]["new_records"] == 83
    assert out["note"]["status"] == "retained"
    # The turn naming it is cut into parts; its part comes first or second.
    assert any("INKWELL_DB_PATH" in m["text"] for m in out["recall"]["memories"][:2])
    # By default a memory is its text, time and document; the rest only with `detail`.
    for memory in out["recall"]["memories"]:
        assert set(memory) == {"id", "time", "document", "text"}
        assert memory["document"] and memory["time"]
    assert "block" not in out["recall"] and "results" not in out["recall"]
    detail = out["recall_detail"]
    assert detail["block"].startswith("<lamina_memories>")
    assert [r["text"] for r in detail["results"]] == [m["text"] for m in out["recall"]["memories"]]
    assert all("channels" in r and "source" in r for r in detail["results"])
    from lamina.tokens import count_text

    assert count_text(out["recall_text"]) * 2 < count_text(out["detail_text"])
    assert "\n" not in out["recall_text"], "compact JSON, no indentation"
    assert "ash" in out["staging"]["memories"][0]["text"]
    # A memory marked wrong is recalled no more, until unmarked; an unknown id is one line.
    first = out["recall"]["memories"][0]["id"]
    assert out["marked"]["mark"]["state"] == "wrong"
    assert first not in [m["id"] for m in out["after_wrong"]["memories"]]
    assert out["unmarked"]["unmarked"]["memory"] == first
    assert out["mark_missing"].is_error and "nope" in out["mark_missing"].content[0].text
    assert out["bad"].is_error and "no bank named 'missing'" in out["bad"].content[0].text
    assert out["bad_file"].is_error and "no such file" in out["bad_file"].content[0].text
    # Errors are worded for the model calling the tool: its parameters, no command-line flags.
    for failed in ("not_transcript", "unknown_shape"):
        said = out[failed].content[0].text
        assert out[failed].is_error and "give `format`" in said and "--" not in said, said
    missing = out["forget_missing"]
    assert missing.is_error and "no document 'nope'" in missing.content[0].text
    from lamina.context import validate_anthropic, validate_openai

    assert validate_anthropic(out["compiled"]["request"]) == []
    assert out["compiled"]["report"]["tokens"] <= 8000 - 4000
    openai = out["compiled_openai"]
    assert validate_openai(openai["request"]) == []
    assert any(m["role"] == "tool" for m in openai["request"]["messages"])
    assert openai["report"]["tokens"] <= 8000 - 4000
    assert out["bad_format"].is_error and "gemini" in out["bad_format"].content[0].text
    assert {d["id"] for d in out["docs"]["documents"]} == {
        "7c1e4b2a-93d5-4f60-b8a2-5e0d6c3f9a17",
        "notes",
    }
    # A model pages through a long list instead of taking it whole into its context.
    assert out["docs"]["total"] == 2
    paged = [d["id"] for page in out["pages"] for d in page["documents"]]
    assert paged == [d["id"] for d in out["docs"]["documents"]]
    assert [page["total"] for page in out["pages"]] == [2, 2, 2]
    assert out["pages"][2]["documents"] == []


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def http_calls(url: str, key: str | None) -> dict[str, Any]:
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    out: dict[str, Any] = {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        out["retain"] = await session.call_tool(
            "retain_text", {"text": "The alpha team deploys on Tuesdays.", "bank": "alpha"}
        )
        out["recall"] = await session.call_tool(
            "recall", {"query": "when does the team deploy?", "bank": "alpha"}
        )
        out["banks"] = await session.call_tool("list_banks", {})
        log = {"log": "chat", "bank": "alpha"}
        said = [{"role": "user", "content": "Deploy on Tuesday?"},
                {"role": "assistant", "content": "Yes, Tuesdays at ten."}]  # fmt: skip
        out["append"] = await session.call_tool("append_to_log", {**log, "messages": said})
        out["compile"] = await session.call_tool(
            "compile_log", {**log, "budget": 4000, "reserve": 500}
        )
        out["logs"] = await session.call_tool("list_logs", {"bank": "alpha"})
        out["delete"] = await session.call_tool("delete_log", {"log": "none", "bank": "alpha"})
    return out


def test_mcp_over_http_uses_the_api_keys_and_their_banks(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    import httpx

    home = tmp_path / "home"
    env = {**os.environ, "LAMINA_HOME": str(home)}
    keys = {}
    for name, bank in (("a", "alpha"), ("b", "beta")):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "lamina",
                "keys",
                "create",
                name,
                "--bank",
                bank,
                "--new-bank",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        keys[name] = json.loads(out.stdout)["key"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lamina", "mcp", "--transport",
                             "streamable-http", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        mine = anyio.run(http_calls, url, keys["a"])
        assert not mine["retain"].is_error
        assert "Tuesdays" in payload(mine["recall"])["memories"][0]["text"]
        assert [b["bank"] for b in payload(mine["banks"])["banks"]] == ["alpha"]
        assert payload(mine["append"])["added"] == 2
        assert not mine["compile"].is_error
        assert [e["id"] for e in payload(mine["logs"])["logs"]] == ["chat"]
        assert mine["delete"].is_error and "no log 'none'" in mine["delete"].content[0].text
        theirs = anyio.run(http_calls, url, keys["b"])
        assert (
            theirs["retain"].is_error
            and "no bank named 'alpha'" in theirs["retain"].content[0].text
        )
        assert theirs["recall"].is_error
        assert payload(theirs["banks"])["banks"] == []
        for tool in ("append", "compile", "logs", "delete"):
            assert theirs[tool].is_error, tool
            assert "no bank named 'alpha'" in theirs[tool].content[0].text
        # The key is checked at the transport: without a valid one, even `initialize` and
        # `tools/list` answer HTTP 401, so a client with a wrong key does not connect.
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        for body in (hello, listing):
            for key in (None, "lam_wrong"):
                auth = {"Authorization": f"Bearer {key}"} if key else {}
                refused = httpx.post(url, json=body, headers={**accept, **auth}, timeout=30)
                assert refused.status_code == 401, refused.text
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert "API key" in refused.json()["error"]["message"]
        mine_key = {"Authorization": f"Bearer {keys['a']}"}
        welcomed = httpx.post(url, json=hello, timeout=30, headers={**accept, **mine_key})
        assert welcomed.status_code == 200
        with pytest.raises(BaseException) as failed:  # the SDK client: an exception group
            anyio.run(http_calls, url, None)
        assert "an API key is required" in " ".join(repr(e) for e in leaves(failed.value))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def log_session(home: Path, files: list[Path]) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lamina", "mcp", "--bank", "mcp-test"],
        env={**os.environ, "LAMINA_HOME": str(home)},
    )
    out: dict[str, Any] = {"compiled": []}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        call = session.call_tool
        out["tools"] = {t.name for t in (await session.list_tools()).tools}
        out["unknown"] = await call("compile_log", {"log": "s"})
        out["appended"] = payload(await call("append_to_log", {"log": "s", "path": str(files[0])}))
        out["again"] = payload(await call("append_to_log", {"log": "s", "path": str(files[0])}))
        out["unknown_log"] = await call("compile_log", {"log": "other"})
        for path in files:  # each file the whole session so far, as a live transcript grows
            out["compiled"].append(
                payload(
                    await call("compile_log", {"log": "s", "path": str(path), "budget": 32_000})
                )
            )
        out["low"] = await call("compile_log", {"log": "s", "budget": 10})
        out["tight"] = await call("compile_log", {"log": "s", "budget": 2000, "reserve": 1800})
        out["both"] = await call(
            "append_to_log", {"log": "s", "path": str(files[0]), "messages": [{"role": "user"}]}
        )
        out["listed"] = payload(await call("list_logs", {}))
        out["pinned"] = payload(
            await call(
                "pin_log", {"log": "s", "pin": "start", "mode": "raw", "first": 0, "last": 3}
            )
        )
        out["clash"] = await call(
            "pin_log", {"log": "s", "pin": "f", "mode": "exact", "level": 1, "first": 2, "last": 9}
        )
        out["pin_neither"] = await call("pin_log", {"log": "s", "pin": "n", "mode": "raw"})
        out["pinned_compile"] = payload(
            await call("compile_log", {"log": "s", "budget": 32_000, "system": "Be brief."})
        )
        out["kept_system"] = payload(await call("compile_log", {"log": "s", "budget": 32_000}))
        out["unpinned"] = payload(await call("unpin_log", {"log": "s", "pin": "start"}))
        out["unpinned_again"] = await call("unpin_log", {"log": "s", "pin": "start"})
        out["deleted"] = payload(await call("delete_log", {"log": "s"}))
        out["listed_after"] = payload(await call("list_logs", {}))
        out["deleted_again"] = await call("delete_log", {"log": "s"})
    return out


@needs_shared
def test_mcp_log_tools_keep_a_log_across_calls(tmp_path: Path) -> None:
    from lamina.context import validate_anthropic

    from .test_http import spotter_batches, unmarked

    files, records = [], []
    for n, batch in enumerate(spotter_batches(4)):
        records += batch
        files.append(tmp_path / f"grown-{n}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = anyio.run(log_session, tmp_path / "home", files)
    assert {"append_to_log", "compile_log", "list_logs", "delete_log", "pin_log", "unpin_log"} <= (
        out["tools"]
    )
    assert out["unknown"].is_error and "no bank named 'mcp-test'" in out["unknown"].content[0].text
    assert out["unknown_log"].is_error and "no log 'other'" in out["unknown_log"].content[0].text
    assert out["appended"]["added"] > 0 and out["again"]["added"] == 0
    compiled = out["compiled"]
    assert compiled[0]["report"]["summaries_written"] == 0  # appended before, nothing folded
    written = 0
    for previous, current in itertools.pairwise(compiled):
        assert validate_anthropic(current["request"]) == []
        assert current["report"]["tokens"] <= 28_000
        written += current["report"]["summaries_written"]
        if current["report"]["folds"] == 0:
            before = unmarked(previous["request"])
            assert unmarked(current["request"])[: len(before)] == before
    assert written > 0
    [entry] = out["listed"]["logs"]
    # Compiles wrote `written`; the others were written ahead of need in the background.
    assert entry["id"] == "s" and entry["summaries"] >= written
    assert entry["messages"] == compiled[-1]["report"]["log_messages"]
    assert out["low"].is_error and "budget" in out["low"].content[0].text
    assert out["tight"].is_error and "reserve" in out["tight"].content[0].text
    assert out["both"].is_error and "not both" in out["both"].content[0].text
    assert out["pinned"]["pins"] == ["pin 'start' (messages 0-3, raw)"]
    assert out["clash"].is_error and "'start'" in out["clash"].content[0].text
    assert out["pin_neither"].is_error and "'document'" in out["pin_neither"].content[0].text
    [held] = out["pinned_compile"]["report"]["pins"]
    assert held["name"] == "start" and held["shown_at_levels"] == [0]
    for compiled_with_system in (out["pinned_compile"], out["kept_system"]):
        assert compiled_with_system["request"]["system"][0]["text"] == "Be brief."
    assert out["unpinned"]["unpinned"] == "start" and out["unpinned_again"].is_error
    assert "no pin 'start' on log 's'" in out["unpinned_again"].content[0].text
    assert out["deleted"]["deleted"] is True and out["listed_after"]["logs"] == []
    assert out["deleted_again"].is_error
