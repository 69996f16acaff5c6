"""What tools printed: the few lines of a tool call's result that a question would look for.

A tool result is mostly noise to a later question (file contents, progress, passing tests),
but a few of its lines are often the only record of what happened: the line that says what
broke, a test run's counts, the `[branch hash] subject` of a commit, the URL of a pull request.
`printed_lines` picks them by rules that hold for any project, looking at the shape of a line,
never at a project's words:

- **commits**: git's `[branch shorthash] subject` line;
- **failures**: a line naming an error or exception type (`ModuleNotFoundError: ...`,
  `error: ...`, `fatal: ...`, `panic: ...`, `npm ERR!`, `error TS2307`, `CONFLICT (...)`) or a
  failing test (`--- FAIL: TestX`, `FAILED tests/x.py::test_y`, `✕ renders`, `1) test ...`,
  `test a::b ... FAILED`);
- **summaries**: counts of tests, failures, issues, problems, errors or warnings (pytest's
  `3 failed, 10 passed`, cargo's `test result:`, jest's `Tests:`, ExUnit's `5 tests, 1
  failure`, golangci-lint's `4 issues:`), go test's `ok`/`FAIL` package lines, git's `N files
  changed`, a package manager's `added N packages` / `Successfully installed ...` /
  `go: added x v1.2.3`, a migration's `Applying ... OK` / `Running upgrade a -> b`;
- **diagnostics**: `file.go:12:3: message`, `file.ts(6,33): error ...` and `setup_test.go:649:
  got ...` lines, whether or not the call was flagged as failed;
- **git**: `git log --oneline` lines, a `git show`'s commit and subject, a push's `old..new
  branch -> branch`, a merge's `Updated N paths`;
- **links**: a URL printed by a command (`gh pr create`, a push's "create a pull request" link);
- **what a task runner ran**: an echoed `[task] $ command` or `$ command` that is not the
  command called (`mise run test` runs `go test -race ./...`);
- **short results**: a result of one to three lines is kept whole (`Repo: x, PR: #174`);
- a search tool's (Grep, Glob) first matches.

The echoed command, `Exit code N`, `=== RUN`/`--- PASS` lines, log-timestamped chatter and
lines of only carets or box drawing are never chosen. A failed call always keeps one line:
the first informative one, else its first line. File tools (Read, Write, Edit) print the file
or a confirmation, so only their errors count; tools that talk at length (a subagent's report,
a web page's summary, plan mode) are left to what people said. The user's words in a rejected
call are what was said (lamina.text.said), not output.

Bounded per call: at most `MAX_LINES` lines, each cut to `LINE_CHARS` characters. The result
text is redacted whole before any line is chosen or cut (a secret is never split where the
redactor would no longer see it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from ..messages import ToolResultBlock, ToolUseBlock
from ..turns import DEFAULT_RULES, TurnRules, clean_text

__all__ = ["LINE_CHARS", "MAX_LINES", "printed_lines"]

MAX_LINES = 4
"""Lines kept from one call's result."""
LINE_CHARS = 160
"""Characters kept of each line."""

Redact = Callable[[str], str]

FILE_TOOLS = frozenset(
    {
        # Claude Code
        *("Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead"),
        # Codex, Gemini CLI, Copilot CLI
        *("apply_patch", "read_file", "read_many_files", "write_file", "replace"),
        *("view", "edit", "create", "str_replace_editor"),
    }
)
"""Tools whose result is a file's content or a confirmation: only their errors are kept."""


def tool_command(data: Mapping[str, object]) -> str | None:
    """The shell command a tool call ran: Claude Code's `command`, Codex's `command` as an
    argument list (`["bash", "-lc", "make test"]` is `make test`) or its `cmd`."""
    command = data.get("command", data.get("cmd"))
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        shell = len(command) == 3 and command[1] in ("-c", "-lc") and command[0].endswith("sh")
        return str(command[2]) if shell else " ".join(str(a) for a in command)
    return command if isinstance(command, str) else None


SEARCH_TOOLS = frozenset({"Grep", "Glob", "LS"})
"""Tools whose result is a list of matches: the first few are kept."""
TALKING_TOOLS = frozenset(
    {
        "Task",
        "Agent",
        "WebFetch",
        "WebSearch",
        "EnterPlanMode",
        "ExitPlanMode",
        "Skill",
        "SlashCommand",
        "AskUserQuestion",
        "TaskCreate",
        "TaskUpdate",
        "TaskList",
        "TaskGet",
    }
)
"""Tools whose result is prose or boilerplate (a subagent's report, a page's summary, an
approval): only their errors are kept."""

_REJECTED = "The user doesn't want to proceed with this tool use."
"""A call the user turned down: this sentence is kept; the words they added are what they
said (lamina.text.said), not output."""
_SKIP_RESULTS = ("[Request interrupted", "<tool_use_error>Sibling tool call errored")

# -- the kinds of line, most informative first ---------------------------------------------------
_COMMIT = re.compile(r"^\[[^\]\n]{1,200}?\b[0-9a-f]{7,40}\] \S")
_FAILED_TEST = re.compile(
    r"^\s*(?:--- FAIL: \S"  # go
    r"|FAIL(?:ED)?\s+\S+::\S"  # pytest
    r"|FAIL\s+\S+(?:\s|$)"  # go package, jest file
    r"|[\u2715\u2717\u00d7] \S"  # jest, vitest: a cross before the test's name
    r"|\u25cf \S.* \u203a \S"  # jest: a bullet, then suite > test
    r"|\d+\) test \S"  # ExUnit
    r"|test \S+ \.\.\. FAILED"  # cargo
    r")"
)
_ERROR = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b(?!\w)"  # ModuleNotFoundError, TypeError, IOException
    r"|^\s*(?:\*\* )?\(?(?:error|fatal|panic|ERROR|FATAL|Error|Fatal)\b"
    r"|\berror(?:\[\w+\]| TS\d+)?:"
    r"|npm ERR!|✘|\bCONFLICT \("
    r"|\b(?:[Nn]o such file or directory|[Pp]ermission denied|command not found|not found"
    r"|[Cc]annot find|[Cc]ould not|[Uu]nable to|undefined:|failed)\b"
)
_COUNTS = (
    r"tests?|passed|failed|failures?|errors?|issues?|problems?|warnings?|skipped|"
    r"xfailed|xpassed|deselected|todo|pending|vulnerabilit(?:y|ies)"
)
_SUMMARY = re.compile(
    rf"(?i)\b\d+ (?:{_COUNTS})\b"
    r"|^test result: "
    r"|^\s*Tests?(?: Files| Suites)?:?\s+\d"
    r"|^(?:ok|FAIL)\s+\S+\s+(?:\d|\(cached\))"
    r"|\bno issues found\b|^All checks passed"
    r"|\b\d+ files? changed\b"
    r"|^(?:added|removed|changed|audited) \d+ packages?"
    r"|^(?:Successfully installed|Installed|Resolved|Prepared|Uninstalled) "
    r"|^go: (?:added|upgraded|downgraded|removed) "
    r"|^\s*Finished `?\w+"
    r"|^\s*Applying \S+\.\.\.|^\s*Running upgrade \S+ -> \S"
    r"|\b(?:[Mm]igrat(?:ed|ing|ions? applied)|[Nn]o migrations)\b"
)
_DIAGNOSTIC = re.compile(
    r"[\w./~@-]*\w\.[A-Za-z]\w{0,7}(?::\d+(?::\d+)?:|\(\d+,\d+\):)"  # a.go:12:3: / a.ts(6,33):
    r'|File "[^"]+", line \d+'
)
_GIT = re.compile(
    r"^[0-9a-f]{7,40} \S"  # git log --oneline
    r"|^\s*(?:[0-9a-f]{7,40}\.\.\.?[0-9a-f]{7,40}|\* \[new (?:branch|tag)\])\s+\S+ -> \S"
    r"|^Updated \d+ paths?\b|^Fast-forward$|^Merge made by|^Switched to (?:a new )?branch"
)
_URL = re.compile(r"https?://\S+/(?:pulls?|merge_requests|issues|pull/new)/\S*\w")
"""A link to a pull request, a merge request or an issue (what `gh pr create` prints)."""
_ECHO = re.compile(r"^(?:\[[\w:./-]+\] )?\$ (?P<cmd>\S.*)")
_NOISE = re.compile(
    r"^\s*(?:exit code -?\d+\s*$"
    r"|=== (?:RUN|PAUSE|CONT|NAME)\b|--- (?:PASS|SKIP):|(?:PASS|FAIL|ok)\s*$"
    r"|npm (?:warn|notice)\b|\d{4}[/-]\d\d[/-]\d\d[ T]\d\d:\d\d"
    r"|[\W_]*$"  # carets, box drawing, separators
    r"|</?persisted-output>|Output too large|Preview \(first"
    r"|\[Showing results with pagination"
    r"|total \d+$|[-dlcbps][rwxsStT-]{9}[@+.]?\s"  # ls -l
    r"|Command running in background\b|\[Omitted long"
    r")",
    re.I,
)
_TAG = re.compile(r"</?tool_use_error>|\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
"""Wrappers and terminal escapes (colours, cursor moves) a result's lines are read without."""
_SHOW_COMMIT = re.compile(r"^commit ([0-9a-f]{7,40})\b")

_KINDS: tuple[tuple[str, re.Pattern[str], int, bool], ...] = (
    # (kind, pattern, most lines of this kind, take the last ones rather than the first)
    ("commit", _COMMIT, 1, False),
    ("failed", _FAILED_TEST, 3, False),
    ("error", _ERROR, 2, False),
    ("summary", _SUMMARY, 2, True),
    ("diagnostic", _DIAGNOSTIC, 3, False),
    ("git", _GIT, 3, False),
    ("url", _URL, 1, False),
)


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind_of(name: str, data: Mapping[str, object]) -> str:
    """`file`, `search`, `talk` or `command` (any other tool: a shell, an MCP server)."""
    if (
        name in FILE_TOOLS
        or "file_path" in data
        or "notebook_path" in data
        or ("absolute_path" in data)
    ):
        return "file"
    if name in SEARCH_TOOLS:
        return "search"
    if name in TALKING_TOOLS:
        return "talk"
    return "command"


def _raw_lines(text: str) -> list[str]:
    """The non-blank lines of a result as a terminal shows them: escapes and wrappers out,
    a line rewritten in place (`\r`, a progress bar) as it was left."""
    text = _TAG.sub("", text).replace("\r\n", "\n")
    lines = (ln.rstrip("\r").rsplit("\r", 1)[-1] for ln in text.split("\n"))
    return [ln for ln in lines if ln.strip()]


def _with_subjects(lines: Sequence[str], raw: Sequence[str]) -> list[str]:
    """`git show`/`git log` output: each `commit <hash>` line gets its subject (the first
    indented line after it), as `<short hash> <subject>`, so it reads as a log line."""
    out = list(lines)
    for i, line in enumerate(lines):
        found = _SHOW_COMMIT.match(line)
        if found is None:
            continue
        for j in range(i + 1, min(i + 6, len(raw))):
            if raw[j].startswith("    ") and raw[j].strip():
                out[i] = f"{found.group(1)[:8]} {lines[j]}"
                break
    return out


def _echoed(line: str, command: str) -> str:
    """The command a task runner echoed ("" if the line is no echo, or echoes the call)."""
    found = _ECHO.match(line)
    if found is None:
        return ""
    echoed = found.group("cmd").strip()
    return "" if not echoed or echoed in command else echoed


def _choose(lines: Sequence[str], command: str, failed: bool) -> list[int]:
    """The indexes of the lines worth keeping, in order."""
    candidates = [
        i for i, ln in enumerate(lines) if not _NOISE.match(ln) and not (command and ln == command)
    ]
    chosen: list[int] = []

    def take(indexes: Sequence[int], most: int) -> None:
        for i in indexes:
            if len(chosen) >= MAX_LINES or most <= 0:
                return
            if i not in chosen:
                chosen.append(i)
                most -= 1

    echoes = [i for i in candidates if _echoed(lines[i], command)]
    plain = [i for i in candidates if i not in echoes and not _ECHO.match(lines[i])]
    for kind, pattern, most, last in _KINDS:
        if kind == "error" and not failed:
            continue  # words like "failed" in a passing run's output are no failure
        found = [i for i in plain if pattern.search(lines[i])]
        take(found[::-1] if last else found, most)
    take(echoes, 1)
    if len(plain) <= 3:
        take(plain, 3)  # a short result is its own summary
    if failed and not chosen and (plain or candidates):
        take((plain or candidates)[:1], 1)
    return sorted(chosen)


_FOUND = re.compile(r"^Found \d+ (?:files?|matches)")
_MATCH = re.compile(r"^(?:\S*?:)?\d+:")
_CONTEXT = re.compile(r"^(?:\S*?-)?\d+-|^--$")


def _matches(lines: Sequence[str]) -> list[int]:
    """The first three matches a search printed: paths, or matching lines rather than the
    context lines around them."""
    found = [i for i, ln in enumerate(lines) if not _FOUND.match(ln) and not _NOISE.match(ln)]
    if any(_MATCH.match(lines[i]) for i in found):
        found = [i for i in found if not _CONTEXT.match(lines[i])]
    return found[:3]


def _chosen(text: str, command: str, kind: str, failed: bool) -> tuple[list[str], list[int]]:
    """A result's lines, and the indexes of those worth keeping."""
    raw = _raw_lines(text)
    lines = _with_subjects([" ".join(ln.split()) for ln in raw], raw)
    if kind == "search" and not failed:
        return lines, _matches(lines)
    return lines, _choose(lines, command, failed)


def printed_lines(
    call: ToolUseBlock,
    result: ToolResultBlock | None,
    redact: Redact,
    rules: TurnRules = DEFAULT_RULES,
) -> list[str]:
    """The lines of `result` (the result of `call`) worth remembering, each labelled
    (`error:` for a failed call, `→` otherwise, `→ ran` for a command a task runner echoed),
    at most `MAX_LINES`; [] when none. The text is redacted, then injected blocks (a system
    reminder, a memory block) are taken out, before any line is chosen."""
    if result is None:
        return []
    raw_text = result.text
    if not raw_text.strip() or raw_text.lstrip().startswith(_SKIP_RESULTS):
        return []
    if raw_text.lstrip().startswith(_REJECTED):
        return ["  error: " + _REJECTED]
    data = call.input if isinstance(call.input, Mapping) else {}
    kind = _kind_of(call.name, data)
    failed = result.is_error or bool(re.match(r"\s*Exit code [1-9]", raw_text))
    if kind in ("file", "talk") and not failed:
        return []
    command = tool_command(data)
    command_text = " ".join(redact(command).split()) if command is not None else ""
    lines, indexes = _chosen(clean_text(redact(raw_text), rules), command_text, kind, failed)
    label = "  error: " if failed else "  → "
    out: list[str] = []
    for i in indexes:
        echoed = _echoed(lines[i], command_text)
        line = "  → ran " + _clip(echoed) if echoed else label + _clip(lines[i])
        if line not in out:
            out.append(line)
    return out
