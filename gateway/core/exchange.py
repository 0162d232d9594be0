"""Per-request context: everything about one request that is not the request itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.call import Call
from gateway.core.catalog import ServerProfile
from gateway.core.outcome import Event

EventSink = Callable[[Event], Awaitable[None]]


async def _discard(event: Event) -> None:
    return None


@dataclass(slots=True)
class Exchange:
    """One client request on its way through the gateway.

    ``principal`` identifies the caller for state binding (a digest of its
    credentials, never the credentials); ``forward_headers`` are the inbound
    headers the route forwards upstream; ``emit`` delivers events (progress,
    logs) on the stream the request belongs to.
    """

    call: Call
    route: str
    profile: ServerProfile
    principal: str = "anonymous"
    request_id: str = ""
    forward_headers: dict[str, str] = field(default_factory=dict)
    emit: EventSink = _discard
    extra: dict[str, Any] = field(default_factory=dict)
