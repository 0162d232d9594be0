"""The request a task answers, for its log lines: one context variable holding the
request's ids, set once per request.

structlog's own ``bind_contextvars`` keeps a context variable per key, found by
name and set one by one (about 11 k instructions a request for an id and two trace
ids); this is one ``ContextVar.set`` of a small dict.  The logging setup merges it
into every line (gateway/observability.py), below whatever a span binds later.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

REQUEST_CONTEXT: ContextVar[Mapping[str, str] | None] = ContextVar(
    "gateway_request_context", default=None
)


def request_field(key: str) -> str | None:
    """One of the current request's log fields (``request_id``), if any."""
    context = REQUEST_CONTEXT.get()
    value = context.get(key) if context else None
    return value if isinstance(value, str) else None
