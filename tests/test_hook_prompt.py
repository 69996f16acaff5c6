"""The prompt hook under its deadline: always exit 0, answer with what is ready, and say in the
hook log (and `lamina status`) where the time went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lamina.bank.bank import MemoryBank
from lamina.embed import HashEmbedder
from lamina.integrations.claude_code.prompt import PromptRequest, answer_prompt
from lamina.store.sqlite import SQLiteStore

from .conftest import EXAMPLE, needs_shared, shared_transcripts

pytestmark = pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/session.jsonl missing")

PROMPT = "which database did we choose, and why?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with the example session retained in bank `proj`."""
    base = tmp_path_factory.mktemp("prompt") / "home"
    bank = MemoryBank.open(base)
    bank.retain_file(EXAMPLE, "proj", document="example-session")
    bank.close()
    return base


def run_hook(
    home: Path, payload: dict[str, object], **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "proj", **env}
    environ.pop("LAMINA_HOOK_WARM", None)
    return subprocess.run(
        [sys.executable, "-m", "lamina", "hook"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def prompt_payload(cwd: Path, session: str = "another-session") -> dict[str, object]:
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": PROMPT,
            "cwd": str(cwd)}  # fmt: skip


def test_the_deadline_never_kills_the_process(home: Path, tmp_path: Path) -> None:
    # The deadline falls at every stage of the cold path: before the model is loaded, while
    # it runs, during the search, after. A thread still inside onnxruntime at interpreter
    # shutdown used to abort the process (SIGABRT, exit 134) in a few percent of such runs.
    limits = [round(0.3 + 2.7 * (i / 29) ** 2, 3) for i in range(30)]
    answered = 0
    for limit in limits:
        result = run_hook(home, prompt_payload(tmp_path), LAMINA_HOOK_TIME_LIMIT=str(limit))
        assert result.returncode == 0, (limit, result.returncode, result.stderr[-500:])
        assert result.stderr == "", (limit, result.stderr[-500:])
        if result.stdout:
            context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
            assert "INKWELL_DB_PATH" in context or "SQLite" in context
            answered += 1
    # With three seconds the example bank is always answered.
    assert answered >= 1


class StuckEmbedder:
    """An embedder whose model never finishes loading (until released)."""

    def __init__(self, inner: HashEmbedder) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.release.wait(30)
        return self.inner.embed_query(text)


@pytest.fixture()
def stuck(tmp_path: Path) -> Iterator[tuple[MemoryBank, StuckEmbedder]]:
    embedder = StuckEmbedder(HashEmbedder())
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), embedder)
    bank.retain_file(EXAMPLE, "proj", document="example-session")
    yield bank, embedder
    embedder.release.set()
    bank.close()


def test_a_model_not_ready_in_time_gives_lexical_memories(
    stuck: tuple[MemoryBank, StuckEmbedder],
) -> None:
    bank, embedder = stuck
    early: list[object] = []
    stages: dict[str, float] = {}
    request = PromptRequest(prompt="INKWELL_DB_PATH default", bank="proj", session="other")
    answer = answer_prompt(
        bank, request, stages, dense_until=time.monotonic() + 0.2, early=early.append
    )
    assert embedder.calls == 1 and not embedder.release.is_set()
    assert answer.lexical_only and answer.memories > 0
    assert "INKWELL_DB_PATH" in answer.context
    assert early == [answer]
    assert {"open_store", "query", "lexical", "embedding"} <= set(stages)


def test_a_model_ready_in_time_gives_the_full_answer(
    stuck: tuple[MemoryBank, StuckEmbedder],
) -> None:
    bank, embedder = stuck
    embedder.release.set()
    stages: dict[str, float] = {}
    request = PromptRequest(prompt="INKWELL_DB_PATH default", bank="proj", session="other")
    answer = answer_prompt(bank, request, stages, dense_until=time.monotonic() + 30)
    assert not answer.lexical_only and answer.memories > 0
    assert {"open_store", "query", "lexical", "embedding", "search"} <= set(stages)


def test_stage_timings_are_logged_and_shown_by_status(home: Path, tmp_path: Path) -> None:
    result = run_hook(home, prompt_payload(tmp_path), LAMINA_HOOK_TIME_LIMIT="30")
    assert result.returncode == 0 and "INKWELL_DB_PATH" in result.stdout
    log = (home / "logs" / "hooks.log").read_text()
    line = [x for x in log.splitlines() if "UserPromptSubmit" in x and "injected" in x][-1]
    timings = json.loads(line.split(" | timings ", 1)[1])
    assert timings["path"] == "cold" and timings["memories"] > 0
    assert timings["over_limit"] is False and timings["lexical_only"] is False
    assert {"start", "warm", "imports", "open_store", "query", "lexical", "embedding",
            "search"} <= set(timings["stages_ms"])  # fmt: skip
    assert timings["total_ms"] >= max(timings["stages_ms"].values())

    status = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "status", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    report = json.loads(status.stdout)
    assert report["prompt_timings"][-1]["stages_ms"] == timings["stages_ms"]
    assert report["warm_server"]["running"] is False
    human = subprocess.run(
        [sys.executable, "-m", "lamina", "--home", str(home), "status"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "cold path" in human.stdout and "embedding" in human.stdout


def test_over_the_limit_is_logged_as_such(home: Path, tmp_path: Path) -> None:
    result = run_hook(home, prompt_payload(tmp_path), LAMINA_HOOK_TIME_LIMIT="0.01")
    assert result.returncode == 0 and result.stdout == ""
    line = (home / "logs" / "hooks.log").read_text().splitlines()[-1]
    assert "over the 0.01s limit" in line
    assert json.loads(line.split(" | timings ", 1)[1])["over_limit"] is True


@needs_shared
def test_the_cold_path_answers_as_one_full_recall(tmp_path: Path) -> None:
    """The cold path recalls lexically first, then again with the dense channel, reusing what
    the first recall asked the store and the query's vector embedded in the background: its
    answers are those of a single full recall, over real transcripts, with prompts that reach
    the entity and time channels too."""
    from lamina.readers import read_transcript

    transcripts = shared_transcripts()[:3]
    embedder = StuckEmbedder(HashEmbedder())
    embedder.release.set()
    bank = MemoryBank(SQLiteStore(tmp_path / "lamina.db"), embedder)
    for path in transcripts:
        bank.retain_file(path, "proj")
    prompts = [PROMPT, "what did we change last week in the tests?", "INKWELL_DB_PATH default"]
    for message in read_transcript(str(transcripts[0])).messages[:200]:
        text = " ".join(str(getattr(b, "text", "") or "") for b in message.blocks).strip()
        if message.role.value == "user" and 20 < len(text) < 300 and len(prompts) < 10:
            prompts.append(text)
    searches: list[str] = []
    original = SQLiteStore.lexical_search

    def counting(self: SQLiteStore, *args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        searches.append("lexical")
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SQLiteStore, "lexical_search", counting)
        for i, prompt in enumerate(prompts):
            session = "other" if i % 2 else ""
            transcript = str(transcripts[1]) if i % 3 == 0 else ""
            request = PromptRequest(prompt=prompt, bank="proj", session=session,
                                    transcript=transcript)  # fmt: skip
            early: list[object] = []
            before = embedder.calls
            searches.clear()
            cold = answer_prompt(bank, request, {}, dense_until=time.monotonic() + 60,
                                 early=early.append)  # fmt: skip
            assert embedder.calls == before + 1  # embedded ahead, once
            searched_cold = len(searches)
            searches.clear()
            full = answer_prompt(bank, request, {})
            assert not cold.lexical_only and len(early) == 1
            assert (cold.ids, cold.memories) == (full.ids, full.memories), prompt
            assert cold.context.split("\n", 2)[2:] == full.context.split("\n", 2)[2:]
            # Two recalls, the lexical searches of one: the second reused the first's.
            assert searched_cold == len(searches) > 0, prompt
    bank.close()


def test_a_bank_of_the_earlier_default_model_is_searched_with_it(tmp_path: Path) -> None:
    """After an upgrade changed the default embedder, the cold path embeds a prompt with the
    model of the bank's vectors (the 3-layer one here), so the dense channel still finds
    memories by meaning: the same answer as with that model chosen explicitly."""
    from lamina.embed import L3_MODEL, get_embedder

    store = SQLiteStore(tmp_path / "lamina.db")
    earlier = MemoryBank(store, get_embedder("minilm-l3"))
    earlier.retain_file(EXAMPLE, "proj", document="example-session")
    request = PromptRequest(prompt="where do we keep the notes data?", bank="proj", session="x")
    chosen = answer_prompt(earlier, request, {}, dense_until=time.monotonic() + 60)
    assert any("dense" in h.channels for h in earlier.recall(request.prompt, "proj").hits)
    upgraded = MemoryBank(store)  # nothing configured, as after the upgrade
    assert upgraded.embedder_for("proj").name == L3_MODEL
    answer = answer_prompt(upgraded, request, {}, dense_until=time.monotonic() + 60)
    assert not answer.lexical_only and answer.memories > 0
    assert answer.ids == chosen.ids and answer.context == chosen.context
    store.close()
