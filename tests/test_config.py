"""Settings: command line, then environment, then the config file, then defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.config import config_path, default_bank, project_root, resolve_settings
from lamina.embed import DEFAULT_MODEL
from lamina.errors import ConfigError


def write_config(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return {"LAMINA_CONFIG": str(path)}


def test_data_home_precedence(tmp_path: Path) -> None:
    env = write_config(tmp_path, 'home = "/from/config"\n')
    assert resolve_settings(env, home="/from/flag").home == Path("/from/flag")
    assert resolve_settings({**env, "LAMINA_HOME": "/from/env"}).home == Path("/from/env")
    assert resolve_settings(env).home == Path("/from/config")
    assert resolve_settings({"LAMINA_CONFIG": str(tmp_path / "none.toml")}).home.name == "lamina"


def test_bank_per_project_with_worktrees_and_overrides(tmp_path: Path) -> None:
    main = tmp_path / "inkwell"
    (main / ".git" / "worktrees" / "feature").mkdir(parents=True)
    worktree = tmp_path / "inkwell-feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'feature'}\n")
    (main / ".git" / "worktrees" / "feature" / "commondir").write_text("../..\n")
    # The repository's entry names the worktree back, as `git worktree add` writes it.
    (main / ".git" / "worktrees" / "feature" / "gitdir").write_text(f"{worktree / '.git'}\n")
    env = {"LAMINA_CONFIG": str(tmp_path / "none.toml")}
    assert project_root(worktree) == main.resolve()
    derived = default_bank(worktree / ".", resolve_settings(env))
    assert derived == default_bank(main, resolve_settings(env)) and derived.startswith("inkwell-")
    configured = write_config(tmp_path, f'[banks]\n"{main}" = "notes-api"\n')
    assert default_bank(worktree, resolve_settings(configured)) == "notes-api"
    assert (
        default_bank(worktree, resolve_settings({**configured, "LAMINA_BANK": "forced"}))
        == "forced"
    )


def test_hook_settings_precedence(tmp_path: Path) -> None:
    env = write_config(tmp_path, "[hook]\nturns = 5\ntime_limit = 1.5\nbudget = 300\n")
    settings = resolve_settings({**env, "LAMINA_HOOK_TURNS": "2"}).hook
    assert (settings.context_turns, settings.time_limit, settings.budget) == (2, 1.5, 300)
    assert settings.max_query_chars == 800  # the default


def test_the_embedder_setting_chooses_what_a_bank_is_embedded_with(tmp_path: Path) -> None:
    env = write_config(tmp_path, 'embedder = "hash"\n')
    assert resolve_settings(env).embedder == "hash"
    assert resolve_settings({**env, "LAMINA_EMBEDDER": "minilm-l6"}).embedder == "minilm-l6"
    assert resolve_settings({"LAMINA_CONFIG": str(tmp_path / "none.toml")}).embedder is None
    with pytest.raises(ConfigError, match="embedder must be a non-empty string"):
        resolve_settings(write_config(tmp_path, "embedder = 3\n"))
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    run_env.update(
        LAMINA_HOME=str(tmp_path / "home"), **write_config(tmp_path, 'embedder = "hash"\n')
    )
    example = Path(__file__).parents[1] / "examples" / "session.jsonl"

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lamina", *args], capture_output=True,
                              text=True, env={**run_env, **extra}, timeout=120)  # fmt: skip

    assert run("retain", str(example), "--bank", "ex").returncode == 0
    listed = run("banks", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["banks"]
    assert set(row["embedders"]) == {"hash-ngram@1"} and row["embedded"] == row["memories"] > 0
    unknown = run("recall", "which database?", "--bank", "ex", LAMINA_EMBEDDER="nope")
    assert unknown.returncode == 3 and "no embedder named 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    # Recall with another model finds these memories by their words only: status says so,
    # and what to run; once reindexed with that model, the warning is gone.
    status = json.loads(run("status", "--json").stdout)
    assert status["banks"][0]["embedders"] == row["embedders"]
    assert not [w for w in status["warnings"] if "reindex" in w]
    other = {"LAMINA_EMBEDDER": "default"}
    (warning,) = [w for w in json.loads(run("status", "--json", **other).stdout)["warnings"]
                  if "reindex" in w]  # fmt: skip
    assert "bank ex:" in warning and "hash-ngram@1" in warning
    assert "lamina reindex --bank ex" in warning
    assert run("reindex", "--bank", "ex", **other).returncode == 0
    status = json.loads(run("status", "--json", **other).stdout)
    assert not [w for w in status["warnings"] if "reindex" in w]
    assert set(status["banks"][0]["embedders"]) == {DEFAULT_MODEL}


def test_banks_of_the_earlier_default_are_named_and_moved_by_reindex_all(tmp_path: Path) -> None:
    """Banks embedded by the earlier default model: with nothing configured, status names each
    one and what to run; `lamina reindex --all` moves every bank to the default model."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")}
    run_env.update(LAMINA_HOME=str(tmp_path / "home"), LAMINA_CONFIG=str(tmp_path / "none.toml"))
    example = Path(__file__).parents[1] / "examples" / "session.jsonl"

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lamina", *args], capture_output=True,
                              text=True, env={**run_env, **extra}, timeout=120)  # fmt: skip

    for bank in ("one", "two"):
        retained = run("retain", str(example), "--bank", bank, LAMINA_EMBEDDER="minilm-l3")
        assert retained.returncode == 0, retained.stderr
    warnings = [w for w in json.loads(run("status", "--json").stdout)["warnings"] if "reindex" in w]
    assert len(warnings) == 2
    assert "lamina reindex --bank one" in warnings[0]
    assert "lamina reindex --bank two" in warnings[1]
    both = run("reindex", "--all", "--bank", "one")
    assert both.returncode == 2 and "--bank or --all" in both.stderr
    moved = run("reindex", "--all", "--json")
    assert moved.returncode == 0, moved.stderr
    report = json.loads(moved.stdout)["banks"]
    assert [r["bank"] for r in report] == ["one", "two"]
    assert all(r["embedded"] > 0 and r["embedder"] == DEFAULT_MODEL for r in report)
    status = json.loads(run("status", "--json").stdout)
    assert not [w for w in status["warnings"] if "reindex" in w]
    assert all(set(b["embedders"]) == {DEFAULT_MODEL} for b in status["banks"])
    assert json.loads(run("reindex", "--all", "--json").stdout)["banks"][0]["embedded"] == 0


def test_a_broken_config_file_is_one_clear_error(tmp_path: Path) -> None:
    env = write_config(tmp_path, "home = [unclosed\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        resolve_settings(env)
    run_env = {**os.environ, **env}
    run_env.pop("LAMINA_HOME", None)
    result = subprocess.run([sys.executable, "-m", "lamina", "banks"], capture_output=True,
                            text=True, env=run_env, timeout=60)  # fmt: skip
    assert result.returncode == 3 and "not valid TOML" in result.stderr
    assert "Traceback" not in result.stderr
    hook = subprocess.run([sys.executable, "-m", "lamina", "hook"], input="{}",
                          capture_output=True, text=True, env=run_env, timeout=60)  # fmt: skip
    assert hook.returncode == 0 and "failed open" in hook.stderr


@pytest.mark.parametrize(
    "env",
    [{}, {"XDG_CONFIG_HOME": "/x/config", "XDG_DATA_HOME": "/x/data"},
     {"XDG_CONFIG_HOME": "  ", "XDG_DATA_HOME": ""}],
)  # fmt: skip
def test_the_default_folders_are_platformdirs_ones(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The config file and data directory are found without importing platformdirs (every
    hook process asks), in the folders platformdirs gives."""
    from platformdirs import user_config_path, user_data_path

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "LAMINA_CONFIG", "LAMINA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert config_path() == user_config_path("lamina", appauthor=False) / "config.toml"
    assert resolve_settings().home == user_data_path("lamina", appauthor=False)
