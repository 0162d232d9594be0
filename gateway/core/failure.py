"""The normalized failure vocabulary.

Each adapter maps a FailureKind to the JSON-RPC code and HTTP status its
revision defines; nothing above the adapters ever picks a code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class FailureKind(Enum):
    # JSON-RPC basics.
    PARSE_ERROR = "parse_error"
    INVALID_REQUEST = "invalid_request"
    UNKNOWN_METHOD = "unknown_method"
    INVALID_PARAMS = "invalid_params"
    INTERNAL = "internal"
    # MCP-defined conditions.
    RESOURCE_NOT_FOUND = "resource_not_found"
    # Named so the dispatcher can say it; always rendered as an isError tool result.
    INVALID_ARGUMENTS = "invalid_arguments"
    MISSING_CAPABILITY = "missing_capability"
    UNSUPPORTED_VERSION = "unsupported_version"
    HEADER_MISMATCH = "header_mismatch"
    URL_ELICITATION_REQUIRED = "url_elicitation_required"
    SAMPLING_REJECTED = "sampling_rejected"
    # Transport and session conditions.
    SESSION_REQUIRED = "session_required"
    SESSION_NOT_FOUND = "session_not_found"
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"
    NOT_ACCEPTABLE = "not_acceptable"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    # The caller is over one of its quotas (sessions, parked calls, streams, calls).
    QUOTA_EXCEEDED = "quota_exceeded"
    # The caller called faster than its route's rate limit lets it (a token bucket):
    # ``data.retryAfterSeconds`` says when the next call may go.
    RATE_LIMITED = "rate_limited"
    # The gateway itself is short of a resource (descriptors, a global bound): later.
    OVERLOADED = "overloaded"
    # Upstream trouble: the gateway's own kinds, each saying whether the call may have
    # run (gateway/protocol/upstream_failures.py is their one table).
    # Not sent: no connection could be made (refused, no such host, TLS failed).
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    # Sent, and the answer lost: the connection closed or reset after the request was
    # written, so the call may have run.
    UPSTREAM_LOST = "upstream_lost"
    # Every target of the route is out (ejected after failures): answered at once, with
    # when to try again, instead of after the call's timeout.
    UPSTREAM_DOWN = "upstream_down"
    # Sent, and no answer in time: the call may have run.
    UPSTREAM_TIMEOUT = "upstream_timeout"
    # The upstream answered with an HTTP error of its own (5xx): data.status says which.
    UPSTREAM_REFUSED = "upstream_refused"
    # A stdio route's command could not be started: waiting will not help.
    UPSTREAM_NOT_STARTED = "upstream_not_started"
    # The upstream refused the credentials the route itself sets (its 401/403): the
    # call did not run, and only the route's operator can fix it.
    UPSTREAM_CREDENTIALS = "upstream_credentials"
    # An answer the gateway cannot use (not MCP, a 4xx without a JSON-RPC error, ...).
    UPSTREAM_PROTOCOL = "upstream_protocol"
    # An upstream JSON-RPC error with no normalized meaning: its code passes through.
    UPSTREAM_ERROR = "upstream_error"


@dataclass(eq=True)
class Failure(Exception):
    """Why a call could not produce a value.

    ``code`` is set only for UPSTREAM_ERROR (the upstream's own code, passed
    through); every other kind gets its code from the client's adapter.
    """

    kind: FailureKind
    message: str
    data: Any = None
    code: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"
