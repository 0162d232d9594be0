"""How one route reaches its upstream, and what the gateway tells it about itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway import __version__
from gateway.upstream.calls import QUESTIONS_AT_ONCE, QUESTIONS_PER_CALL
from gateway.upstream.carriers.redirects import RedirectPolicy
from gateway.upstream.carriers.stdio import DEFAULT_MAX_MESSAGE as STDIO_MAX_MESSAGE
from gateway.wire.sse import DEFAULT_MAX_EVENT_SIZE as HTTP_MAX_MESSAGE

GATEWAY_INFO = {"name": "mcp-revision-gateway", "version": __version__}
# What the gateway declares to a legacy upstream: everything it can relay.
GATEWAY_CAPABILITIES: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}
# Seconds: to connect, for one call's answer, for the era probe's answer.
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 300.0
# How long one call may wait on its client in all (seconds): a person answering; as
# long as a parked call's round lives by default (the settings' park_ttl).
DEFAULT_ASK_TIMEOUT = 600.0
DEFAULT_PROBE_TIMEOUT = 10.0
# Connections one route keeps open to its upstream at once.
DEFAULT_MAX_CONNECTIONS = 1024


@dataclass
class UpstreamSettings:
    url: str
    transport: str = "auto"  # auto | http (Streamable HTTP) | sse (HTTP+SSE) | stdio
    # stdio: the command to spawn, its extra environment and working directory.
    command: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    # stdio: one child for the whole route (all callers share its one session) instead
    # of a child per upstream session (per client session, or per stateless pool).
    shared: bool = False
    # End upstream sessions with DELETE when their client's session ends (off only for
    # servers that cannot take it: some crash on DELETE).
    end_sessions: bool = True
    # Whose roots a stateless client's pooled session holds: "per-client" (asked only
    # when the server asks; see upstream/roots.py), "per-session" (the server keeps
    # them per session: asked first) or "shared" (the pool's first answer for all).
    roots: str = "per-client"
    route: str = ""
    version: str | None = None  # pin the upstream's revision instead of probing
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    # How long a call may wait on its client in all (the request clock paused).
    ask_timeout: float = DEFAULT_ASK_TIMEOUT
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    # "none": an upstream's redirect is an error; "same-origin": 307/308 within the
    # upstream's origin are followed.  Never to another origin.
    redirects: str = "none"
    # Requests (questions, pings) one call's upstream may have open at once / in all.
    questions_at_once: int = QUESTIONS_AT_ONCE
    questions_per_call: int = QUESTIONS_PER_CALL
    # Connections to the upstream open at once (the h1 HTTP/1.1 client refuses past it).
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    # The largest message the upstream may send (an SSE event, a JSON body, a stdio
    # line); None: each carrier's own bound (16 MiB over HTTP, 32 MiB over stdio).
    max_message: int | None = None
    # Where the route's own upstream credentials come from ("headers_from_env
    # UPSTREAM_AUTH"), when it sets Authorization itself: then an upstream 401/403 is
    # the route's misconfiguration, not a login for the client.  "": the client's own.
    credentials_from: str = ""
    client_info: dict[str, Any] = field(default_factory=lambda: dict(GATEWAY_INFO))
    client_capabilities: dict[str, Any] = field(default_factory=lambda: dict(GATEWAY_CAPABILITIES))

    @property
    def http_max_message(self) -> int:
        """The bound on one SSE event or JSON body from the upstream."""
        return self.max_message if self.max_message is not None else HTTP_MAX_MESSAGE

    @property
    def stdio_max_message(self) -> int:
        """The bound on one line of the upstream child's stdout."""
        return self.max_message if self.max_message is not None else STDIO_MAX_MESSAGE

    @property
    def redirect_policy(self) -> RedirectPolicy:
        return RedirectPolicy(self.route, same_origin=self.redirects == "same-origin")
