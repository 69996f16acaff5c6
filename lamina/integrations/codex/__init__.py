"""Codex CLI integration: `lamina install codex` writes Codex's hooks (hooks.json) and MCP server
(config.toml); the hooks run the same `lamina hook` as Claude Code's (one engine), which reads
Codex's payloads and rollouts (lamina.integrations.codex.transcript)."""
