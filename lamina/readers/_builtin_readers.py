"""Registers the readers that ship with Lamina (imported once, on first registry use)."""

from __future__ import annotations

from .anthropic import AnthropicReader
from .base import register_reader
from .claude_code import ClaudeCodeReader
from .locomo import LocomoReader
from .openai import OpenAIReader

register_reader(ClaudeCodeReader(), replace=True)
register_reader(AnthropicReader(), replace=True)
register_reader(OpenAIReader(), replace=True)
register_reader(LocomoReader(), replace=True)
