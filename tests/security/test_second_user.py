"""A real second local user (`nobody`, run with setpriv) against a user's Lamina: the data
directory, the keyless loopback server and the warm server's socket stay the owner's.

Runs where the tests run as root (CI does): the other user runs the system's Python with its
standard library only, as an attacker with a shell on the machine would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.access import local_token

from ..conftest import EXAMPLE
from .servers import Served, env_for

SETPRIV = shutil.which("setpriv")
SYSTEM_PYTHON = Path("/usr/bin/python3")
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.name != "posix"
    or os.geteuid() != 0
    or SETPRIV is None
    or not SYSTEM_PYTHON.exists()
    or not EXAMPLE.exists(),
    reason="needs root, setpriv and /usr/bin/python3 to act as a second user",
)


def as_other_user(code: str, *args: str) -> dict[str, object]:
    """Run `code` as `nobody`; it prints one JSON object of what it could do."""
    assert SETPRIV is not None
    done = subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         str(SYSTEM_PYTHON), "-I", "-c", code, *args],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    # Under a folder every user may enter, so that only Lamina's own modes stand in the way
    # (pytest's temporary folders are the owner's alone).
    top = Path(tempfile.mkdtemp(prefix="lamina-second-user-"))
    top.chmod(0o755)
    data = top / "lamina"
    done = subprocess.run(
        [sys.executable, "-m", "lamina", "retain", str(EXAMPLE), "--bank", "proj"],
        capture_output=True, text=True, env=env_for(data), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    local_token(data)  # what a keyless server asks for, made as `lamina serve` makes it
    yield data
    shutil.rmtree(top, ignore_errors=True)


READ_FILES = """
import json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as handle:
            handle.read(16)
        out[path] = "read"
    except OSError as exc:
        out[path] = type(exc).__name__
try:
    os.listdir(os.path.dirname(sys.argv[1]))
    out["listed"] = True
except OSError:
    out["listed"] = False
print(json.dumps(out))
"""


def test_the_other_user_reads_nothing_of_the_data_directory(home: Path) -> None:
    files = [home / "lamina.db", home / "local-token", home / "logs" / "hooks.log"]
    found = as_other_user(READ_FILES, *map(str, files))
    assert found["listed"] is False
    assert all(found[str(f)] == "PermissionError" for f in files), found


CALL_SERVER = """
import json, sys, urllib.error, urllib.request
out = {}
for method, path, body in (("GET", "/v1/banks", None),
                           ("POST", "/v1/banks/proj/recall", b'{"query": "database"}'),
                           ("DELETE", "/v1/banks/proj/memories/any", None)):
    request = urllib.request.Request(sys.argv[1] + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            out[method + " " + path] = answer.status
    except urllib.error.HTTPError as exc:
        out[method + " " + path] = exc.code
print(json.dumps(out))
"""


def test_the_keyless_loopback_server_answers_the_other_user_nothing(home: Path) -> None:
    server = Served(home, "serve")
    try:
        found = as_other_user(CALL_SERVER, server.url)
        assert set(found.values()) == {401}, found
        # The owner, with the token only they can read, is answered, and nothing was deleted.
        banks = server.call("GET", "/v1/banks", key=server.token)
        assert banks.status_code == 200 and "proj" in banks.text
    finally:
        server.stop()


CONNECT = """
import json, socket, sys
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(sys.argv[1])
        sock.sendall(b'{"op": "ping"}\\n')
        print(json.dumps({"connected": True, "answer": sock.recv(200).decode(errors="replace")}))
except OSError as exc:
    print(json.dumps({"connected": False, "error": type(exc).__name__}))
"""


def test_the_other_user_cannot_reach_the_warm_server(home: Path) -> None:
    run = [sys.executable, "-m", "lamina", "--home", str(home), "warm"]
    started = subprocess.run([*run, "start", "--json", "--idle-timeout", "60"], env=env_for(home),
                             capture_output=True, text=True, timeout=180)  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        found = as_other_user(CONNECT, str(home / "run" / "warm.sock"))
        assert found == {"connected": False, "error": "PermissionError"}, found
    finally:
        subprocess.run([*run, "stop"], env=env_for(home), capture_output=True, timeout=60)
