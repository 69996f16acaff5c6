"""Database targets in messages."""

from __future__ import annotations

from pathlib import Path

__all__ = ["describe_target"]


def describe_target(target: str | Path) -> str:
    """The target for messages, with any password hidden."""
    text = str(target)
    if "://" in text and "@" in text:
        scheme, rest = text.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        if ":" in credentials:
            credentials = credentials.split(":", 1)[0] + ":***"
        return f"{scheme}://{credentials}@{host}"
    return text
