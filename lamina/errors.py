"""Lamina's exceptions: one root, a small tree, structured fields.

    LaminaError                  anything Lamina raises on purpose
    ├── InputError               the caller gave something unusable
    │   ├── UnknownFormatError   no reader recognises a file (or the named format does not exist)
    │   ├── ReadError            a source cannot be read at all (missing, a directory, unreadable)
    │   └── NotFoundError        a named bank, document, log, pin, memory or operation is absent
    ├── AccessError              the credentials given do not allow this (HTTP, MCP)
    ├── ConfigError              a setting is missing or contradictory
    └── StoreError               the memory store failed (later layers)

A damaged *line* inside an otherwise readable file is not an exception: readers report it as a
`ReadWarning` (file, line, reason) and go on. Entry points (CLI, HTTP, MCP) map this tree to exit
codes, status codes and error objects in one place each; a user mistake never shows a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AccessError",
    "ConfigError",
    "InputError",
    "LaminaError",
    "NotFoundError",
    "ReadError",
    "ReadWarning",
    "StoreError",
    "UnknownFormatError",
]


class LaminaError(Exception):
    """Root of every error Lamina raises on purpose. `exit_code` is what the CLI exits with."""

    exit_code: int = 1


class InputError(LaminaError):
    """The caller passed something Lamina cannot use (a bad argument, an unreadable source)."""

    exit_code = 2


class ReadError(InputError):
    """A source could not be opened or read at all."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UnknownFormatError(InputError):
    """No registered reader recognises the source, or the named format does not exist."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class NotFoundError(InputError):
    """A named bank, document, log, pin, memory or operation does not exist: `what` kind of
    thing, `name` the one asked for, in which `log` (each empty when not said)."""

    def __init__(self, message: str, *, what: str = "", name: str = "", log: str = "") -> None:
        super().__init__(message)
        self.what, self.name, self.log = what, name, log


class AccessError(LaminaError):
    """Missing or wrong credentials, or a key used outside the banks it is scoped to."""

    exit_code = 5


class ConfigError(LaminaError):
    """A configuration value is missing, malformed or contradicts another."""

    exit_code = 3


class StoreError(LaminaError):
    """The memory store failed in a way the caller cannot fix by changing the input."""

    exit_code = 4


@dataclass(frozen=True, slots=True)
class ReadWarning:
    """One damaged or unrecognised piece of a source; reading went on past it."""

    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"
