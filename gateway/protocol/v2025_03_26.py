"""MCP 2025-03-26: Streamable HTTP, sessions, batches, tool annotations, audio."""

from __future__ import annotations

from typing import ClassVar

from gateway.protocol.v2024_11_05 import Adapter2024_11_05


class Adapter2025_03_26(Adapter2024_11_05):
    version = "2025-03-26"

    allows_batch = True

    tool_fields = Adapter2024_11_05.tool_fields | {"annotations"}
    content_types = Adapter2024_11_05.content_types | {"audio"}
    server_capabilities = Adapter2024_11_05.server_capabilities | {"completions"}
    progress_message = True
    session_header: ClassVar[str | None] = "mcp-session-id"
    resumable_streams = True
