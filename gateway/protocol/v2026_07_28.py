"""MCP 2026-07-28: the first revision of the stateless era (its behaviour is
:class:`~gateway.protocol.adapter.stateless.StatelessEra`'s); its tables here."""

from __future__ import annotations

from gateway.core import FailureKind, Operation
from gateway.protocol import legacy_tables
from gateway.protocol.adapter.stateless import (
    ACKNOWLEDGED,
    SUBSCRIPTION_ID,
    StatelessEra,
)
from gateway.protocol.upstream_failures import TABLE as UPSTREAM_FAILURES

__all__ = ["ACKNOWLEDGED", "SUBSCRIPTION_ID", "Adapter2026_07_28"]


class Adapter2026_07_28(StatelessEra):
    version = "2026-07-28"

    methods = frozenset(
        {
            Operation.DISCOVER,
            Operation.TOOLS_LIST,
            Operation.TOOLS_CALL,
            Operation.RESOURCES_LIST,
            Operation.RESOURCES_TEMPLATES_LIST,
            Operation.RESOURCES_READ,
            Operation.PROMPTS_LIST,
            Operation.PROMPTS_GET,
            Operation.COMPLETE,
            Operation.LISTEN,
            # The tasks extension keeps these (tasks/result and tasks/list are gone).
            Operation.TASKS_GET,
            Operation.TASKS_CANCEL,
            Operation.TASKS_UPDATE,
            # Only on stdio, and only client to server.
            Operation.CANCELLED,
        }
    )
    server_notifications = frozenset(
        {
            "notifications/progress",
            "notifications/message",
            "notifications/resources/updated",
            "notifications/resources/list_changed",
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/subscriptions/acknowledged",
            "notifications/cancelled",
            "notifications/tasks",
        }
    )
    tool_fields = frozenset(
        {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons"}
    ) | {"_meta"}
    resource_fields = frozenset(
        {"uri", "name", "title", "description", "mimeType", "size", "annotations", "icons"}
    ) | {"_meta"}
    template_fields = frozenset(
        {"uriTemplate", "name", "title", "description", "mimeType", "annotations", "icons"}
    ) | {"_meta"}
    prompt_fields = frozenset({"name", "title", "description", "arguments", "icons", "_meta"})
    implementation_fields = frozenset(
        {"name", "title", "version", "description", "icons", "websiteUrl"}
    )
    content_types = frozenset({"text", "image", "audio", "resource", "resource_link"})
    server_capabilities = frozenset(
        {"experimental", "logging", "prompts", "resources", "tools", "completions", "extensions"}
    )
    client_capabilities = frozenset(
        {"experimental", "roots", "sampling", "elicitation", "extensions"}
    )
    content_meta = True
    progress_message = True
    client_elicitation_modes = frozenset({"form", "url"})
    flat_elicitation = False
    result_fields = frozenset({"resultType", "ttlMs", "cacheScope", "structuredContent"})
    structured_content = "any"

    codes = {
        **legacy_tables.CODES,
        FailureKind.RESOURCE_NOT_FOUND: -32602,  # -32002 MUST NOT be emitted any more
        FailureKind.MISSING_CAPABILITY: -32021,
        FailureKind.UNSUPPORTED_VERSION: -32022,
        FailureKind.HEADER_MISMATCH: -32020,
        FailureKind.URL_ELICITATION_REQUIRED: -32603,  # never emitted: input_required instead
    }
    statuses = {
        **legacy_tables.STATUSES,
        FailureKind.UNKNOWN_METHOD: 404,
        FailureKind.INVALID_PARAMS: 400,
        FailureKind.RESOURCE_NOT_FOUND: 400,
        FailureKind.MISSING_CAPABILITY: 400,
        FailureKind.UNSUPPORTED_VERSION: 400,
        FailureKind.HEADER_MISMATCH: 400,
        # The upstream's trouble, as a proxy says it (their one table): not sent or
        # every target down 503 (with Retry-After), answer lost or a 5xx of its own 502,
        # too slow 504.  (An unusable answer stays 200: it may be the client's own
        # oversized request.)
        **{kind: failure.status for kind, failure in UPSTREAM_FAILURES.items()},
    }
