"""What every upstream carrier (Streamable HTTP, HTTP+SSE, stdio) offers the link.

``Carrier``, the ``UpstreamReply`` to one request, ``CarrierError`` and what it
means to a call (``carrier_failure``), and the one rule for which message
answers a request (``is_response_to``, ``final``), which the carriers and their
callers share.

A carrier moves JSON-RPC messages (already-parsed dicts) to and from one
upstream endpoint.  It knows nothing about MCP revisions: headers are given to
it by the caller (built by an adapter's client role), and it hands back raw
messages.  Correlating responses with requests is the carrier's job, because
only it knows whether the wire ties them together (a POST's response stream)
or not (one shared SSE stream, or stdio).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import AsyncGeneratorType
from typing import Any, Protocol

from gateway.core import Failure, FailureKind

Message = dict[str, Any]


# A Failure's data when its request never left the gateway (see CarrierError.unreached).
UNREACHED = {"unreached": True}


class CarrierError(Exception):
    """The upstream could not be reached or broke the transport's rules.

    ``status`` is the HTTP status when there was one; ``body`` is what the
    upstream said (possibly empty, cut short), for diagnostics.  A 4xx whose
    body is a JSON-RPC error is no CarrierError: see ``Carrier.request``.
    ``challenge`` is the ``WWW-Authenticate`` of a 401/403, passed on to the client.
    ``unreached``: no connection was made (refused, no such host, TLS failed), so the
    request was never written: sending it elsewhere cannot run it twice.
    ``not_started``: a stdio command that could not be started (waiting will not help).
    ``redirected``: the upstream answered with a redirect the route does not follow
    (an answer, not a lost one; no ``status``, so the era probe reads no refusal in it).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: bytes = b"",
        timeout: bool = False,
        challenge: str | None = None,
        unreached: bool = False,
        not_started: bool = False,
        redirected: bool = False,
    ) -> None:
        super().__init__(message)
        self.redirected = redirected
        self.unreached = unreached or not_started
        self.not_started = not_started
        self.status = status
        self.body = body
        self.timeout = timeout
        self.challenge = challenge

    @property
    def refused_credentials(self) -> bool:
        """401/403: the upstream needs (other) credentials; it says nothing of its era."""
        return self.status in REFUSED


def is_response_to(message: Message, request_id: Any, status: int = 200) -> bool:
    """Whether ``message`` answers ``request_id`` in a reply of HTTP ``status``.

    A response with the request's id does.  So does an error with a null (or no)
    id: a server that could not read the request's id answers so, and on the
    request's own reply that error is the request's.  An error that came back as
    the HTTP error answer (4xx/5xx) to this very request answers it whatever id
    it quotes (servers put null, or even made-up ids, where they could not read
    ours).
    """
    if "method" in message or not ("result" in message or "error" in message):
        return False
    if message.get("id") == request_id:
        return True
    return "error" in message and (message.get("id") is None or status >= 400)


class Closing(Protocol):
    """What stops a reply's reading: an open HTTP response, or a demux's queue."""

    async def aclose(self) -> None: ...


@dataclass
class UpstreamReply:
    """The messages an upstream sent in reply to one request.

    ``messages`` yields, in order, every message the upstream tied to the
    request (notifications, server-initiated requests) and ends with the
    JSON-RPC response whose id equals the request's.  ``headers`` are the
    response headers (HTTP) or empty.  ``status`` is the HTTP status (200 for
    stdio and HTTP+SSE).
    """

    status: int
    headers: Mapping[str, str]
    messages: AsyncIterator[Message]
    closer: Closing | None = field(default=None, repr=False)

    async def aclose(self) -> None:
        """Stop reading (closing the HTTP response, which on 2026 cancels)."""
        if self.closer is not None:
            await self.closer.aclose()
        # Closed here, not left to the garbage collector, whose finaliser costs the
        # event loop a wake-up and a task per call.
        messages = self.messages
        if isinstance(messages, AsyncGeneratorType) and not messages.ag_running:
            await messages.aclose()


async def final(exchange: UpstreamReply, request_id: Any) -> Message:
    """The message that answers ``request_id`` in ``exchange``, skipping what comes
    before it; CarrierError when the exchange ends without one."""
    async for message in exchange.messages:
        if is_response_to(message, request_id, exchange.status):
            return message
    raise CarrierError("the upstream closed the exchange before answering")


@dataclass(frozen=True)
class Where:
    """Where a carrier's messages go, for traces: a pipe to a child, or TCP to a
    host and port (HTTP)."""

    transport: str  # "pipe" or "tcp"
    host: str | None = None
    port: int | None = None


class Carrier(ABC):
    """One upstream endpoint; safe to use from many tasks at once."""

    def where(self) -> Where:
        """Where its messages go (the HTTP carriers say their URL's host and port)."""
        return Where("tcp")

    # Whether closing a request's exchange tells the upstream to stop (a POST's
    # own response stream); on a shared channel a notice must be sent instead.
    cancels_by_close: bool = True
    # Whether the channel is a session of its own, which a new one replaces.
    is_session: bool = False

    @abstractmethod
    async def start(self) -> None:
        """Open what must be open before the first message (HTTP+SSE stream, child)."""

    @abstractmethod
    async def request(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        """Send a JSON-RPC request; the returned exchange yields its related messages.

        Raises CarrierError when the upstream refuses at the transport level
        (connection refused, non-2xx status without a JSON-RPC body, timeout).
        A 4xx whose body is a JSON-RPC error response is *not* raised: the
        exchange's status says 4xx and its messages yield that error.
        """

    async def stream(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        """A request whose answer may stay open and quiet for long (a listen); by
        default the same as ``request``."""
        return await self.request(message, headers)

    @abstractmethod
    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        """Send a notification or a response to a server-initiated request."""

    @abstractmethod
    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        """Messages that belong to no request: the Streamable HTTP GET stream,
        unmatched messages of the HTTP+SSE stream or of stdio.  None when the
        upstream offers no such channel (HTTP 405)."""

    @abstractmethod
    async def terminate(self, headers: Mapping[str, str]) -> None:
        """End an upstream session (HTTP DELETE); nothing for other carriers."""

    @abstractmethod
    async def close(self) -> None:
        """Release everything (open streams, the child process)."""


# An upstream that refuses the caller's credentials: the client must hear a 401/403.
REFUSED = {401: FailureKind.UNAUTHORIZED, 403: FailureKind.FORBIDDEN}


def carrier_failure(exc: CarrierError) -> Failure:
    """What a carrier's error means to the caller of an upstream call."""
    refused = REFUSED.get(exc.status or 0)
    if refused is not None:
        headers = {"WWW-Authenticate": exc.challenge} if exc.challenge else {}
        return Failure(refused, f"the upstream answered HTTP {exc.status}", headers=headers)
    if exc.timeout:
        return Failure(FailureKind.UPSTREAM_TIMEOUT, f"the upstream did not answer in time: {exc}")
    if exc.not_started:
        said = f"its server could not be started: {exc}"  # the detail: the log's only
        return Failure(FailureKind.UPSTREAM_NOT_STARTED, said, UNREACHED)
    if exc.redirected:  # the upstream's own answer, which the route does not follow
        return Failure(FailureKind.UPSTREAM_PROTOCOL, str(exc))
    if exc.status is None and exc.unreached:
        return Failure(
            FailureKind.UPSTREAM_UNAVAILABLE, f"the upstream is unreachable: {exc}", UNREACHED
        )
    if exc.status is None:  # the request was written: only its answer is lost
        return Failure(FailureKind.UPSTREAM_LOST, f"the upstream's answer was lost: {exc}")
    if exc.status >= 500:
        return Failure(
            FailureKind.UPSTREAM_REFUSED,
            f"the upstream answered HTTP {exc.status}",
            {"status": exc.status},
        )
    return Failure(
        FailureKind.UPSTREAM_PROTOCOL,
        # Not an MCP endpoint, most often: the carrier's text may say no more than that.
        f"the upstream answered HTTP {exc.status}"
        + ("" if str(exc).endswith(f"HTTP {exc.status}") else f": {exc}"),
        {"status": exc.status},
    )


async def start_carrier(carrier: Carrier) -> None:
    """Start (or, after a crash, restart) a carrier; a failure is the caller's Failure."""
    try:
        await carrier.start()
    except CarrierError as exc:
        raise carrier_failure(exc) from exc
