"""Registers the readers that ship with Lamina (imported once, on first registry use)."""

from __future__ import annotations

from .anthropic import AnthropicReader
from .base import register_reader
from .claude_code import ClaudeCodeReader
from .codex import CodexReader
from .copilot import CopilotReader
from .gemini import GeminiReader
from .locomo import LocomoReader
from .openai import OpenAIReader

register_reader(ClaudeCodeReader(), replace=True)
register_reader(CodexReader(), replace=True)
register_reader(GeminiReader(), replace=True)
register_reader(CopilotReader(), replace=True)
register_reader(AnthropicReader(), replace=True)
register_reader(OpenAIReader(), replace=True)
register_reader(LocomoReader(), replace=True)
