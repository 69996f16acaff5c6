"""`<private>...</private>` spans are never kept: not in memories, the search index, context
logs or exports, on every path a transcript takes (CLI retain, retain from code, compile with
--bank), checked in the database's bytes (WAL included) and not only in what recall prints."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.messages import Kind, Role, TextBlock, ToolResultBlock, ToolUseBlock
from lamina.private import hide_private, hide_private_all, strip_private
from lamina.readers import read_message_list, read_transcript
from lamina.store import open_store

from .conftest import CLAUDE_CODE, needs_shared

MARKERS = ("MARMOT7781", "ZEBRA4410", "OCELOT1234", "KESTREL5678", "WOMBAT9999")
"""Words that appear only inside private spans of the fixture."""


def test_spans_are_cut_case_insensitively_across_lines_and_to_the_end_when_unclosed() -> None:
    assert strip_private("keep <private>gone</private> this") == ("keep  this", False)
    assert strip_private("a <PRIVATE>\nx\ny\n</Private> b") == ("a  b", False)
    assert strip_private("a < private >x</ private > b")[0] == "a  b"
    assert strip_private("before <private>the rest") == ("before ", True)
    assert strip_private("still hidden", hidden=True) == ("", True)
    assert strip_private("hidden</private> shown", hidden=True) == (" shown", False)
    assert strip_private("<private>all</private>  ") == ("", False)
    assert strip_private("no tags at all") == ("no tags at all", False)


def _private_session(tmp_path: Path) -> Path:
    """A copy of a real Claude Code session with private spans put into a prompt (closed), a
    reply (over several lines), a tool's output (and Claude Code's copy of it), a reply whose
    span is never closed, and one prompt that is private from end to end."""
    source = CLAUDE_CODE / "obra-long-conversation.jsonl"
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]

    def text_block(line: int) -> dict[str, Any]:
        content = records[line - 1]["message"]["content"]
        if isinstance(content, str):
            records[line - 1]["message"]["content"] = [{"type": "text", "text": content}]
            content = records[line - 1]["message"]["content"]
        return next(b for b in content if b.get("type") == "text")

    prompt = text_block(17)  # "so, i think the early tests are going to be both cli and web..."
    assert prompt["text"].startswith("so, i think the early tests")
    prompt["text"] = "<private>MARMOT7781 is the staging password</private> " + prompt["text"]
    reply = text_block(20)  # "OK, now I'm excited too. ..."
    reply["text"] = "<PRIVATE>\nZEBRA4410 across\nseveral lines\n</Private>" + reply["text"]
    result = records[19 - 1]
    block = result["message"]["content"][0]
    assert block["type"] == "tool_result"
    block["content"] = "<private>OCELOT1234</private>" + json.dumps(block["content"])
    if isinstance(result.get("toolUseResult"), dict):
        for key, value in result["toolUseResult"].items():
            if isinstance(value, str) and value:
                result["toolUseResult"][key] = "<private>OCELOT1234</private>" + value
    unclosed = text_block(23)  # "Oh, you're absolutely right. I was conflating tools. ..."
    unclosed["text"] = "Oh, right.\n<private>KESTREL5678 and all that follows" + unclosed["text"]
    whole = copy.deepcopy(records[22 - 1])
    whole["uuid"] = "private-prompt-0001"
    whole["message"]["content"] = "<private>WOMBAT9999 a whole private prompt</private>"
    records.insert(24 - 1, whole)
    del records[60:]  # the first ten turns: enough, and quick to compile
    for record in records[12:14]:  # two PDFs read, as base64: cut, so redaction is quick
        document = record.get("toolUseResult", {}).get("file", {})
        if isinstance(document, dict) and "base64" in document:
            document["base64"] = document["base64"][:2000]
        for item in record["message"]["content"]:
            if isinstance(item.get("source"), dict) and "data" in item["source"]:
                item["source"]["data"] = item["source"]["data"][:2000]
    path = tmp_path / "obra-private.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _files_hold(folder: Path, words: tuple[str, ...]) -> dict[str, list[str]]:
    """Which of the words each file under `folder` holds, in its bytes (the database, its WAL
    and shared memory, vector files, logs)."""
    found: dict[str, list[str]] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            held = [w for w in words if w.encode() in data]
            if held:
                found[str(path)] = held
    return found


@needs_shared
def test_a_real_session_with_private_spans_keeps_none_of_them(tmp_path: Path) -> None:
    path = _private_session(tmp_path)
    messages = read_transcript(str(path), format="claude-code").messages
    raw = json.dumps([m.records for m in messages])
    assert all(w in raw for w in MARKERS)  # the fixture holds them
    memory_bank = MemoryBank(open_store(tmp_path / "home" / "lamina.db"), HashEmbedder())
    report = memory_bank.retain_file(path, "proj")
    assert report.memories_added > 0
    texts = "\n".join(m.text for m in memory_bank.memories("proj"))
    assert not [w for w in MARKERS if w in texts]
    # What surrounds a span is kept.
    assert "so, i think the early tests" in texts and "OK, now I'm excited too" in texts
    assert "Oh, right." in texts and "staging password" not in texts
    # The prompt that was all private leaves no memory.
    assert not any("private-prompt-0001" in m.record_ids for m in memory_bank.memories("proj"))
    hits = memory_bank.recall("proj", "MARMOT7781 ZEBRA4410 OCELOT1234 KESTREL5678 WOMBAT9999")
    assert not [w for w in MARKERS if any(w in h.text for h in hits.hits)]
    memory_bank.close()
    assert _files_hold(tmp_path / "home", MARKERS) == {}


def _lamina(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_CONFIG": str(home / "none.toml")}
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        check=False,
    )


@needs_shared
def test_cli_retain_compile_with_a_bank_and_export_keep_no_private_span(tmp_path: Path) -> None:
    path = _private_session(tmp_path)
    home = tmp_path / "home"
    retained = _lamina(home, "retain", str(path), "--bank", "proj", "--no-embed", "--json")
    assert retained.returncode == 0, retained.stderr
    assert json.loads(retained.stdout)["files"][0]["memories_added"] > 0
    compiled = _lamina(home, "compile", str(path), "--bank", "proj", "--budget", "200000", "--json")
    assert compiled.returncode == 0, compiled.stderr
    request = json.dumps(json.loads(compiled.stdout))
    assert not [w for w in MARKERS if w in request]  # built from the stored log
    exported = _lamina(home, "export", "--bank", "proj")
    assert exported.returncode == 0, exported.stderr
    assert '"type":"log_message"' in exported.stdout.replace(" ", "")
    assert not [w for w in MARKERS if w in exported.stdout]
    assert _files_hold(home, MARKERS) == {}


def test_retain_from_code_drops_private_spans_and_all_private_messages(tmp_path: Path) -> None:
    memory_bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    messages = [
        {"role": "user", "content": "How do we deploy? <private>MARMOT7781</private> thanks"},
        {"role": "assistant", "content": "With the script.\n<private>ZEBRA4410 to the end"},
        {"role": "user", "content": "<Private>WOMBAT9999</Private>"},
        {"role": "assistant", "content": "Noted."},
    ]
    read = read_message_list(messages, format="anthropic").messages
    memory_bank.retain_messages(read, "proj", "conv-1")
    texts = "\n".join(m.text for m in memory_bank.memories("proj"))
    assert "How do we deploy?" in texts and "With the script." in texts
    assert not [w for w in MARKERS if w in texts]
    memory_bank.close()
    assert _files_hold(tmp_path, MARKERS) == {}


def test_a_tool_call_and_its_result_stay_paired_without_their_private_text() -> None:
    from lamina.messages import Message

    use = Message(
        "a1",
        Role.ASSISTANT,
        (ToolUseBlock("t1", "Bash", {"command": "echo <private>OCELOT1234</private>"}),),
        Kind.TOOL_ACTIVITY,
    )
    result = Message(
        "u1",
        Role.USER,
        (ToolResultBlock("t1", (TextBlock("<private>OCELOT1234</private>"),)),),
        Kind.TOOL_ACTIVITY,
    )
    kept = hide_private_all([use, result])
    assert [m.id for m in kept] == ["a1", "u1"]
    assert "OCELOT" not in repr(kept)
    block = kept[1].blocks[0]
    assert isinstance(block, ToolResultBlock) and block.tool_use_id == "t1"
    prompt = Message("u2", Role.USER, (TextBlock("<private>x</private>"),), Kind.PROMPT)
    assert hide_private(prompt) is None


@pytest.mark.parametrize("tag", ["<private>", "<PRIVATE>", "<Private >"])
def test_an_unclosed_span_hides_the_blocks_after_it(tag: str) -> None:
    from lamina.messages import Message

    message = Message(
        "a1",
        Role.ASSISTANT,
        (TextBlock(f"shown {tag} hidden"), TextBlock("KESTREL5678 also hidden")),
        Kind.REPLY,
    )
    kept = hide_private(message)
    assert kept is not None and kept.blocks == (TextBlock("shown "),)
