"""`lamina import` on hostile or damaged exports: checked whole before anything is written,
one line naming what and where, exit 2, and the bank exactly as it was."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.transfer import export_bank, import_bank
from lamina.embed import HashEmbedder
from lamina.errors import InputError
from lamina.store.sqlite import SQLiteStore

from ..conftest import EXAMPLE

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A real export of the bundled example session, as parsed lines."""
    path = tmp_path_factory.mktemp("source") / "lamina.db"
    bank = MemoryBank(SQLiteStore(path), HashEmbedder())
    bank.retain_file(EXAMPLE, "ex")
    lines = [orjson.loads(line) for line in export_bank(bank.store, "ex")]
    bank.close()
    return lines


def _lines(rows: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(row) + b"\n" for row in rows]


def _vector(values: Any) -> str:
    return base64.b64encode(np.asarray(values, dtype=np.float32).tobytes()).decode()


def _first_memory(rows: list[dict[str, Any]]) -> int:
    return next(i for i, row in enumerate(rows) if row["type"] == "memory")


def _last_memory(rows: list[dict[str, Any]]) -> int:
    return max(i for i, row in enumerate(rows) if row["type"] == "memory")


def _set(index: Callable[[list[dict[str, Any]]], int], **fields: Any) -> Any:
    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = [dict(r) for r in rows]
        rows[index(rows)].update(fields)
        return rows

    return change


def _dim(rows: list[dict[str, Any]]) -> int:
    return len(base64.b64decode(rows[_first_memory(rows)]["embedding"])) // 4


DAMAGED = {
    # A vector that would make every score of the bank null, or overflow its dot products.
    "nan vector": lambda rows: _set(_last_memory, embedding=_vector([np.nan] * _dim(rows)))(rows),
    "huge vector": lambda rows: _set(_last_memory, embedding=_vector([3e38] * _dim(rows)))(rows),
    "short vector": lambda rows: _set(_last_memory, embedding=_vector([0.1] * 7))(rows),
    "vector not base64": _set(_last_memory, embedding="%%%"),
    "text not a string": _set(_last_memory, text={"a": 1}),
    "record ids not strings": _set(_last_memory, record_ids=[1, 2]),
    "bad date": _set(_last_memory, said_at="yesterday-ish"),
    "memory without id": _set(_last_memory, id=""),
    "cursor not an object": _set(lambda rows: 1, cursor="x"),
    "unknown cursor field": _set(lambda rows: 1, cursor={"bogus": 1}),
    "line number negative": _set(_last_memory, first_line=-4),
    "id used twice": lambda rows: [*rows, {**rows[_first_memory(rows)]}],
    "log line outside a log": lambda rows: [*rows, {"type": "pin", "log": "nope"}],
    "not an object": lambda rows: [*rows, [1, 2, 3]],
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_export_changes_nothing(
    tmp_path: Path, export: list[dict[str, Any]], case: str
) -> None:
    store = SQLiteStore(tmp_path / "lamina.db")
    rows = DAMAGED[case](export)
    with pytest.raises(InputError) as error:
        import_bank(store, _lines(rows), source="bad.jsonl")
    assert str(error.value).startswith("bad.jsonl")
    assert "\n" not in str(error.value)
    # All or nothing: the good documents before the bad line are not kept, and no empty bank
    # is left behind.
    assert store.get_bank("ex") is None
    assert store.list_banks() == []


def test_a_damaged_export_leaves_an_existing_bank_as_it_was(
    tmp_path: Path, export: list[dict[str, Any]]
) -> None:
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), HashEmbedder())
    import_bank(bank.store, _lines(export))
    before = sorted((m.id, m.document, m.text) for m in bank.memories("ex"))
    # The same export again, but with its first memory moved to a new document at the end.
    moved = {**export[_first_memory(export)], "document": "elsewhere"}
    document = {**export[1], "id": "elsewhere", "records": []}
    with pytest.raises(InputError, match="belongs to document"):
        import_bank(bank.store, _lines([*export[:1], document, moved]))
    # Vectors of another dimension than the bank's.
    other = {**export[_first_memory(export)], "id": "new", "embedding": _vector([0.5] * 4)}
    with pytest.raises(InputError, match="dimensions"):
        import_bank(bank.store, _lines([*export[:2], other]))
    assert sorted((m.id, m.document, m.text) for m in bank.memories("ex")) == before
    assert bank.recall("which database did we choose", "ex").hits


def test_imported_text_is_redacted(tmp_path: Path, export: list[dict[str, Any]]) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    rows = _set(_last_memory, text=f"the deploy token is {secret}")(export)
    store = SQLiteStore(tmp_path / "lamina.db")
    import_bank(store, _lines(rows))
    store.close()
    for path in tmp_path.iterdir():
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path.name


def _lamina(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_BANK", None)
    return subprocess.run(
        [sys.executable, "-P", "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("name", ["", "/", "../..", "a\x00b", " padded", "x" * 100_000])
def test_bank_names_that_cannot_name_a_bank_are_refused(
    tmp_path: Path, export: list[dict[str, Any]], name: str
) -> None:
    rows = [{**export[0], "bank": name}, *export[1:]]
    file = tmp_path / "export.jsonl"
    file.write_bytes(b"".join(_lines(rows)))
    result = _lamina(tmp_path / "home", "import", str(file), "--json")
    assert result.returncode == 2, result.stderr
    assert "bank name" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    listed = _lamina(tmp_path / "home", "banks", "--json")
    assert orjson.loads(listed.stdout)["banks"] == []


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01\x02", b'{"type": "lamina-export", "version": 1}\n', b"[]\n", b"null\n"],
)
def test_malformed_files_get_one_line_and_no_bank(tmp_path: Path, content: bytes) -> None:
    file = tmp_path / "export.jsonl"
    file.write_bytes(content)
    result = _lamina(tmp_path / "home", "import", str(file))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert str(file) in result.stderr
    listed = _lamina(tmp_path / "home", "banks", "--json")
    assert orjson.loads(listed.stdout)["banks"] == []
