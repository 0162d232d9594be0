"""A route: one path of the gateway, the upstream behind it (through the bridge), and
its policies."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.auth.front import RouteAuth
from gateway.bridge.backend import Backend
from gateway.bridge.principal import Principals
from gateway.core.limits import Quota
from gateway.core.tracing import CallObserver
from gateway.protocol import AdapterSet
from gateway.transport.common import CallTap
from gateway.transport.guard import OriginGuard
from gateway.transport.sessions import SessionStore

if TYPE_CHECKING:
    from gateway.policy import RoutePolicy

DEFAULT_FORWARD_HEADERS = ("authorization", "traceparent", "tracestate", "baggage")
DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_MAX_BATCH = 64
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_STREAM_IDLE_TIMEOUT = 300.0
# An open SSE answer quiet this long gets a comment (seconds; 0: never), so that a
# proxy's idle timeout between client and gateway (nginx's 60 s) does not cut it.
DEFAULT_KEEPALIVE = 15.0
# Calls in flight and open standalone streams: per principal, and in all.
DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL = 200
DEFAULT_MAX_INFLIGHT = 2_000
DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 100
DEFAULT_MAX_STREAMS = 1_000
# Client notifications being passed upstream at once, per principal and in all.
DEFAULT_MAX_NOTICES_PER_PRINCIPAL = 64
DEFAULT_MAX_NOTICES = 1_000


@dataclass
class Route:
    """One path of the gateway and the upstream behind it."""

    path: str
    backend: Backend
    adapters: AdapterSet
    guard: OriginGuard
    forward_headers: tuple[str, ...] = DEFAULT_FORWARD_HEADERS
    max_body: int = DEFAULT_MAX_BODY
    # The most messages one JSON-RPC batch may hold.
    max_batch: int = DEFAULT_MAX_BATCH
    # Seconds a request body may take to arrive, and a standalone stream may stay
    # idle (nothing to send, or a client that does not read).
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    stream_idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT
    keepalive: float = DEFAULT_KEEPALIVE
    ask_timeout: float = 300.0
    sessions: SessionStore = field(default_factory=SessionStore)
    observer: CallObserver | None = None  # told of each finished call (logs, metrics)
    # The console's recent-calls tap (None, one attribute check a call, when it is off).
    console: CallTap | None = None
    # The route's OAuth side (None: no credentials are checked or passed on specially).
    auth: RouteAuth | None = None
    # Who a caller is: a keyed digest of its credentials and tenant headers.
    principals: Principals = field(default_factory=lambda: Principals(secrets.token_bytes(32)))
    # What the route exposes and its rate limits (None: everything, unlimited; a call
    # then never enters gateway/policy).
    policy: RoutePolicy | None = None
    # Calls that need no translation may take the pass-through lane
    # (transport/passthrough.py); off, every call takes the full path.
    pass_through: bool = False
    # Calls in flight and open standalone streams, per principal and in all.
    calls: Quota = field(
        default_factory=lambda: Quota(
            "calls in flight", DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL, DEFAULT_MAX_INFLIGHT
        )
    )
    streams: Quota = field(
        default_factory=lambda: Quota(
            "open streams", DEFAULT_MAX_STREAMS_PER_PRINCIPAL, DEFAULT_MAX_STREAMS
        )
    )
    # Client notifications being passed on (nobody waits for them: past the bound,
    # a flood is dropped rather than held in memory while the upstream is slow).
    notices: Quota = field(
        default_factory=lambda: Quota(
            "notifications in progress", DEFAULT_MAX_NOTICES_PER_PRINCIPAL, DEFAULT_MAX_NOTICES
        )
    )
