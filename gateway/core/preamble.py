"""An inbound message as the transport read it, before any adapter looked at it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.core.failure import Failure


@dataclass(slots=True)
class SessionView:
    """What a downstream session remembers about its client."""

    id: str
    protocol_version: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] | None = None
    log_level: str | None = None
    # The adapter of the revision the session negotiated, kept with the session
    # from its handshake on (opaque here, as ``ClientContext.adapter``).
    adapter: object = field(default=None, repr=False)


@dataclass(slots=True)
class Preamble:
    """One inbound message and its envelope.

    ``body`` is the parsed JSON (object or array) or None when it did not
    parse (``parse_error`` says why).  ``headers`` keys are lower-case.
    ``transport`` is ``"http"``, ``"sse"`` (the HTTP+SSE message endpoint) or
    ``"stdio"``.  ``session_id`` is the session the message names (HTTP's
    ``Mcp-Session-Id``, or the HTTP+SSE endpoint's query); ``session`` is that
    session once found.
    """

    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    http_method: str = "POST"
    transport: str = "http"
    session: SessionView | None = None
    parse_error: str | None = None
    peer: str = ""
    session_id: str | None = None
    # The revision the message names for itself (a stateless revision's `_meta`), read once
    # when its adapter is selected.
    named_version: str | None = None
    # Set when the session or parked call the message names belongs to another process
    # that could not be located just now (a cluster's store did not answer): the failure
    # to answer, in the message's revision, instead of "not found".
    owner_unknown: Failure | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())
