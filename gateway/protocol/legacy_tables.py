"""Failure tables shared by the handshake-era revisions (they agree on these)."""

from __future__ import annotations

from gateway.core import FailureKind
from gateway.protocol.upstream_failures import TABLE as UPSTREAM_FAILURES

CODES: dict[FailureKind, int] = {
    FailureKind.PARSE_ERROR: -32700,
    FailureKind.INVALID_REQUEST: -32600,
    FailureKind.UNKNOWN_METHOD: -32601,
    FailureKind.INVALID_PARAMS: -32602,
    FailureKind.INTERNAL: -32603,
    FailureKind.RESOURCE_NOT_FOUND: -32002,
    # A tools/call renders it as an isError result; anywhere else it is invalid params.
    FailureKind.INVALID_ARGUMENTS: -32602,
    # No legacy code exists for these; the nearest standard meaning.
    FailureKind.MISSING_CAPABILITY: -32602,
    FailureKind.UNSUPPORTED_VERSION: -32602,
    FailureKind.HEADER_MISMATCH: -32600,
    FailureKind.URL_ELICITATION_REQUIRED: -32603,
    FailureKind.SAMPLING_REJECTED: -1,
    FailureKind.SESSION_REQUIRED: -32600,
    FailureKind.SESSION_NOT_FOUND: -32001,
    FailureKind.FORBIDDEN: -32600,
    FailureKind.UNAUTHORIZED: -32600,
    FailureKind.NOT_ACCEPTABLE: -32600,
    FailureKind.UNSUPPORTED_MEDIA_TYPE: -32600,
    FailureKind.PAYLOAD_TOO_LARGE: -32600,
    FailureKind.METHOD_NOT_ALLOWED: -32600,
    # Implementation-defined server errors (JSON-RPC's -32000 to -32099 range).
    FailureKind.QUOTA_EXCEEDED: -32000,
    FailureKind.RATE_LIMITED: -32000,
    FailureKind.OVERLOADED: -32000,
    # The upstream's failures: their one table.
    **{kind: failure.code for kind, failure in UPSTREAM_FAILURES.items()},
}

# JSON-RPC errors travel in a normal 200 response; only transport-level
# refusals and the upstream's failures get an HTTP error status.
STATUSES: dict[FailureKind, int] = {
    FailureKind.PARSE_ERROR: 400,
    FailureKind.INVALID_REQUEST: 400,
    FailureKind.UNSUPPORTED_VERSION: 400,
    FailureKind.HEADER_MISMATCH: 400,
    FailureKind.SESSION_REQUIRED: 400,
    FailureKind.SESSION_NOT_FOUND: 404,
    FailureKind.FORBIDDEN: 403,
    FailureKind.UNAUTHORIZED: 401,
    FailureKind.NOT_ACCEPTABLE: 406,
    FailureKind.UNSUPPORTED_MEDIA_TYPE: 415,
    FailureKind.PAYLOAD_TOO_LARGE: 413,
    FailureKind.METHOD_NOT_ALLOWED: 405,
    FailureKind.QUOTA_EXCEEDED: 429,
    FailureKind.RATE_LIMITED: 429,
    FailureKind.OVERLOADED: 503,
    # The upstream's trouble is a JSON-RPC error at HTTP 200 for these revisions' clients:
    # their SDKs (Python 1.x) fail the whole session on a 5xx answer to a POST instead of
    # the one request (the interop matrix's HTTP+SSE cells showed it).
}
