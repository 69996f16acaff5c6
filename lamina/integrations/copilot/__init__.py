"""GitHub Copilot CLI integration: `lamina install copilot` writes Copilot's hooks
(`hooks/lamina.json`) and MCP server (`mcp-config.json`); the hooks run the same `lamina hook`
as Claude Code's (one engine), which reads Copilot's payloads and `events.jsonl` sessions."""
