"""Secrets never enter the bank: API keys, tokens, passwords in URLs and private keys are
replaced by `[REDACTED:<kind>]` before anything is stored or embedded.

The patterns are deliberately specific (known key prefixes, `key = value` assignments with
secret-sounding names, PEM blocks), so ordinary text is left alone. Add patterns with
`Redactor(extra=...)`, or turn redaction off with `Redactor(enabled=False)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["DEFAULT_PATTERNS", "Redactor"]

DEFAULT_PATTERNS: Mapping[str, str] = {
    "private_key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ),
    "anthropic_key": r"\bsk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    "stripe_key": r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_\-]{35}\b",
    "jwt": r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
    "bearer_token": r"(?i)(?<=\bbearer )[A-Za-z0-9_\-\.=]{20,}",
    "url_password": r"(?<=://)[^\s:/@]+:[^\s@/]+(?=@)",
    "assigned_secret": (
        r"(?i)(?<![A-Za-z0-9])(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token"
        r"|password|passwd|client[_-]?secret)\s*[:=]\s*[\"']?(?!\[REDACTED)(?P<value>[^\s\"',;]{8,})"
    ),
}


@dataclass
class Redactor:
    enabled: bool = True
    extra: Mapping[str, str] = field(default_factory=dict)
    _compiled: list[tuple[str, re.Pattern[str]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        patterns = {**DEFAULT_PATTERNS, **self.extra}
        self._compiled = [(name, re.compile(p)) for name, p in patterns.items()]

    def redact(self, text: str) -> tuple[str, int]:
        """The text with secrets replaced, and how many were replaced."""
        if not self.enabled or not text:
            return text, 0
        count = 0
        for name, pattern in self._compiled:

            def replace(
                match: re.Match[str], name: str = name, pattern: re.Pattern[str] = pattern
            ) -> str:
                nonlocal count
                count += 1
                if "value" in pattern.groupindex and match.group("value"):
                    start = match.start("value") - match.start()
                    return f"{match.group(0)[:start]}[REDACTED:{name}]"
                return f"[REDACTED:{name}]"

            text = pattern.sub(replace, text)
        return text, count
