"""No secret is stored: a broad synthetic corpus of fake secrets, said by the user, by the
assistant, in tool calls and in tool results, retained into SQLite and PostgreSQL banks,
appended to context logs, compiled with `lamina compile --bank` and exported. Placeholders are
not secrets. Figures: `stored` must stay 0 of len(CORPUS)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lamina.bank.bank import MemoryBank
from lamina.bank.retain import RetainOptions
from lamina.bank.transfer import export_bank
from lamina.embed import HashEmbedder
from lamina.store import open_store
from lamina.text.redact import Redactor, redact_message

from ..conftest import CC
from .secrets_corpus import CODE_LINES, CORPUS, PLACEHOLDERS, secret_of
from .servers import lamina

SECRETS = [(kind, text, secret_of(kind, text, secret)) for kind, text, secret in CORPUS]


def test_the_corpus_is_broad_and_every_secret_is_in_its_text() -> None:
    assert len(SECRETS) >= 100
    for kind, text, secret in SECRETS:
        assert len(secret) >= 6 and secret in text, kind
    kinds = {kind for kind, _text, _secret in SECRETS}
    missed_before = {"azure_sas", "password_flag_quoted", "discord_bot", "docker_pat", "doppler",
                     "google_oauth_secret", "notion", "vault", "basic_header", "fcm",
                     "sentry_dsn", "putty", "sshpass"}  # fmt: skip
    assert missed_before <= kinds
    for mark in [".", ",", ")", ":", "!", "?", "]", ">"]:
        assert {f"{k}_then_{mark}" for k in ("sendgrid", "huggingface", "npm", "vault")} <= kinds
    assert len(CODE_LINES) >= 34


def transcript(path: Path) -> Path:
    """Each secret four ways: in a prompt, a reply, a Bash command and a tool's output."""
    cc = CC()
    for n, (kind, text, _secret) in enumerate(SECRETS):
        cc.user(f"Step {n} ({kind}): I put this in the config:\n{text}")
        cc.assistant(f"Noted, I will use:\n{text}")
        cc.tool_use(f"t{n}", command=f"echo '{text}' >> .env")
        cc.tool_result(f"t{n}", output=text)
        cc.assistant("Done.")
    return cc.write(path)


def stored_secrets(blob: str) -> list[str]:
    return [kind for kind, _text, secret in SECRETS if secret in blob]


def test_no_secret_of_the_corpus_is_stored_by_retain(database: str, tmp_path: Path) -> None:
    bank = MemoryBank(open_store(database), HashEmbedder())
    report = bank.retain_file(transcript(tmp_path / "s.jsonl"), "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert stored_secrets(texts) == [], f"stored {len(stored_secrets(texts))} of {len(SECRETS)}"
    assert report.redactions >= len(SECRETS)
    assert "REDACTED" in texts


def test_placeholders_are_kept_and_count_no_redaction(tmp_path: Path) -> None:
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    cc = CC()
    for text in PLACEHOLDERS:
        cc.user(f"The docs say: {text}")
        cc.assistant("Understood.")
    report = bank.retain_file(cc.write(tmp_path / "p.jsonl"), "proj")
    assert report.redactions == 0
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert all(text in texts for text in PLACEHOLDERS)


def test_no_secret_is_in_the_database_files(tmp_path: Path) -> None:
    """Not in the memories' text only: not in the lexical index's terms, the entities, the
    WAL or any other page of the files the bank writes."""
    home = tmp_path / "home"
    home.mkdir()
    store = open_store(home / "lamina.db")
    bank = MemoryBank(store, HashEmbedder())
    bank.retain_file(transcript(tmp_path / "s.jsonl"), "proj")
    files = [path for path in home.rglob("*") if path.is_file()]
    assert any(path.name.endswith("-wal") for path in files)
    blob = b"".join(path.read_bytes() for path in files).decode("utf-8", "replace")
    assert "REDACTED" in blob
    assert stored_secrets(blob) == [], f"stored {len(stored_secrets(blob))} of {len(SECRETS)}"


def test_ordinary_code_is_stored_as_written(tmp_path: Path) -> None:
    """Code that names a secret without holding one (`token_count = len(tokens)`,
    `let apiKey = config.apiKey;`, `password: ${DB_PASSWORD}`) is not redacted."""
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    cc = CC()
    for n, line in enumerate(CODE_LINES):
        cc.user(f"Step {n}: what does this line do?\n{line}")
        cc.assistant(f"It reads:\n{line}")
    report = bank.retain_file(cc.write(tmp_path / "c.jsonl"), "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    changed = [line for line in CODE_LINES if line not in texts]
    assert changed == [], f"{len(changed)} of {len(CODE_LINES)} code lines changed"
    assert report.redactions == 0


def test_a_secret_is_redacted_before_the_cap_cuts_it(tmp_path: Path) -> None:
    """A private key in an overlong turn: the cap keeps the beginning and the end, and used
    to keep the key's body when its END line fell in the cut."""
    key_kind, key_text, key_body = next(s for s in SECRETS if s[0] == "rsa_private")
    bank = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    cc = CC()
    cc.user("filler " * 300 + "\n" + key_text + "\n" + "tail " * 2000)
    cc.assistant("ok")
    bank.retain_file(cc.write(tmp_path / "k.jsonl"), "proj")
    texts = "\n".join(m.text for m in bank.memories("proj"))
    assert "[…]" in texts  # capped
    assert key_body not in texts, key_kind
    assert not any(line in texts for line in key_text.splitlines()[1:-1])


def test_context_logs_and_exports_keep_no_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = transcript(tmp_path / "s.jsonl")
    out = lamina(home, "compile", str(path), "--budget", "8000", "--bank", "proj", "--json")
    assert out.returncode == 0, out.stderr
    store = open_store(home / "lamina.db")
    (log,) = store.list_logs("proj")
    messages = store.read_log("proj", log.id if hasattr(log, "id") else str(log))
    blob = "\n".join(repr(m) for m in messages)
    assert len(messages) >= len(SECRETS) * 4
    assert stored_secrets(blob) == [], f"stored {len(stored_secrets(blob))} of {len(SECRETS)}"
    summaries = store.load_summaries("proj", log.id if hasattr(log, "id") else str(log))
    assert stored_secrets("\n".join(s.text for s in summaries)) == []
    assert lamina(home, "retain", str(path), "--bank", "proj").returncode == 0
    exported = lamina(home, "export", "--bank", "proj", "-o", str(tmp_path / "out.jsonl"))
    assert exported.returncode == 0, exported.stderr
    assert stored_secrets((tmp_path / "out.jsonl").read_text()) == []


def test_http_log_endpoint_keeps_no_secret(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lamina.integrations.http import create_app

    memory = MemoryBank(open_store(tmp_path / "lamina.db"), HashEmbedder())
    app = create_app(memory=memory)
    token = {"Authorization": f"Bearer {app.state.gate.token}"}
    client = TestClient(app, base_url="http://127.0.0.1", headers=token)
    said: list[dict[str, Any]] = []
    for _kind, text, _secret in SECRETS:
        said += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    answer = client.post("/v1/banks/proj/logs/chat/messages", json={"messages": said})
    assert answer.status_code == 200, answer.text
    blob = "\n".join(repr(m) for m in memory.store.read_log("proj", "chat"))
    assert stored_secrets(blob) == []
    metadata = {"deploy": {"env": SECRETS[12][1], "note": SECRETS[15][1]}}
    retained = client.post(
        "/v1/banks/proj/retain", json={"document": "d", "messages": said, "metadata": metadata}
    )
    assert retained.status_code == 200
    assert stored_secrets(json.dumps([m.text for m in memory.memories("proj")])) == []
    (document,) = memory.documents("proj")
    assert stored_secrets(json.dumps(dict(document.metadata))) == []
    assert "REDACTED" in json.dumps(dict(document.metadata))


def test_export_redacts_memories_kept_before_redaction(tmp_path: Path) -> None:
    store = open_store(tmp_path / "lamina.db")
    plain = MemoryBank(store, HashEmbedder(),
                       retain_options=RetainOptions(redactor=Redactor(enabled=False)))  # fmt: skip
    plain.retain_file(transcript(tmp_path / "s.jsonl"), "old")
    assert stored_secrets("\n".join(m.text for m in plain.memories("old")))
    exported = b"".join(export_bank(store, "old", with_embeddings=False)).decode()
    assert stored_secrets(exported) == []


def test_redact_message_walks_any_depth() -> None:
    from lamina.messages import Kind, Message, Role, ToolUseBlock

    secret = SECRETS[1][2]
    deep: Any = {"password": secret}
    for _ in range(5000):
        deep = {"x": [deep]}
    message = Message(id="m", role=Role.ASSISTANT, kind=Kind.REPLY,
                      blocks=(ToolUseBlock("t", "Bash", deep),))  # fmt: skip
    clean, count = redact_message(message, Redactor())
    assert count == 1
    node = clean.blocks[0].input  # type: ignore[union-attr]
    for _ in range(5000):
        node = node["x"][0]
    assert node == {"password": "[REDACTED:assigned-secret]"} or secret not in str(node)


def test_every_bundled_rule_compiles() -> None:
    # Rules compile on first use (a short text runs few of them); one Python cannot compile
    # would silently match nothing, so the bundled set is checked whole here.
    import re
    import warnings

    from lamina.text.redact import gitleaks_rules

    rules, shared = gitleaks_rules()
    patterns = [p for rule in (*rules, *shared) for p in (rule.regex, *(a for a, _t in rule.allow))]
    assert len(rules) > 200
    for pattern in patterns:
        source = getattr(pattern, "source", None)
        if source is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # RE2 classes like [[...]
                re.compile(source)
