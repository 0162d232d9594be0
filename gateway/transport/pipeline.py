"""The inbound pipeline's one entry: a message in, accepted or refused.

A transport (HTTP, stdio) hands :meth:`Pipeline.receive` the message's envelope
(a :class:`Preamble`) and what it came in by; the pipeline takes it through the
same steps for every transport, written here once:

1. the Host/Origin guard (where the transport has one);
2. the route's credential check (where the transport carries credentials);
3. the principal: who the caller is, for state and quotas;
4. the session the message names (or the connection's own);
5. the body, read by the transport, and its parse;
6. the client's adapter, its header rules and the decode in it, one step of the
   adapters' (a session's client stays on its negotiated revision);
7. the session quota (an ``initialize`` over it is refused);
8. the handshake and what needs no answer (replies, notifications).

What comes back is a :class:`Refusal` to word and send, or an ``Arrival``
whose calls the transport answers through :meth:`Runner.run` (one call) and
:meth:`Runner.run_all` (a batch's).  What differs between transports is what
it says of itself as an :class:`InboundTransport`; the rest of a message's life (sessions,
calls) is :mod:`gateway.transport.inbound`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson

from gateway.auth.front import RequestView
from gateway.core import Call, DecodeFailure, Failure, FailureKind, Operation, Preamble
from gateway.core.limits import MAX_DEPTH, too_deep
from gateway.protocol import Adapter
from gateway.protocol.selection import Inbound
from gateway.transport.common import first_id, reporter
from gateway.transport.inbound import Arrival, Runner, Running, Send
from gateway.transport.sessions import Session

Source = TypeVar("Source", contravariant=True)
S = TypeVar("S")

SESSION_NOT_FOUND = "Session not found (expired or ended)"


@dataclass(slots=True)
class Refusal:
    """A message turned away before any call ran, and the adapter to word it in;
    ``session``: the session it came in (an HTTP+SSE client reads its answers there)."""

    adapter: Adapter
    failure: Failure
    id: Any = None
    session: Session | None = None

    def message(self) -> dict[str, Any]:
        return self.adapter.encode_failure(self.id, self.failure)


class InboundTransport(Protocol[Source]):
    """What a transport says of itself to the pipeline (one per transport, not per
    message).  ``Source`` is what a message comes in as (an HTTP request, a line)."""

    @property
    def guarded(self) -> bool:
        """Host and Origin are checked (a transport that has them: HTTP)."""
        ...

    @property
    def own_session(self) -> Session | None:
        """The connection's own session (stdio: the process is one client); None
        where each message names its session (``Preamble.session_id``)."""
        ...

    @property
    def running(self) -> Running | None:
        """The connection's calls in flight (stdio); None: the session's (HTTP)."""
        ...

    @property
    def events(self) -> Send | None:
        """Where a notification's events go (None: the session's stream)."""
        ...

    async def read(self, source: Source, preamble: Preamble) -> bytes | Refusal | None:
        """The message's bytes, or why they are refused; None: they never arrived
        whole (the connection broke), so nothing can be answered."""
        ...

    def check_headers(
        self, adapter: Adapter, preamble: Preamble, session: Session | None
    ) -> Failure | None:
        """The transport's own rule for the picked revision (HTTP: a session id once
        the handshake made one); the revision's own header rules are its decode's."""
        ...


class Pipeline(Runner):
    """The inbound path of one transport's messages: :meth:`receive` lets each in,
    the :class:`Runner` it builds on handles what is let in."""

    async def receive(
        self,
        transport: InboundTransport[S],
        source: S,
        preamble: Preamble,
        view: RequestView | None = None,
    ) -> Arrival | Refusal | None:
        """One message in, every step in the one order (see the module); None: its
        body never arrived whole.  ``view``: what the route's credential check reads,
        as the transport read it (None: the transport carries no credentials)."""
        principal = await self.caller(preamble, view, guarded=transport.guarded)
        if isinstance(principal, Refusal):
            return principal
        session = transport.own_session
        if preamble.session_id is not None:
            session = self.sessions.get(preamble.session_id, principal)
        preamble.session = session.view if session is not None else None
        raw = await transport.read(source, preamble)
        if raw is None:
            return None
        refusal = raw if isinstance(raw, Refusal) else self.parse(preamble, raw)
        if session is not None and session.closed:
            session = preamble.session = None  # ended while its body was arriving
        if refusal is None and preamble.owner_unknown is not None:
            refusal = self.worded(preamble, preamble.owner_unknown)  # not "not found"
        if refusal is None and preamble.session_id is not None and session is None:
            failure = Failure(FailureKind.SESSION_NOT_FOUND, SESSION_NOT_FOUND)
            refusal = self.refusal(preamble, failure, first_id(preamble.body))
        arrival = refusal or self._accept(transport, view, preamble, session, principal)
        if isinstance(arrival, Refusal):
            arrival.session = session
            return arrival
        # Answered before anything else: what follows belongs to the new session.
        if arrival.adapter.has_handshake:
            arrival.opened = await self.handshake(arrival)
        self.take_replies_and_notices(arrival, transport.events)
        return arrival

    async def caller(
        self, preamble: Preamble, view: RequestView | None, *, guarded: bool
    ) -> str | Refusal:
        """Who sends the message (its principal), or why it is turned away: the
        Host/Origin guard, then the route's credential check."""
        headers = preamble.headers
        refused = self.route.guard.check(headers) if guarded else None
        principal: str | None = None
        auth = self.route.auth
        if refused is None and auth is not None and view is not None:
            admitted = await auth.admit(view)
            refused, principal = admitted.failure, admitted.principal
        if refused is not None:
            return self.refusal(preamble, refused)
        return principal or self.route.principals.of(headers)

    def _accept(
        self,
        transport: InboundTransport[S],
        view: RequestView | None,
        preamble: Preamble,
        session: Session | None,
        principal: str,
    ) -> Arrival | Refusal:
        """The message in the client's adapter, decoded, within the session quota."""
        inbound = self.adapters.decode(preamble)
        if isinstance(inbound, Failure):
            return self.refusal(preamble, inbound, first_id(preamble.body))
        refused = inbound.refused or transport.check_headers(inbound.adapter, preamble, session)
        if refused is not None:
            return Refusal(inbound.adapter, refused, first_id(preamble.body))
        running = transport.running
        if running is None and session is not None:
            running = session.running
        arrival = self.accept(preamble, inbound, session, running, principal)
        auth = self.route.auth
        if auth is not None and view is not None:
            # An upstream 401/403 reaches the client as such, its challenge kept.
            arrival.reword_failure = lambda failure: auth.passed_on(failure, view)
        return self.session_room(arrival) or arrival

    def parse(self, preamble: Preamble, raw: bytes) -> Refusal | None:
        """Parse the body into ``preamble``; a Refusal when it is not JSON."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            preamble.parse_error = f"Parse error: {exc}"
            return self.refusal(preamble, Failure(FailureKind.PARSE_ERROR, preamble.parse_error))
        # Nesting deeper than MAX_DEPTH needs more brackets than that: a short count
        # (in C) spares most messages the walk.
        if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and too_deep(body):
            # Refused before any recursive code (validation, projection) walks it.
            preamble.body = _shallow(body)
            failure = Failure(
                FailureKind.INVALID_PARAMS, f"the message nests deeper than {MAX_DEPTH} levels"
            )
            return self.refusal(preamble, failure, first_id(body))
        preamble.body = body
        if isinstance(body, list) and len(body) > self.route.max_batch:
            # One answer for the whole batch, before any of it is decoded or run.
            preamble.body = _shallow(body)
            failure = Failure(
                FailureKind.INVALID_REQUEST,
                f"a batch may hold at most {self.route.max_batch} messages ({len(body)} sent)",
            )
            return self.refusal(preamble, failure)
        return None

    def accept(
        self,
        preamble: Preamble,
        inbound: Inbound,
        session: Session | None,
        running: Running | None,
        principal: str,
    ) -> Arrival:
        """The decoded message as it arrived.  ``principal`` is who the caller was
        found to be, on this very message (a session never stands in for credentials:
        it was found under this principal)."""
        headers = preamble.headers
        forwarded = {name: headers[name] for name in self.route.forward_headers if name in headers}
        adapter, items = inbound.adapter, inbound.items
        requests = [i for i in items if isinstance(i, Call) and i.id is not None]
        failures = [i for i in items if isinstance(i, DecodeFailure)]
        return Arrival(
            preamble, adapter, items, principal, forwarded, session, running, requests, failures
        )

    def session_room(self, arrival: Arrival) -> Refusal | None:
        """Whether the caller may open the session its ``initialize`` asks for: at its
        own quota it is refused; with the store full, another caller's idle session
        may give way (fair shares, :mod:`gateway.transport.sessions`)."""
        if arrival.session is not None or not arrival.adapter.has_handshake:
            return None
        for call in arrival.requests:
            if call.operation is Operation.INITIALIZE:
                refused = self.sessions.room_for(arrival.principal)
                if refused is not None:
                    return Refusal(arrival.adapter, refused, call.id)
        return None

    def worded(self, preamble: Preamble, failure: Failure) -> Refusal:
        """``failure`` in the revision the parsed message is in (no session here says it)."""
        adapter = self.adapters.select(preamble)
        if isinstance(adapter, Failure):
            return self.refusal(preamble, failure, first_id(preamble.body))
        return Refusal(adapter, failure, first_id(preamble.body))

    def refusal(self, preamble: Preamble, failure: Failure, id_: Any = None) -> Refusal:
        """A failure worded for a message no adapter was picked for yet."""
        return Refusal(reporter(self.adapters, preamble), failure, id_)


def _shallow(body: Any) -> Any:
    """A refused message's top level only (its id, method and ``_meta``, which say how
    to word the refusal), without the nesting no code may walk."""
    if isinstance(body, list):
        return [_shallow(item) for item in body[:1]]
    if not isinstance(body, dict):
        return None
    top = {
        k: v
        for k, v in body.items()
        if k in ("jsonrpc", "id", "method") and not isinstance(v, dict | list)
    }
    params = body.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        meta = params["_meta"]
        top["params"] = {"_meta": {k: v for k, v in meta.items() if not isinstance(v, dict | list)}}
    return top
