"""Registers the readers that ship with Lamina (imported once, on first registry use)."""

from __future__ import annotations

from .base import register_reader
from .claude_code import ClaudeCodeReader

register_reader(ClaudeCodeReader(), replace=True)
