"""Gemini CLI: `lamina install gemini` (lamina.integrations.gemini.install). Its hook events are
served by the same `lamina hook` as Claude Code's and Codex's (lamina.integrations.claude_code.
hook), and its chats read by lamina.readers.gemini."""
