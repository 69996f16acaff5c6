"""A wrong name on the command line is a one-line error with a documented exit code, never a
silent success: each command x wrong input, run as a user runs it, on a real SQLite bank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamina import MemoryBank, read_message_list
from lamina.embed import HashEmbedder

NO_BANK = "error: no bank named 'nope' (see `lamina banks`)"
NO_DOCUMENT = "error: no document 'nope' in bank 'proj' (see `lamina documents`)"
NO_LOG = "error: no log 'nolog' in bank 'proj'"


def seed(home: Path, *texts: str) -> str:
    """Bank `proj` with document `chat` holding `texts` as alternating turns; a memory's id."""
    roles = ["user", "assistant"]
    data = [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]
    bank = MemoryBank.open(home, embedder=HashEmbedder())
    try:
        bank.retain_messages(read_message_list(data).messages, "proj", "chat")
        return next(bank.memories("proj")).id
    finally:
        bank.close()


def lamina(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    for key in ("LAMINA_BANK", "LAMINA_DATABASE_URL", "LAMINA_CONFIG"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=300,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with bank `proj` holding document `chat`."""
    home = tmp_path_factory.mktemp("cli-errors") / "home"
    seed(home, "We chose PostgreSQL.", "Noted, PostgreSQL.")
    return home


MATRIX = [
    (["documents", "--bank", "nope"], NO_BANK),
    (["documents", "--bank", "nope", "--json"], NO_BANK),
    (["reindex", "--bank", "nope"], NO_BANK),
    (["recall", "which database?", "--bank", "nope"], NO_BANK),
    (["recall", "which database?", "--bank", "proj", "--document", "nope"], NO_DOCUMENT),
    (["recall", "q", "--bank", "proj", "--document", "chat", "--document", "nope"], NO_DOCUMENT),
    (["forget", "chat", "--bank", "nope"], NO_BANK),
    (["forget", "nope", "--bank", "proj"], NO_DOCUMENT),
    (["forget", "--memory", "nope", "--bank", "proj"], "error: no memory 'nope' in bank 'proj'"),
    (["forget", "--all-of-bank", "--bank", "nope", "--yes"], NO_BANK),
    (
        ["forget", "--all-of-bank", "--bank", "proj", "--json"],
        "error: --json needs --yes (there is no one to confirm)",
    ),
    (["export", "--bank", "nope", "-o", "out.jsonl"], NO_BANK),
    (["export", "--bank", "nope"], NO_BANK),
    (
        ["copy", "--from", "typo.db", "--to", "copy.db"],
        "error: typo.db: no such database file (--from)",
    ),
    (
        ["copy", "--from", "sqlite:///nowhere/typo.db", "--to", "copy.db"],
        "error: sqlite:///nowhere/typo.db: no such database file (--from)",
    ),
    (["logs", "list", "--bank", "nope"], NO_BANK),
    (["logs", "show", "nolog", "--bank", "nope"], NO_BANK),
    (["logs", "show", "nolog", "--bank", "proj"], NO_LOG),
    (["logs", "delete", "nolog", "--bank", "proj", "--yes"], NO_LOG),
    (["pin", "nolog", "--bank", "nope"], NO_BANK),
    (["pin", "nolog", "--messages", "0-3", "--raw", "--bank", "proj"], NO_LOG),
    (["unpin", "nolog", "p1", "--bank", "nope"], NO_BANK),
    (["unpin", "nolog", "p1", "--bank", "proj"], NO_LOG),
    (
        ["keys", "create", "ci", "--bank", "nope"],
        NO_BANK + "; add --new-bank to make a key for a bank a client will create",
    ),
    (["documents", "--home", "{home}", "--bank", "nope"], NO_BANK),
    (["recall", "q", "--bank", "nope", "--json"], NO_BANK),
    (
        ["forget", "--memory", "nope", "--bank", "proj", "--json"],
        "error: no memory 'nope' in bank 'proj'",
    ),
    (["logs", "show", "nolog", "--bank", "proj", "--json"], NO_LOG),
    (
        ["keys", "revoke", "nope", "--json"],
        "error: no API key named 'nope' (see `lamina keys list`)",
    ),
]


@pytest.mark.parametrize(("args", "message"), MATRIX, ids=[" ".join(a) for a, _ in MATRIX])
def test_a_wrong_name_is_one_line_and_exit_2(home: Path, args: list[str], message: str) -> None:
    result = lamina(home, *(a.format(home=home) for a in args))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [message]
    if "--json" in args:  # the same error, as one JSON object, as the HTTP API gives it
        error = json.loads(result.stdout)["error"]
        assert message == f"error: {error['message']}" and error["type"]
    else:
        assert result.stdout == ""
    # Nothing was written on the way: no export file, no new database.
    assert not (home.parent / "out.jsonl").exists()
    assert not (home.parent / "copy.db").exists()
    assert not (home.parent / "typo.db").exists()


def test_the_bank_is_untouched_by_the_mistakes(home: Path) -> None:
    result = lamina(home, "documents", "--bank", "proj", "--json")
    assert result.returncode == 0, result.stderr
    assert [d["id"] for d in json.loads(result.stdout)["documents"]] == ["chat"]


def test_a_key_for_a_bank_not_made_yet_is_said_so(home: Path) -> None:
    made = lamina(home, "keys", "create", "agent", "--bank", "later", "--new-bank", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["banks"] == ["later"]
    listed = lamina(home, "keys", "list", "--json")
    assert [k["name"] for k in json.loads(listed.stdout)] == ["agent"]  # the typo made none


def test_home_and_database_url_work_after_the_command(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"  # LAMINA_HOME points here; --home must win
    elsewhere.mkdir()
    for args in (
        ["--home", str(home), "documents", "--bank", "proj", "--json"],
        ["documents", "--bank", "proj", "--json", "--home", str(home)],
        ["documents", "--bank", "proj", "--json", "--database-url", str(home / "lamina.db")],
        ["logs", "list", "--bank", "proj", "--json", "--home", str(home)],
    ):
        result = lamina(elsewhere, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert json.loads(result.stdout)["bank"] == "proj"


def test_a_retained_file_names_its_document(tmp_path: Path) -> None:
    """Documents are kept by session id; the path a user retained works wherever a document is
    named (recall --document, forget)."""
    home = tmp_path / "home"
    session = Path(__file__).parent.parent / "examples" / "session.jsonl"
    assert lamina(home, "retain", str(session), "--bank", "proj").returncode == 0
    relative = os.path.relpath(session, home.parent)  # as typed from where the user stands
    hits = lamina(home, "recall", "database", "--bank", "proj", "--document", relative, "--json")
    assert hits.returncode == 0, hits.stderr
    assert json.loads(hits.stdout)["results"]
    gone = lamina(home, "forget", relative, "--bank", "proj", "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["memories_forgotten"] > 0
    left = lamina(home, "documents", "--bank", "proj", "--json")
    assert json.loads(left.stdout)["documents"] == []


def test_forget_all_of_bank_asks_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, "Keep me.")

    declined = lamina(home, "forget", "--all-of-bank", "--bank", "proj", stdin="n\n")
    assert declined.returncode == 130
    assert "delete bank 'proj' (1 document, 1 memory)?" in declined.stderr
    assert declined.stderr.rstrip().endswith("error: aborted")
    assert lamina(home, "documents", "--bank", "proj").returncode == 0  # still there

    agreed = lamina(home, "forget", "--all-of-bank", "proj", stdin="y\n")
    assert agreed.returncode == 0, agreed.stderr
    assert agreed.stdout == "deleted bank proj (1 document, 1 memory)\n"
    assert lamina(home, "documents", "--bank", "proj").returncode == 2  # gone


def test_forget_all_of_bank_names_one_bank(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, "Keep me.")
    two = lamina(home, "forget", "--all-of-bank", "proj", "--bank", "other", "--yes")
    assert two.returncode == 2
    assert "--all-of-bank proj and --bank other name two banks" in two.stderr
    missing = lamina(home, "forget", "--all-of-bank", "nope", "--yes", "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["error"]["type"] == "not_found"
    assert lamina(home, "documents", "--bank", "proj").returncode == 0  # untouched


def test_forget_with_yes_does_not_ask(tmp_path: Path) -> None:
    home = tmp_path / "home"
    memory = seed(home, "Keep me.")

    one = lamina(home, "forget", "--memory", memory, "--bank", "proj", "--json")
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout) == {"bank": "proj", "memory": memory, "forgotten": True}
    doc = lamina(home, "forget", "chat", "--bank", "proj")
    assert doc.returncode == 0, doc.stderr
    assert doc.stdout == "forgot chat from bank proj: 0 memories\n"
    whole = lamina(home, "forget", "--all-of-bank", "--bank", "proj", "--yes", "--json")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(whole.stdout) == {"bank": "proj", "deleted_bank": True}
