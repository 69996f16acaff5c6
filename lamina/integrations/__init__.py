"""Thin layers over the library: the Claude Code plugin (hooks), later MCP and HTTP."""
