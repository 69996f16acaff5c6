"""One memory across agents, Codex -> Claude Code, with both real CLIs offline: a fact said in a
`codex exec` session, retained by Lamina's Codex hooks, is recalled in the next `claude -p`
session, whose request to the model carries exactly one memory block holding it (the other
way, Claude Code -> Codex, Gemini and Copilot, is in each of their end-to-end tests).

Both CLIs come from the environment as in tests/test_codex_e2e.py and
tests/test_claude_code_e2e.py (.ci/run installs the pinned versions; LAMINA_REQUIRE_CODEX /
LAMINA_REQUIRE_CLAUDE make a missing one fail instead of skip).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .fake_anthropic import ScriptedAPI
from .fake_anthropic import last_user_text as claude_user_text
from .fake_openai import ScriptedResponses
from .test_claude_code_e2e import claude  # noqa: F401  (the fixture)
from .test_codex_e2e import BLOCK, FACT, Machine, codex, requests_for  # noqa: F401
from .test_codex_e2e import script as codex_script

FIRST_PROMPT = f"Please remember this for later: {FACT}."
CLAUDE_PROMPT = "Which name does the staging database have, and where does it run?"


def claude_script(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    if CLAUDE_PROMPT in claude_user_text(body):
        answer = "heron-7" if "heron-7" in json.dumps(body.get("messages")) else "unknown"
        return [{"type": "text", "text": answer}]
    return [{"type": "text", "text": "Noted."}]


def test_a_codex_session_is_recalled_in_claude_code(
    codex: str,  # noqa: F811
    claude: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with ScriptedResponses(codex_script) as openai, ScriptedAPI(claude_script) as anthropic:
        machine = Machine(tmp_path, codex, openai)
        claude_env = {
            "CLAUDE_CONFIG_DIR": str(machine.home / ".claude"),
            "ANTHROPIC_BASE_URL": anthropic.url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        machine.env.update(claude_env)
        installed = machine.lamina("install", "codex", "--trust", "--codex", codex, "--json")
        assert installed.returncode == 0 and json.loads(installed.stdout)["trusted"], installed
        assert machine.lamina("install", "claude-code", "--user").returncode == 0

        first = machine.ask(FIRST_PROMPT)
        (request,) = requests_for(openai, FIRST_PROMPT)
        assert BLOCK not in json.dumps(request.get("input"))
        machine.wait_for_document(first)

        ran = subprocess.run(
            ["timeout", "-k", "5", "180", claude, "-p", CLAUDE_PROMPT, "--output-format", "json"],
            capture_output=True, text=True, env=machine.env, cwd=machine.project,
            stdin=subprocess.DEVNULL, timeout=210,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-2000:] or ran.stdout[-2000:]
        asked = [r for r in anthropic.requests if CLAUDE_PROMPT in json.dumps(r.get("messages"))]
        sent = json.dumps(asked[0]["messages"])
        assert sent.count(BLOCK) == 1, sent[:4000]
        block = sent[sent.index(BLOCK) : sent.index("</lamina_memories>")]
        assert "heron-7" in block and "Frankfurt" in block
        assert json.loads(ran.stdout.strip().splitlines()[-1])["result"] == "heron-7"
        log = (machine.lamina_home / "logs" / "hooks.log").read_text()
        assert "failed" not in log, log[-3000:]
