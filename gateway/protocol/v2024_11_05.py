"""MCP 2024-11-05: the first revision.  HTTP+SSE or stdio, no elicitation, no batches."""

from __future__ import annotations

from typing import ClassVar

from gateway.core import AskKind, Operation
from gateway.protocol.adapter.handshake import HandshakeEra


class Adapter2024_11_05(HandshakeEra):
    version = "2024-11-05"

    asks_in_arguments = True
    allows_batch = False

    methods = frozenset(
        {
            Operation.INITIALIZE,
            Operation.INITIALIZED,
            Operation.PING,
            Operation.TOOLS_LIST,
            Operation.TOOLS_CALL,
            Operation.RESOURCES_LIST,
            Operation.RESOURCES_TEMPLATES_LIST,
            Operation.RESOURCES_READ,
            Operation.RESOURCES_SUBSCRIBE,
            Operation.RESOURCES_UNSUBSCRIBE,
            Operation.PROMPTS_LIST,
            Operation.PROMPTS_GET,
            Operation.COMPLETE,
            Operation.SET_LOG_LEVEL,
            Operation.CANCELLED,
            Operation.PROGRESS,
            Operation.ROOTS_LIST_CHANGED,
        }
    )
    server_notifications = frozenset(
        {
            "notifications/cancelled",
            "notifications/progress",
            "notifications/message",
            "notifications/resources/updated",
            "notifications/resources/list_changed",
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
        }
    )
    ask_kinds = frozenset({AskKind.SAMPLE, AskKind.LIST_ROOTS})
    # Sampling and roots are real server requests here (the spec defines them), so
    # `can_push_ask` is True, unlike the seed's table; elicitation, which this
    # revision lacks, travels in tool arguments (`asks_in_arguments`).
    pushable_asks = frozenset({AskKind.SAMPLE, AskKind.LIST_ROOTS})

    tool_fields = frozenset({"name", "description", "inputSchema"})
    resource_fields = frozenset({"uri", "name", "description", "mimeType", "size", "annotations"})
    template_fields = frozenset({"uriTemplate", "name", "description", "mimeType", "annotations"})
    prompt_fields = frozenset({"name", "description", "arguments"})
    implementation_fields = frozenset({"name", "version"})
    content_types = frozenset({"text", "image", "resource"})
    server_capabilities = frozenset({"experimental", "logging", "prompts", "resources", "tools"})
    client_capabilities = frozenset({"experimental", "roots", "sampling"})
    result_fields = frozenset[str]()
    content_meta = False
    structured_content = "none"
    progress_message = False

    session_header: ClassVar[str | None] = None
    version_header = False
