"""What the gateway's spans are called and which attributes they carry.

The names follow OpenTelemetry's semantic conventions for MCP (span name
``{mcp.method.name} {target}``; ``mcp.*``, ``jsonrpc.request.id``,
``gen_ai.*``, ``network.*``, ``error.type``); what they have no name for (the
route, both revisions, the principal, the outcome, ask rounds, parked time) is
the gateway's own, under ``gateway.``.  Nothing here imports opentelemetry.
"""

from __future__ import annotations

import hashlib
from typing import Any

from gateway.core import Call, Operation

# OpenTelemetry's semantic conventions (MCP, JSON-RPC, GenAI, network, errors).
METHOD = "mcp.method.name"
PROTOCOL_VERSION = "mcp.protocol.version"
SESSION_ID = "mcp.session.id"
REQUEST_ID = "jsonrpc.request.id"
TOOL_NAME = "gen_ai.tool.name"
PROMPT_NAME = "gen_ai.prompt.name"
OPERATION_NAME = "gen_ai.operation.name"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
STATUS_CODE = "rpc.response.status_code"

# The gateway's own.
ROUTE = "gateway.route"
CLIENT_REVISION = "gateway.client.protocol_version"
UPSTREAM_REVISION = "gateway.upstream.protocol_version"
PRINCIPAL = "gateway.principal"
OUTCOME = "gateway.outcome"
ROUND = "gateway.round"
STATE = "gateway.state"
PARKED_MS = "gateway.parked_ms"
WAITED_MS = "gateway.waited_ms"
ANSWER = "gateway.answer"
LINK = "gateway.link"

# Span events.
ASKED = "gateway.ask"  # the upstream asked the client something (elicitation, ...)
ANSWERED = "gateway.answer"  # ... and the answer went back to it
HANDED_OUT = "gateway.input_required"  # a round of questions went to the client
RETRY = "gateway.retry"  # a retry of a round handed out (how long it waited parked)

# The observers' outcome names (a type name) as the spans say them.
OUTCOMES: dict[str, str] = {}  # the log's outcome names are the spans' own
# A method or target longer than this is cut in a span's name (clients choose them).
MAX_NAME = 64


def span_name(call: Call) -> str:
    """``{method} {tool or prompt}``, else the method."""
    method = call.method[:MAX_NAME] if isinstance(call.method, str) else "unknown"
    if call.operation in (Operation.TOOLS_CALL, Operation.PROMPTS_GET):
        target = call.name
        if target:
            return f"{method} {target[:MAX_NAME]}"
    return method


def call_attributes(call: Call) -> dict[str, Any]:
    """What a call says of itself, on both of its spans."""
    attributes: dict[str, Any] = {METHOD: call.method}
    op = call.operation
    if call.id is not None:
        attributes[REQUEST_ID] = str(call.id)
    if op is Operation.TOOLS_CALL:
        attributes[OPERATION_NAME] = "execute_tool"
        if call.name is not None:
            attributes[TOOL_NAME] = call.name
    elif op is Operation.PROMPTS_GET and call.name is not None:
        attributes[PROMPT_NAME] = call.name
    # No mcp.resource.uri: a URI is the client's data (a path, a query with a key in
    # it), and the gateway keeps request bodies out of logs and traces alike.
    return attributes


def session_digest(session_id: str) -> str:
    """What ``mcp.session.id`` holds: a digest of the session id, never the id (it is
    all an anonymous client needs to use a session, and it is never logged either)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def transport_attributes(transport: str) -> dict[str, str]:
    """``network.*`` of an inbound transport (``http``, ``sse``, ``stdio``)."""
    if transport == "stdio":
        return {NETWORK_TRANSPORT: "pipe"}
    return {NETWORK_TRANSPORT: "tcp", NETWORK_PROTOCOL: "http"}
