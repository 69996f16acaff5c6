"""`./install.sh`: Lamina from a checkout in one command, for a user with an empty home, and
the same command again after the code changed (a `git pull`) upgrades it.

It builds a real virtual environment and installs the checkout with pip, as a user would (the
package registry or pip's cache must be reachable, as for the Quick start)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "install.sh"
LAUNCHER = ROOT / "plugins" / "lamina" / "scripts" / "run-lamina"


def _pip_cache() -> str:
    """The pip cache of the user running the tests: the fresh home must not fetch everything
    again."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else ""


def _checkout_copy(dest: Path) -> Path:
    """The tracked files of this checkout (what a clone holds), without build leftovers."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def _run(
    script: Path, home: Path, *args: str, path: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {
        "HOME": str(home),
        # A PATH without the user's bin folder, as on many fresh machines.
        "PATH": os.pathsep.join((*path, "/usr/local/bin", "/usr/bin", "/bin")),
        "LAMINA_PYTHON": str(Path(sys.base_prefix) / "bin" / "python3"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if cache := _pip_cache():
        env["PIP_CACHE_DIR"] = cache
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return subprocess.run(
        ["sh", str(script), *args], env=env, capture_output=True, text=True, timeout=900
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to copy the checkout")
def test_install_script_installs_then_upgrades_from_the_checkout(tmp_path: Path) -> None:
    checkout = _checkout_copy(tmp_path / "lamina")
    home = tmp_path / "home"
    home.mkdir()

    first = _run(checkout / "install.sh", home)
    assert first.returncode == 0, first.stderr
    command = home / ".local" / "bin" / "lamina"
    assert command.is_symlink()
    shown = subprocess.run([str(command), "--version"], capture_output=True, text=True)
    assert shown.returncode == 0 and "lamina" in shown.stdout
    # ~/.local/bin is not on that PATH: the user is told what to do about it.
    assert "is not on your PATH" in first.stderr
    assert 'export PATH="' in first.stderr

    # The plugin's launcher finds it there, with no PATH to help it.
    launched = subprocess.run(
        ["sh", str(LAUNCHER), "--version"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout == shown.stdout

    # A `git pull` brings new code under the same version number: the same command upgrades.
    init = checkout / "lamina" / "__init__.py"
    init.write_text(init.read_text() + "\nUPGRADED_BY_INSTALL_SCRIPT = True\n")
    again = _run(checkout / "install.sh", home)
    assert again.returncode == 0, again.stderr
    assert "Upgrading Lamina" in again.stderr
    python = home / ".local" / "share" / "lamina-venv" / "bin" / "python"
    upgraded = subprocess.run(
        [str(python), "-c", "import lamina; print(lamina.UPGRADED_BY_INSTALL_SCRIPT)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert upgraded.stdout.strip() == "True", upgraded.stderr

    # With Claude Code on the machine, --claude-code adds the plugin from the checkout, and
    # running it again (an upgrade) keeps it installed once.
    claude = os.environ.get("LAMINA_CLAUDE_BIN") or shutil.which("claude")
    if claude is None:
        return
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "claude").symlink_to(claude)
    for _ in range(2):
        plugin = _run(checkout / "install.sh", home, "--claude-code", path=(str(tools),))
        assert plugin.returncode == 0, plugin.stderr
        assert "Claude Code plugin installed" in plugin.stderr
    listed = subprocess.run(
        [claude, "plugin", "list"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert listed.stdout.count("lamina@lamina") == 1, listed.stdout + listed.stderr
    assert str(checkout / "plugins" / "lamina") in listed.stdout


def test_install_script_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    unknown = _run(SCRIPT, home, "--everything")
    assert unknown.returncode == 2
    assert "unknown option --everything" in unknown.stderr
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\nexit 1\n")
    old.chmod(0o755)
    refused = subprocess.run(
        ["sh", str(SCRIPT)],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "LAMINA_PYTHON": str(old)},
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1
    assert "older than Python 3.11" in refused.stderr
    assert not (home / ".local" / "bin" / "lamina").exists()
