"""What happens to a message the pipeline accepted: its session, what needs no
answer, and its calls.

:class:`Runner` answers the handshake and keeps the session (opened, mirrored
upstream, ended), takes the client's replies and notifications, and runs each
call through the route's forwarder as a task the client's
``notifications/cancelled`` can stop: observed, encoded, counted against the
caller's quota.  A message for a session's standalone stream goes out through
:meth:`Runner.deliver`, whatever carries that stream (an SSE stream for HTTP,
stdout for stdio).  How a message is let in (guard, credentials, session,
parse, adapter, decode) is :mod:`gateway.transport.pipeline`'s, which builds on
this class.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.bridge.backend import HELD, Held, Park
from gateway.core import (
    MAY_ASK,
    Call,
    ClientContext,
    ClientReply,
    DecodeFailure,
    Downstream,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Preamble,
    RequestId,
    ServerProfile,
    Value,
    tracing,
)
from gateway.protocol import Adapter, adapter_of
from gateway.transport import passthrough
from gateway.transport.call_record import call_record
from gateway.transport.common import (
    listen_id,
    log_wanted,
    push_asker,
    settle,
    wanted,
)
from gateway.transport.passthrough import abandon
from gateway.transport.reasons import for_client, log_refusal
from gateway.transport.route import Route
from gateway.transport.sessions import Session, SessionStore

log = structlog.get_logger(__name__)

_OK = Value({})  # what the observers are told of a pass-through call's plain result

# Writes one message to a client (an open response, stdout, a session's stream).
Send = Callable[[dict[str, Any]], Awaitable[None]]
# Where a transport puts a message for a session's standalone stream.
Push = Callable[[Session, dict[str, Any]], Awaitable[None]]
# The client's calls in flight by request id: what its notifications/cancelled names.
Running = dict[RequestId, asyncio.Task[Any]]
# How many calls of one batch run at once (the rest wait their turn).
BATCH_CONCURRENCY = 8


@dataclass(slots=True)
class Response:
    """One call's encoded answer (None: nothing to send), its HTTP status and the
    headers a failure carries (an upstream's `WWW-Authenticate`, say)."""

    message: dict[str, Any] | None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Arrival:
    """One decoded message (or batch): who sent it, in which revision, in which session."""

    preamble: Preamble
    adapter: Adapter
    items: list[Call | ClientReply | DecodeFailure]
    principal: str
    forwarded: dict[str, str]
    session: Session | None
    running: Running | None
    # Sorted out once from ``items`` (which never changes): its requests, and what
    # did not decode.
    requests: list[Call] = field(default_factory=list)
    failures: list[DecodeFailure] = field(default_factory=list)
    # The route's last word on a failure (e.g. an upstream 401 pointed at the
    # gateway's own metadata), before it is encoded.
    reword_failure: Callable[[Failure], Failure] | None = None
    # The handshake opened (or renewed) the session.
    opened: bool = False
    _profile: asyncio.Future[ServerProfile] | None = field(default=None, repr=False)


class Runner:
    """The transport-neutral handling of one connection's (or endpoint's) accepted
    messages.

    ``sessions`` is where this transport's sessions live; ``push`` puts a message
    on a session's standalone stream; ``streams_open`` says a new session's
    stream is open from the start (stdout).  With ``answer_cancelled`` a call the
    client cancels still gets an (error) answer, as an HTTP request must: the
    forwarder's task is what ``notifications/cancelled`` stops.  Without, the
    transport puts each call's whole task in ``Arrival.running``: cancelled, it
    ends without an answer, as the spec asks.
    """

    def __init__(
        self,
        route: Route,
        sessions: SessionStore,
        push: Push,
        *,
        streams_open: bool = False,
        answer_cancelled: bool = True,
    ) -> None:
        self.route = route
        self.adapters = route.adapters
        # The route's forwarder, which runs what this transport lets in.
        self.forwarder = route.backend.forwarder
        self.sessions = sessions
        self._push = push
        self.streams_open = streams_open
        self.answer_cancelled = answer_cancelled
        self.tasks: set[asyncio.Task[None]] = set()
        # Of those, the client notifications being passed upstream.
        self.notices: set[asyncio.Task[None]] = set()
        # Open `subscriptions/listen` calls: they last until the client leaves, so a
        # drain ends them (gracefully) rather than wait for them.
        self.listens: set[asyncio.Future[Outcome]] = set()
        self._ending_listens = False

    async def profile(self, arrival: Arrival) -> ServerProfile | Failure:
        """What the upstream offers, asked once per message (a Failure when it is not there)."""
        if arrival._profile is None:
            known = self.route.backend.known
            if known is not None:
                return known  # the usual case: no task to share a lookup
            arrival._profile = asyncio.ensure_future(
                self.route.backend.profile(arrival.principal, arrival.forwarded)
            )
            # Read here even when every call that wanted it was cancelled meanwhile.
            arrival._profile.add_done_callback(_retrieved)
        try:
            return await asyncio.shield(arrival._profile)
        except Failure as failure:
            return failure

    # ----------------------------------------------------------- sessions

    @staticmethod
    def session_adapter(session: Session | None) -> Adapter | None:
        """The adapter of the revision the session negotiated (kept with it)."""
        return adapter_of(session.view) if session is not None else None

    def open_session(
        self,
        adapter: Adapter,
        principal: str,
        capabilities: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
    ) -> Session:
        """A new downstream session (the handshake, or an HTTP+SSE stream opening)."""
        version = adapter.version
        session = self.sessions.create(version, principal, capabilities, info, adapter)
        session.stream_open = self.streams_open
        return session

    def end_session(self, session_id: str) -> bool:
        """The session is over (DELETE, its connection gone): release all it holds."""
        return self.sessions.delete(session_id)

    async def deliver(self, session: Session, message: dict[str, Any]) -> None:
        """A message for the session's standalone stream."""
        await self._push(session, message)

    def stream_opened(self, session: Session, on: bool) -> None:
        """The session's standalone stream opened (or closed): list changes follow it."""
        session.stream_open = on
        hub = self.forwarder.subscriptions
        if hub is not None:
            hub.want_lists(session.id, on)

    async def handshake(self, arrival: Arrival) -> bool:
        """Answer-side of ``initialize``: a new session (or the session renewed), which
        then hears the upstream's change notifications.  False when there was none
        (no initialize, or an upstream that cannot be reached)."""
        done = False
        for call in arrival.requests:
            if call.operation is not Operation.INITIALIZE:
                continue
            profile = await self.profile(arrival)
            if isinstance(profile, Failure):
                continue  # the call's answer says why; no session for it
            session = arrival.session
            client = call.client
            if session is None:
                session = self.open_session(
                    arrival.adapter, arrival.principal, client.capabilities, client.info
                )
                arrival.session = session
            else:
                session.view.protocol_version = arrival.adapter.version
                session.view.adapter = arrival.adapter
                session.view.capabilities = dict(client.capabilities)
                session.view.info = client.info
            self._mirror(arrival, session, call, profile)
            self._join(arrival, session, profile, client)
            done = True
        return done

    def _mirror(
        self, arrival: Arrival, session: Session, call: Call, profile: ServerProfile
    ) -> None:
        """The session as the upstream side sees it: what the upstream sends outside any
        call reaches this client on its standalone stream; when the session ends, its
        upstream session ends too."""
        if session.downstream is not None:
            return

        async def write(message: dict[str, Any]) -> None:
            await self.deliver(session, message)

        async def notify(event: Event) -> None:
            adapter = self.session_adapter(session)
            if event.method == "notifications/message" and not log_wanted(
                event, session.view.log_level, True
            ):
                return
            message = adapter.encode_event(event) if adapter is not None else None
            if message is not None:
                await write(message)

        adapter = arrival.adapter
        session.downstream = Downstream(
            session.id,
            push_asker(adapter, session, write, self.route.ask_timeout),
            notify,
            carries_asks=adapter.asks_in_arguments,
        )
        ending = self._exchange(arrival, profile, call, None)
        forwarder = self.forwarder

        def end() -> None:
            self.spawn(forwarder.end_session(ending))

        session.on_end(end)

    def _join(
        self, arrival: Arrival, session: Session, profile: ServerProfile, client: ClientContext
    ) -> None:
        """The session hears the upstream's change notifications (in its own revision,
        on its standalone stream while that is open) until it ends."""
        hub = self.forwarder.subscriptions
        if hub is None:
            return

        async def sink(event: Event) -> None:
            adapter = self.session_adapter(session)
            message = adapter.encode_event(event) if adapter is not None else None
            if message is not None and session.stream_open:
                await self.deliver(session, message)

        fresh = session.id not in hub
        hub.join(
            session.id,
            arrival.principal,
            sink,
            profile,
            client=client,
            headers=arrival.forwarded,
            route=self.route.path,
            lists=session.stream_open,
            downstream=session.downstream,
        )
        if fresh:
            session.on_end(lambda: hub.leave(session.id, upstream_gone=True))

    # --------------------------------------------- replies, notifications

    def take_replies_and_notices(self, arrival: Arrival, send: Send | None) -> None:
        """What needs no answer: the client's replies to our asks and its notifications."""
        session = arrival.session
        for item in arrival.items:
            if isinstance(item, ClientReply):
                if session is None or not session.resolve(item.id, item.answer):
                    log.info("dropping a reply to no pending request", id=item.id)
            elif isinstance(item, Call) and item.id is None:
                if item.operation is Operation.INITIALIZED:
                    continue  # the handshake's end: the upstream session has its own
                if item.operation is Operation.CANCELLED:
                    self.cancel(arrival.running, item.params.get("requestId"))
                elif self.route.notices.acquire(arrival.principal) is None:
                    self.notices.add(self.spawn(self._notify(arrival, item, send)))
                else:
                    log.info("notification dropped: too many in progress", method=item.method)

    @staticmethod
    def cancel(running: Running | None, request_id: Any) -> bool:
        """The client cancelled one of its requests: stop working on it."""
        task = running.get(request_id) if running is not None else None
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def _notify(self, arrival: Arrival, call: Call, send: Send | None) -> None:
        try:
            profile = await self.profile(arrival)
            if isinstance(profile, Failure):
                log.info("notification not forwarded", method=call.method, error=profile.message)
                return
            await self.forwarder.handle(call, self._exchange(arrival, profile, call, send))
        except Exception:  # a notification has nobody to tell; log and move on
            log.exception("notification failed", method=call.method)
        finally:
            self.route.notices.release(arrival.principal)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Background work the transport does not wait for (counted for the drain)."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.notices.discard(task)

    def owed(self) -> set[asyncio.Task[None]]:
        """Background work that owes a client an answer (a drain waits for it): not
        the notifications being passed upstream, which owe nobody anything and are
        cancelled when the endpoint closes."""
        return {task for task in self.tasks if not task.done() and task not in self.notices}

    # -------------------------------------------------------------- calls

    async def run(self, arrival: Arrival, call: Call, send: Send | None) -> Response:
        """Run one call and encode its outcome; its events and asks go to ``send``
        (None: the session's standalone stream).  Counted against the caller's
        quota of calls in flight: over it, the call is refused, not queued."""
        calls = self.route.calls
        refused = calls.acquire(arrival.principal)
        if refused is not None:
            adapter = arrival.adapter
            message = adapter.encode_failure(call.id, refused, call.operation)
            log_refusal(self.route.path, adapter.http_status(refused), refused)
            return Response(message, adapter.http_status(refused))
        prepared: Exchange | None = None
        try:
            if tracing.active is not None:  # OpenTelemetry on: the call as a server span
                return await tracing.active.serve(self._run, self.route, arrival, call, send)
            if passthrough.qualifies(self.route, arrival.adapter, call):
                passed = await self._pass(arrival, call, send)
                if isinstance(passed, Response):
                    return passed
                prepared = passed
            return await self._run(arrival, call, send, prepared)
        finally:
            calls.release(arrival.principal)
            held = prepared.extra.get(HELD) if prepared is not None else None
            if isinstance(held, Held):
                await held.abandon()  # if the full path never took it

    async def _pass(
        self, arrival: Arrival, call: Call, send: Send | None
    ) -> Response | Exchange | None:
        """The pass-through lane (transport/passthrough.py): the call's answer, or the
        exchange whose held reply the full path reads on; None: nothing was sent.  The
        exchange is the full path's own: a question the upstream asks off the call's
        stream while the lane waits reaches the client as it would there."""
        started = time.perf_counter()
        profile = await self.profile(arrival)
        if isinstance(profile, Failure) or not passthrough.pair(
            self.adapters, arrival.adapter, profile.version
        ):
            return None  # the upstream's revision is not one the lane carries to
        exchange = self._exchange(arrival, profile, call, send)
        if not self._may_pass(arrival.adapter, call, exchange, profile):
            return None  # what the full path checks first is its own
        sending = self.route.backend.pass_through(call, arrival.adapter.version, exchange)
        running = arrival.running if self.answer_cancelled else None
        sent: dict[str, Any] | Held | Outcome | Park | None
        if running is None or call.id is None:
            sent = await settle(sending)
        else:  # a task the client's cancellation can stop, as the full path's call is
            task = asyncio.ensure_future(sending)
            running[call.id] = task
            try:
                sent = await settle(task)
            except asyncio.CancelledError:  # the request went away as the lane finished
                await abandon(task)
                raise
            finally:
                if running.get(call.id) is task:
                    del running[call.id]
        if sent is None:
            return None
        if isinstance(sent, Park):  # its server may ask off the call's stream: sent when parked
            return await self._pass_parked(arrival, call, send, exchange)
        if isinstance(sent, Value):  # read for a client of another revision
            return self._passed(arrival, call, profile, sent, started)
        if isinstance(sent, Failure):  # cancelled by the client, or a fault
            return await self._run(arrival, call, send, exchange, settled=sent, at=started)
        if isinstance(sent, Held):
            exchange.extra[HELD] = sent
            return exchange
        if self.route.observer is not None:
            self._observe(call, arrival.adapter, profile, _OK, started, passed=True)
        return Response(arrival.adapter.encode_verbatim(call, sent), 200, {})

    def _may_pass(
        self, client: Adapter, call: Call, exchange: Exchange, profile: ServerProfile
    ) -> bool:
        """A stateless client's call to a handshake-era upstream only where the full
        path would park it at once (one that may ask: Forwarder.park)."""
        if client.has_handshake or not self.adapters.names_handshake(profile.version):
            return True
        return call.operation in MAY_ASK and exchange.can_park

    async def _pass_parked(
        self, arrival: Arrival, call: Call, send: Send | None, exchange: Exchange
    ) -> Response:
        """A call the full path would park, parked at once, sent by the lane from the
        parked call's task (a question off its stream meanwhile is its, as there)."""
        started = time.perf_counter()
        backend, version = self.route.backend, arrival.adapter.version
        passed = False

        async def lane(inner: Exchange) -> object:
            nonlocal passed
            sent = await backend.pass_through(call, version, inner)
            passed = isinstance(sent, Value)
            return sent

        parking = self.forwarder.park(call, exchange, lane)
        outcome = await self._handle(arrival, call, exchange, parking)
        if passed and isinstance(outcome, Value):
            return self._passed(arrival, call, exchange.profile, outcome, started)
        return await self._run(arrival, call, send, exchange, settled=outcome, at=started)

    def _passed(
        self, arrival: Arrival, call: Call, profile: ServerProfile, value: Value, at: float
    ) -> Response:
        """A plain result the lane brought for a client of another revision: encoded
        by the client's adapter, as the full path encodes it."""
        if self.route.observer is not None:
            self._observe(call, arrival.adapter, profile, value, at, passed=True)
        return Response(arrival.adapter.encode(call, profile, value), 200, {})

    async def _run(
        self,
        arrival: Arrival,
        call: Call,
        send: Send | None,
        prepared: Exchange | None = None,
        settled: Outcome | None = None,
        at: float | None = None,
    ) -> Response:
        """The full path; ``prepared``: the exchange the pass-through lane sent on,
        ``settled``: the outcome it came to that is not the upstream's answer, ``at``:
        when the lane began it (its duration is the whole call's)."""
        started = time.perf_counter() if at is None else at
        adapter = arrival.adapter
        outcome: Outcome
        profile = await self.profile(arrival)
        if isinstance(profile, Failure):
            outcome, profile = profile, ServerProfile()
        elif settled is not None:
            outcome = settled
        else:
            exchange = prepared or self._exchange(arrival, profile, call, send)
            policy = self.route.policy
            if policy is not None:  # exposure and rate limits, then the call (or its pages)
                handle = functools.partial(self._handle, arrival, exchange=exchange)
                charged = not self._continues(call, arrival.principal)
                outcome = await policy.run(call, arrival.principal, handle, charged=charged)
            else:
                outcome = await self._handle(arrival, call, exchange)
        if isinstance(outcome, Failure) and arrival.reword_failure is not None:
            outcome = arrival.reword_failure(outcome)
        gone = isinstance(outcome, Failure) and outcome.kind is FailureKind.SESSION_NOT_FOUND
        if gone and arrival.session is not None:  # its upstream side is gone: so is it
            self.end_session(arrival.session.id)
        detail = outcome.message if isinstance(outcome, Failure) else None
        if isinstance(outcome, Failure):  # the upstream's internals stay in the log
            outcome = for_client(outcome, self.route.path, self.route.backend.hidden)
        if self.route.observer is not None:
            self._observe(call, adapter, profile, outcome, started, detail)
        message = adapter.encode(call, profile, outcome)
        tap = self.route.console
        if tap is not None:
            tap(call, adapter.version, arrival.principal, profile, outcome, message, started)
        if isinstance(outcome, Failure) and not adapter.failure_is_result(outcome, call.operation):
            return Response(message, adapter.http_status(outcome), dict(outcome.headers))
        return Response(message, 200, {})

    def _continues(self, call: Call, principal: str) -> bool:
        """Whether ``call`` answers a round of a call already charged to ``principal``
        (its requestState sealed here, for this call, and good for one use): not a
        new call for rate limits.  A parked call's round is resumed once at most (a
        replay is refused before any upstream work); a carried or restarted one only
        where a ledger spends each state once (a cluster).  A state the gateway did
        not seal cannot be told from a new call: charged."""
        sealer = self.route.backend.forwarder.sealer
        if call.state is None or not sealer.is_ours(call.state):
            return False
        try:
            claims = sealer.open(call.state, call, self.route.path, principal)
        except Failure:
            return False
        return claims.get("k") == "parked" or sealer.ledger is not None

    def _observe(
        self,
        call: Call,
        adapter: Adapter,
        profile: ServerProfile,
        outcome: Outcome,
        at: float,
        detail: str | None = None,
        passed: bool = False,
    ) -> None:
        """Tell the route's observers (log, metrics) about one finished call."""
        if self.route.observer is None:
            return
        fallback = None if profile.versions else self.route.backend.upstream_revision
        record = call_record(self.route.path, call, adapter.version, profile, outcome, at, fallback)
        if detail is not None:  # why it failed, in full (the client hears a short reason)
            record["reason"] = detail
        if passed:  # answered by the pass-through lane (transport/passthrough.py)
            record["pass_through"] = True
        self.route.observer.observe(record)

    async def run_all(
        self, arrival: Arrival, calls: list[Call], send: Send | None
    ) -> list[dict[str, Any]]:
        """A batch's calls, a few at a time (``BATCH_CONCURRENCY``); answers in order."""
        gate = asyncio.Semaphore(BATCH_CONCURRENCY)

        async def one(call: Call) -> Response:
            async with gate:
                return await self.run(arrival, call, send)

        replies = await asyncio.gather(*(one(call) for call in calls))
        return [reply.message for reply in replies if reply.message is not None]

    async def _handle(
        self,
        arrival: Arrival,
        call: Call,
        exchange: Exchange,
        work: Coroutine[Any, Any, Outcome] | None = None,
    ) -> Outcome:
        """Run the call (``work``: this way of running it) as a task of its own, which
        the client's cancellation can stop (where a cancelled call is still answered;
        elsewhere the transport registers the whole call's task, see :class:`Pipeline`)."""
        running = arrival.running if self.answer_cancelled else None
        listen = call.operation is Operation.LISTEN
        if work is None:
            work = self.forwarder.handle(call, exchange)
        if not listen and (running is None or call.id is None):
            # Nothing can cancel it on its own: no task of its own either.
            return await settle(work)
        task = asyncio.ensure_future(work)
        if running is not None and call.id is not None:
            running[call.id] = task
        if listen:
            self.listens.add(task)
            if self._ending_listens:
                task.cancel()
        try:
            return await settle(task, graceful=self._listen_ended if listen else None)
        finally:
            self.listens.discard(task)
            if running is not None and call.id is not None and running.get(call.id) is task:
                del running[call.id]

    def _listen_ended(self) -> bool:
        return self._ending_listens

    def end_listens(self) -> None:
        """End every open listen (and any that arrives later) with its final answer."""
        self._ending_listens = True
        for task in list(self.listens):
            task.cancel()

    def _exchange(
        self, arrival: Arrival, profile: ServerProfile, call: Call, send: Send | None
    ) -> Exchange:
        adapter = arrival.adapter
        # A stateless revision has no session, whatever the transport keeps.
        session = arrival.session if adapter.has_handshake else None
        view = session.view if session is not None else None

        async def write(message: dict[str, Any]) -> None:
            if send is not None:
                await send(message)
            elif session is not None:
                await self.deliver(session, message)

        async def emit(event: Event) -> None:
            if not wanted(event, call, view):
                return
            message = adapter.encode_event(event, listen_id(call))
            if message is not None:
                await write(message)

        asker = None
        if session is not None and (send is not None or session.stream_open):
            asker = push_asker(adapter, session, write, self.route.ask_timeout)

        return Exchange(
            call=call,
            route=self.route.path,
            profile=profile,
            principal=arrival.principal,
            forward_headers=arrival.forwarded,
            emit=emit,
            ask=asker,
            can_park=adapter.carries_state,
            session=view,
            downstream=session.downstream if session is not None else None,
        )

    async def close(self) -> None:
        """Stop the background work and end every session."""
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.sessions.close_all()


def _retrieved(future: asyncio.Future[ServerProfile]) -> None:
    if not future.cancelled():
        future.exception()
