"""What tools printed is remembered: the informative line of an error, a test run's counts and
failing tests, a commit's `[branch hash] subject` and whole message, a linter's `file:line`
lines, a package manager's and a migration's salient lines, a pull request's URL; bounded per
call, redacted, in `activity` units that stand beside what was said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.messages import TextBlock, ToolResultBlock, ToolUseBlock
from lamina.readers import read_transcript
from lamina.store import open_store
from lamina.text.actions import STATED_CHARS
from lamina.text.printed import LINE_CHARS, MAX_LINES, printed_lines
from lamina.text.units import UnitOptions, build_units, segments, unit_keys
from lamina.tokens import count_text

from .conftest import CC, CLAUDE_CODE, SHARED, needs_shared

ENTIRE = SHARED / "claude-code-entire"
LINT_AND_COMMIT = ENTIRE / "entire-43c87127.jsonl"
"""A Go session (one of the six entire sessions open for design): a failing test, a lint run,
a commit through a skill that does not exist, and a commit."""
needs_entire = pytest.mark.skipif(
    not LINT_AND_COMMIT.is_file(), reason="../shared/data/claude-code-entire is not there"
)


def _printed(
    output: str, command: str = "make test", *, error: bool = False, **inp: Any
) -> list[str]:
    call = ToolUseBlock(
        "t1", inp.pop("name", "Bash"), {"command": command, **inp} if command else inp
    )
    result = ToolResultBlock("t1", (TextBlock(output),), is_error=error)
    return printed_lines(call, result, lambda text: text)


def _text(lines: list[str]) -> str:
    return "\n".join(lines)


# -- one rule at a time ---------------------------------------------------------------------------
def test_a_pytest_failure_keeps_the_failing_test_the_error_and_the_counts() -> None:
    output = "\n".join(
        [
            "Exit code 1",
            "$ pytest -q",
            "...F",
            "=================================== FAILURES ===================================",
            "__________________________________ test_parse __________________________________",
            "    def test_parse():",
            ">       assert parse('x') == 1",
            "E       AssertionError: assert 2 == 1",
            "tests/test_parser.py:12: AssertionError",
            "=========================== short test summary info ============================",
            "FAILED tests/test_parser.py::test_parse - AssertionError: assert 2 == 1",
            "========================= 1 failed, 3 passed in 0.12s =========================",
        ]
    )
    lines = _printed(output, "pytest -q", error=True)
    text = _text(lines)
    assert "FAILED tests/test_parser.py::test_parse" in text
    assert "1 failed, 3 passed" in text
    assert "AssertionError: assert 2 == 1" in text
    assert "Exit code" not in text and "$ pytest" not in text  # not the echo, not the code
    assert all(line.startswith("  error: ") for line in lines)
    assert len(lines) <= MAX_LINES


def test_the_informative_line_of_an_error_not_its_echoed_command() -> None:
    output = "\n".join(
        [
            "Exit code 1",
            "npm run build",
            "> app@1.0.0 build",
            "src/app.ts(6,33): error TS2307: Cannot find module 'x'.",
        ]
    )
    text = _text(_printed(output, "npm run build", error=True))
    assert "src/app.ts(6,33): error TS2307: Cannot find module 'x'." in text
    assert "Exit code" not in text and "error: npm run build" not in text

    traceback = "\n".join(
        [
            "Exit code 1",
            "Traceback (most recent call last):",
            '  File "<string>", line 1, in <module>',
            "ModuleNotFoundError: No module named 'yaml'",
        ]
    )
    assert "ModuleNotFoundError: No module named 'yaml'" in _text(
        _printed(traceback, "python3 -c 'import yaml'", error=True)
    )


def test_go_cargo_jest_and_exunit_summaries_and_failing_names() -> None:
    go = "\n".join(
        [
            "Exit code 1",
            "=== RUN   TestTarget",
            "=== RUN   TestTarget/fish",
            "    setup_test.go:649: got err=<nil>, want errUnsupported",
            "--- FAIL: TestTarget (0.00s)",
            "    --- PASS: TestTarget/zsh (0.00s)",
            "FAIL",
            "FAIL\texample.com/cli\t0.015s",
        ]
    )
    text = _text(_printed(go, "go test ./...", error=True))
    assert "setup_test.go:649: got err=<nil>, want errUnsupported" in text
    assert "--- FAIL: TestTarget (0.00s)" in text and "FAIL example.com/cli 0.015s" in text
    assert "=== RUN" not in text and "--- PASS" not in text

    cargo = "\n".join(
        [
            "running 2 tests",
            "test tests::adds ... ok",
            "test tests::parses ... FAILED",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored",
        ]
    )
    text = _text(_printed(cargo, "cargo test", error=True))
    assert "test tests::parses ... FAILED" in text and "test result: FAILED. 1 passed" in text

    jest = "\n".join(
        [
            "FAIL src/app.test.js",
            "  \u2715 renders the list (5 ms)",
            "Tests:       1 failed, 4 passed, 5 total",
        ]
    )
    text = _text(_printed(jest, "npx jest", error=True))
    assert "\u2715 renders the list" in text and "Tests: 1 failed, 4 passed, 5 total" in text

    passing = "\n".join(
        [
            "Running ExUnit with seed: 1",
            ".........",
            "Finished in 1.5 seconds",
            "14 doctests, 65 tests, 0 failures",
        ]
    )
    assert "14 doctests, 65 tests, 0 failures" in _text(_printed(passing, "mix test"))


def test_a_commit_keeps_its_branch_hash_and_subject_line() -> None:
    output = "\n".join(
        [
            "[main abc1234] Fix the parser's off-by-one",
            " 2 files changed, 10 insertions(+), 3 deletions(-)",
        ]
    )
    lines = _printed(output, 'git commit -m "Fix the parser\'s off-by-one"')
    assert lines[0] == "  → [main abc1234] Fix the parser's off-by-one"
    assert "2 files changed, 10 insertions(+), 3 deletions(-)" in lines[1]
    shown = "\n".join(
        [
            "commit 4dfa520b139caba4155d001ead243d2b93d92802",
            "Author: A <a@b.c>",
            "Date:   Mon Feb 9",
            "",
            "    Fish auto-install support",
            "",
            " x.go | 7 ++++++-",
        ]
    )
    assert "4dfa520b Fish auto-install support" in _text(_printed(shown, "git show 4dfa520 --stat"))


def test_linter_lines_count_even_when_the_call_is_not_flagged_failed() -> None:
    output = "main.go:12:3: undefined: fooBar\nmain.go:20:1: missing return\n2 issues."
    text = _text(_printed(output, "golangci-lint run ./..."))
    assert "main.go:12:3: undefined: fooBar" in text and "2 issues." in text
    ran = "[lint] $ golangci-lint run ./...\n0 issues."
    assert _printed(ran, "mise run lint") == ["  → ran golangci-lint run ./...", "  → 0 issues."]


def test_package_managers_migrations_and_a_pull_request_url() -> None:
    npm = "\n".join(
        [
            "npm warn deprecated x@1",
            "added 203 packages, and audited 204 packages in 10s",
            "42 packages are looking for funding",
            "  run `npm fund` for details",
            "found 0 vulnerabilities",
        ]
    )
    text = _text(_printed(npm, "npm install"))
    assert "added 203 packages" in text and "npm warn" not in text
    pip = "\n".join(
        [
            "Collecting requests",
            "  Downloading requests-2.31.0.whl",
            "Installing collected packages: requests",
            "Successfully installed requests-2.31.0 urllib3-2.2.1",
        ]
    )
    assert "Successfully installed requests-2.31.0 urllib3-2.2.1" in _text(
        _printed(pip, "pip install requests")
    )
    django = "\n".join(
        [
            "Operations to perform:",
            "  Apply all migrations: app",
            "Running migrations:",
            "  Applying app.0002_add_state... OK",
            "  Applying app.0003_rename... OK",
        ]
    )
    assert "Applying app.0002_add_state... OK" in _text(
        _printed(django, "python manage.py migrate")
    )
    gh = "\nCreating pull request for feature into main in o/r\n\nhttps://github.com/o/r/pull/42\n"
    assert "https://github.com/o/r/pull/42" in _text(_printed(gh, "gh pr create --fill"))


def test_a_short_result_is_kept_whole_and_file_contents_never() -> None:
    assert _printed("Repo: o/r, PR: #174, Author: k", "gh pr view --json number") == [
        "  → Repo: o/r, PR: #174, Author: k"
    ]
    read = ToolUseBlock("t1", "Read", {"file_path": "/p/settings.json"})
    content = ToolResultBlock("t1", (TextBlock('1→{"telemetry": false}'),))
    assert printed_lines(read, content, lambda t: t) == []  # a file's content is not output
    failed = ToolResultBlock("t1", (TextBlock("File does not exist."),), is_error=True)
    assert printed_lines(read, failed, lambda t: t) == ["  error: File does not exist."]
    glob = ToolUseBlock("t2", "Glob", {"pattern": "**/ide_tags*.go"})
    found = ToolResultBlock(
        "t2", (TextBlock("cli/textutil/ide_tags.go\ncli/textutil/ide_tags_test.go"),)
    )
    assert printed_lines(glob, found, lambda t: t) == [
        "  → cli/textutil/ide_tags.go",
        "  → cli/textutil/ide_tags_test.go",
    ]


def test_noise_terminal_escapes_and_rejections() -> None:
    coloured = "\x1b[32m✓\x1b[0m built in 2s\r\x1b[2Kdone: 3 files"
    assert _printed(coloured, "make") == ["  → done: 3 files"]
    listing = "\n".join(
        [
            "total 8",
            "drwxr-xr-x 2 me staff 64 Sep 3 09:54 .",
            "-rw-r--r-- 1 me staff 10 Sep 3 09:54 a.txt",
        ]
    )
    assert _printed(listing, "ls -la") == []
    rejected = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected. "
        "To tell you how to proceed, the user said:\ndon't check this in"
    )
    lines = _printed(rejected, "git commit -am wip", error=True)
    assert lines == ["  error: The user doesn't want to proceed with this tool use."]  # words: said
    assert _printed("x\n" * 50 + "y", "cat big.txt") == []  # nothing salient: nothing kept


def test_every_line_is_clipped_and_a_call_keeps_a_few() -> None:
    output = "\n".join(f"pkg/file{n}.go:{n}:1: {'x' * 300}" for n in range(1, 20))
    lines = _printed(output, "go vet ./...", error=True)
    assert 0 < len(lines) <= MAX_LINES
    assert all(len(line) <= len("  error: ") + LINE_CHARS for line in lines)


# -- in units -----------------------------------------------------------------------------------
def _result(cc: CC, tool_id: str, output: str, *, error: bool = False) -> None:
    cc.user([{"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}])


def test_results_are_matched_to_their_calls_and_stay_under_the_cap(tmp_path: Path) -> None:
    cc = CC()
    cc.user("please fix the parser and commit")
    message = (
        "Fix the parser\n\n"
        + "Explains the change at length. " * 40
        + "\n\nCo-Authored-By: A <a@b.c>"
    )
    cc.assistant(
        [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}},
            {
                "type": "tool_use",
                "id": "t2",
                "name": "Bash",
                "input": {"command": f"git commit -m \"$(cat <<'EOF'\n{message}\nEOF\n)\""},
            },
        ]
    )
    # Results in the other order: matched by tool_use_id, not by position.
    _result(cc, "t2", "[main abc1234] Fix the parser\n 1 file changed, 2 insertions(+)")
    _result(
        cc, "t1", "FAILED tests/test_p.py::test_a - KeyError: 'x'\n1 failed, 2 passed", error=True
    )
    cc.assistant("Committed as abc1234.")
    messages = read_transcript(str(cc.write(tmp_path / "s.jsonl"))).messages
    options = UnitOptions(max_tokens=64)
    units, segs = build_units(messages, options)
    activity = [u for u in units if u.kind == "activity"]
    text = "\n".join(u.text for u in activity)
    pytest_at = text.index("Bash: pytest -q")
    assert text.index("error: FAILED tests/test_p.py::test_a", pytest_at) > pytest_at
    assert text.index("[main abc1234] Fix the parser") > text.index("Bash: git commit")
    assert "Co-Authored-By" not in text
    assert "Explains the change at length." in text  # the message, not cut at 240 characters
    # Bounded though: this one is cut at STATED_CHARS characters.
    assert len(message) > STATED_CHARS
    assert 0 < text.count("Explains the change at length.") <= STATED_CHARS // 31 + 1 < 40
    assert all(count_text(u.text) <= 64 for u in activity)
    # The results' records are in the units' spans.
    last_result = messages[3].source.line
    assert last_result is not None
    assert any(
        u.first_line is not None
        and u.last_line is not None
        and u.first_line <= last_result <= u.last_line
        for u in activity
    )
    keys = set(unit_keys(messages, segs, units, options))
    assert all(("activity", u.key) in keys for u in activity)


def test_a_secret_in_tool_output_is_redacted_in_the_activity_unit(tmp_path: Path) -> None:
    cc = CC()
    cc.user("why does the migration fail?")
    cc.tool_use("t1", command="psql -c 'select 1'")
    _result(
        cc,
        "t1",
        "Exit code 2\nerror: connection to postgres://app:hunter2secret@db.internal/app failed",
        error=True,
    )
    cc.assistant("The database refused the connection.")
    path = cc.write(tmp_path / "s.jsonl")
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    report = bank.retain_file(path, "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert "hunter2secret" not in texts
    assert "[REDACTED:url-password]@db.internal" in texts
    assert report.redactions >= 1
    (activity,) = [m for m in bank.memories("proj") if m.kind == "activity"]
    assert "error: error: connection to postgres://app:[REDACTED" in activity.text


def test_a_short_turn_gets_activity_units_only_when_a_call_printed_something(
    tmp_path: Path,
) -> None:
    cc = CC()
    cc.user("what does the parser module do?")
    cc.tool_use("t1", name="Read", file_path="/home/dev/project/src/parser.py")
    cc.tool_result("t1", "1→def parse(): ...")
    cc.assistant("It parses.")
    cc.user("and do the tests pass?")
    cc.tool_use("t2", command="pytest -q")
    cc.tool_result("t2", "....\n4 passed in 0.10s")
    cc.assistant("Yes, all four.")
    messages = read_transcript(str(cc.write(tmp_path / "s.jsonl"))).messages
    units, _segs = build_units(messages)
    activity = [u for u in units if u.kind == "activity"]
    assert [u.text for u in activity] == ["activity:\nBash: pytest -q\n  → 4 passed in 0.10s"]
    # Paths under the session's working directory are relative to it; windows skip activity.
    assert any("actions: Read: src/parser.py" in u.text for u in units)
    assert all(u.kind != "window" or "activity:" not in u.text for u in units)


def test_activity_hides_no_statement_in_recall(tmp_path: Path) -> None:
    cc = CC()
    cc.user("commit the design doc")
    cc.tool_use("t1", command="git add docs/design.md && git commit -m 'docs: design'")
    cc.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": "The user doesn't want to proceed with this tool use. The tool use "
                "was rejected. To tell you how to proceed, the user said:\nkeep the design "
                "document out of the repository",
                "is_error": True,
            }
        ]
    )
    cc.assistant("Understood, the design document stays out of git.")
    path = cc.write(tmp_path / "s.jsonl")
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    bank.retain_file(path, "proj")
    kinds = {m.kind for m in bank.memories("proj")}
    assert "activity" in kinds
    result = bank.recall("what did I say about committing the design document?", "proj")
    texts = [hit.text for hit in result.hits]
    assert any("keep the design document out of the repository" in t for t in texts)
    assert any(hit.memory.kind == "activity" for hit in result.hits)


# -- real sessions ------------------------------------------------------------------------------
@needs_shared
def test_what_a_real_session_printed_is_in_its_activity_units() -> None:
    messages = read_transcript(str(CLAUDE_CODE / "spotter-258c7280.jsonl")).messages
    options = UnitOptions()
    units, segs = build_units(messages, options)
    activity = [u for u in units if u.kind == "activity"]
    text = "\n".join(u.text for u in activity)
    assert (
        "→ [spotter-gqc 05fd186] feat: close review session by closing all open annotations" in text
    )
    assert "→ 14 doctests, 65 tests, 0 failures" in text
    assert "error: fatal: The current branch spotter-gqc has no upstream branch." in text
    assert "→ remote: https://github.com/marot/spotter/pull/new/spotter-gqc" in text
    assert options.max_tokens is not None
    assert all(count_text(u.text) <= options.max_tokens for u in activity)
    keys = set(unit_keys(messages, segs, units, options))
    assert all((u.kind, u.key) in keys for u in units if u.kind != "window")


@needs_entire
def test_a_go_sessions_failures_lint_and_commit_are_kept() -> None:
    messages = read_transcript(str(LINT_AND_COMMIT)).messages
    units, _segs = build_units(messages)
    text = "\n".join(u.text for u in units if u.kind == "activity")
    assert "error: setup_test.go:649: got err=<nil>, want errUnsupportedShell" in text
    assert "error: 4 issues:" in text
    assert "error: Unknown skill: commit" in text
    assert "→ [completion-stanza-manager 74284c9] Add versioned stanza manager" in text
    assert "Edit: cmd/entire/cli/setup.go" in text  # relative to the session's directory


@needs_shared
def test_re_retaining_a_bank_neither_loses_nor_duplicates_activity(tmp_path: Path) -> None:
    path = CLAUDE_CODE / "spotter-258c7280.jsonl"
    store = open_store(tmp_path / "lamina.db")
    older = UnitOptions(activity=False)
    from lamina.bank.retain import RetainOptions

    MemoryBank(store, HashEmbedder(), retain_options=RetainOptions(units=older)).retain_file(
        path, "p"
    )
    bank = MemoryBank(store, HashEmbedder())
    assert bank.retain_file(path, "p").status == "reread"
    assert bank.retain_file(path, "p").status == "unchanged"
    kept = {m.id: m.text for m in bank.memories("p")}
    fresh = MemoryBank(open_store(tmp_path / "fresh.db"), HashEmbedder())
    fresh.retain_file(path, "p")
    assert kept == {m.id: m.text for m in fresh.memories("p")}
    messages = read_transcript(str(path)).messages
    assert len(segments(messages)) > 1
