"""Framing both sides of the gateway share: SSE events and stdio lines (no MCP revision,
nothing of the project but the core)."""
