"""The security suite: the attacks of the hardening pass, against real server processes on
loopback and real SQLite and PostgreSQL. Runs with the rest of the tests (and in CI); on its
own with `pytest -m security`."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.security)
