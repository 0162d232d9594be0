"""Each request's id, bound to the log context of the task that answers it.

The transport's: it reads the request's headers (``X-Request-Id``, ``traceparent``)
before anything else runs, and every log line of that request carries the id.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Mapping
from contextvars import Token

from gateway.core.log_context import REQUEST_CONTEXT

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
# A client's X-Request-Id is used as it is only when it looks like an id.
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestIds:
    """Each request's id (the client's ``X-Request-Id`` when sane, else one of ours),
    bound with its trace ids to the log context of the task that answers it."""

    def __init__(self) -> None:
        # Unique, not secret (it only correlates log lines): no uuid4 per request.
        self._prefix = secrets.token_hex(8)
        self._numbers = itertools.count()

    def bind(self, headers: Mapping[str, str]) -> tuple[str, Token[Mapping[str, str] | None]]:
        """The request's id, bound to the log context (the token resets it)."""
        given = headers.get("x-request-id", "")
        if given and _SANE_REQUEST_ID.match(given):
            request_id = given
        else:
            request_id = f"{self._prefix}{next(self._numbers):016x}"
        context = {"request_id": request_id}
        traceparent = headers.get("traceparent")
        if traceparent:
            context.update(trace_ids(traceparent))
        return request_id, REQUEST_CONTEXT.set(context)

    def bind_for_task(self, headers: Mapping[str, str]) -> str:
        """:meth:`bind` for a request answered in a task of its own (the lane's):
        nothing to reset when it ends."""
        return self.bind(headers)[0]


def trace_ids(traceparent: str | None) -> dict[str, str]:
    """The W3C trace context ids of a ``traceparent`` header, for log correlation."""
    match = _TRACEPARENT.match(traceparent.strip().lower()) if traceparent else None
    if match is None:
        return {}
    return {"trace_id": match.group(1), "span_id": match.group(2)}
