"""The forwarder: runs a normalized Call against a route's upstream.

Revision-free: it branches on what a call is (its Operation) and on what the
client's revision can carry (the Exchange says: pushed asks, carried state),
never on a version.  Some operations are the gateway's own business (the
handshake, ping, discovery, log level); the rest run upstream in the
upstream's revision.  Asks cross eras here:

- a client that takes pushed asks answers them inline, and a stateless
  upstream's `input_required` is walked through for it, round by round;
- a client that carries state (stateless clients, and revisions that carry
  asks in arguments) gets `input_required`; a handshake-era upstream's call is
  parked meanwhile and resumed by the retry, found again by the sealed state.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Protocol

import orjson

from gateway.bridge.parked_calls import Lane, ParkedCalls, missing
from gateway.bridge.rounds import ParkingTable
from gateway.bridge.sharedcache import (
    MAX_SHARED_BYTES,
    SHARED_LISTS,
    SharedResults,
    cache_key,
    load,
    public_ttl_ms,
)
from gateway.bridge.state import StateSealer
from gateway.bridge.subscriptions import SubscriptionHub, SubscriptionUpstream
from gateway.bridge.tasks import TaskBridge
from gateway.core import (
    MAY_ASK,
    Answer,
    Call,
    Exchange,
    Failure,
    FailureKind,
    InputRequired,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.protocol import Adapter, AdapterSet, adapter_of
from gateway.upstream.calls import QUESTIONS_AT_ONCE, QUESTIONS_PER_CALL

# What belongs to the client's session rather than to any one call.
SESSION_OPERATIONS = frozenset(
    {
        Operation.INITIALIZE,
        Operation.INITIALIZED,
        Operation.SET_LOG_LEVEL,
        Operation.PROGRESS,
        Operation.ROOTS_LIST_CHANGED,
    }
)
# Bridged across eras where the upstream's differ (subscriptions and listens).
SUBSCRIBING = frozenset(
    {Operation.RESOURCES_SUBSCRIBE, Operation.RESOURCES_UNSUBSCRIBE, Operation.LISTEN}
)
# How long to wait for another ask once one arrived, so that questions a server asks
# together reach a stateless client as one round (seconds).
DEFAULT_ASK_SETTLE = 0.05
# Rounds of input_required a pushed-ask client is walked through before giving up.
MAX_ASK_ROUNDS = 8
# How long a parked call (and its sealed requestState) lives, in seconds, unless the
# constructor is told otherwise (the settings' `park_ttl`).
DEFAULT_PARK_TTL = 600.0


class Upstream(Protocol):
    """What the forwarder needs of an upstream link."""

    async def handle(self, call: Call, exchange: Exchange) -> Outcome: ...

    @property
    def stateless(self) -> bool: ...

    async def declared_headers(
        self, call: Call, exchange: Exchange
    ) -> dict[tuple[str, ...], str] | None:
        """The header parameters of the tool ``call`` names, as the upstream lists it to
        the caller (None: the tool is not known)."""

    async def open(self, exchange: Exchange) -> Failure | None:
        """A client session begins: open its own upstream session."""

    async def end(self, exchange: Exchange) -> None:
        """A client session ended: end its upstream session."""

    async def notify(self, call: Call, exchange: Exchange) -> None:
        """A client notification for its own upstream session."""


class Forwarder:
    """Handles the calls of one route."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        adapters: AdapterSet | None = None,
        sealer: StateSealer | None = None,
        parking: ParkingTable | None = None,
        park_ttl: float = DEFAULT_PARK_TTL,
        ask_settle: float = DEFAULT_ASK_SETTLE,
        questions: tuple[int, int] = (QUESTIONS_AT_ONCE, QUESTIONS_PER_CALL),
    ) -> None:
        self.upstream = upstream
        self.ask_settle = ask_settle
        # A stateless upstream's questions one call may put to a client that takes
        # pushed asks: in one round, and in all (the route's questions_* bounds).
        self.questions_at_once, self.questions_per_call = questions
        # The revisions the route speaks: the client's adapter answers what the
        # gateway answers itself (the handshake, discovery, tasks).
        self.adapters = adapters or AdapterSet.default()
        self.stateless_versions = [a.version for a in self.adapters.stateless]
        self.sealer = sealer or StateSealer(ttl=park_ttl)
        # (`is None`: an empty table is falsy, and a given table must not be replaced.)
        self.parking = parking if parking is not None else ParkingTable(ttl=self.sealer.ttl)
        # Handshake-era upstreams' calls, parked while a stateless client answers.
        self.parked = ParkedCalls(upstream, self.parking, self.sealer, ask_settle)
        # Change notifications across eras (for links that can carry them).
        self.subscriptions: SubscriptionHub | None = (
            SubscriptionHub(upstream, adapters=self.adapters)
            if isinstance(upstream, SubscriptionUpstream)
            else None
        )
        # Extension tasks of clients that declare them, run as the upstream's core tasks.
        self.tasks = TaskBridge(upstream, self.adapters, owner=self.sealer.owner)
        # Public list results shared by a cluster's replicas (None: not in a cluster).
        self.shared: SharedResults | None = None

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        op = call.operation
        if op is Operation.PING:
            return Value({})  # answered here: a stateless upstream has no ping
        if op in SESSION_OPERATIONS:
            return await self._session_operation(call, exchange)
        if op is Operation.DISCOVER:
            return self._discover(call, exchange.profile)
        if op is Operation.CANCELLED:
            return Value({})  # cancellation reaches the upstream through the closed call
        if call.id is None:  # a notification
            return await self._notification(call, exchange)
        if op in SUBSCRIBING:
            bridged = await self._subscribing(call, exchange)
            if bridged is not None:
                return bridged
        if call.param_headers is not None:
            refused = await self._check_param_headers(call, exchange)
            if refused is not None:
                return refused
        if call.state is not None and self._sealed_here(call.state):
            return await self._retry(call, exchange)
        if call.state is not None and not self.upstream.stateless:
            # A handshake-era upstream has no state of its own: a requestState the
            # gateway did not seal belongs to nothing here (rerunning the tool would
            # drop the client's answers).
            return Failure(
                FailureKind.INVALID_PARAMS,
                "requestState was not issued by this gateway; call again without it",
            )
        if call.client.tasks and self.tasks.applies(call, exchange.profile):
            if op is Operation.TASKS_GET:
                return await self.tasks.get(call, exchange)
            if op is Operation.TASKS_CANCEL:
                return await self.tasks.cancel(call, exchange)
            if op is Operation.TASKS_UPDATE:
                return await self.tasks.update(call, exchange)
            if op is Operation.TOOLS_CALL:
                task = await self.tasks.call_tool(call, exchange)
                if task is not None:
                    return task
        if op in MAY_ASK and exchange.can_park and not self.upstream.stateless:
            return await self.parked.handle(call, exchange)
        if op in SHARED_LISTS and self.shared is not None:
            return await self._shared_list(call, exchange, self.shared)
        return await self._forward(call, exchange)

    async def park(self, call: Call, exchange: Exchange, lane: Lane) -> Outcome:
        """A call :meth:`handle` would park, as the pass-through lane found it (a
        stateless client's that may ask, to a handshake-era upstream, with no state,
        answers or task): its headers checked as there, then parked, its upstream call
        begun by ``lane`` (bridge/parked_calls.py)."""
        if call.param_headers is not None:
            refused = await self._check_param_headers(call, exchange)
            if refused is not None:
                return refused
        return await self.parked.handle(call, exchange, lane)

    async def _subscribing(self, call: Call, exchange: Exchange) -> Outcome | None:
        """Subscriptions and listens, bridged across eras where the upstream's differ
        (None: the upstream takes the call as it is)."""
        op, hub, stateless = call.operation, self.subscriptions, self.upstream.stateless
        if op is Operation.LISTEN:
            if stateless:
                return None
            if hub is None:
                return Failure(
                    FailureKind.UNKNOWN_METHOD,
                    f"{call.method} is not bridged to this upstream's protocol era",
                )
            return await hub.listen(call, exchange)
        session = exchange.session
        if hub is not None and session is not None and session.id in hub:
            if op is Operation.RESOURCES_SUBSCRIBE:
                return await hub.subscribe(session.id, call, exchange)
            return await hub.unsubscribe(session.id, call, exchange)
        if stateless:
            return Failure(
                FailureKind.UNKNOWN_METHOD,
                f"{call.method} needs a session with a stream to deliver updates on",
            )
        return None

    async def _check_param_headers(self, call: Call, exchange: Exchange) -> Failure | None:
        """A tools/call's mirrored argument headers, checked against the tool as the
        upstream lists it to this caller.  Checked here, not only upstream: the gateway
        mints the upstream's headers from the arguments, so a client's wrong header
        would otherwise pass unseen."""
        declared = await self.upstream.declared_headers(call, exchange)
        if not declared:
            return None  # nothing to check against: the upstream answers the call
        adapter = adapter_of(call.client)
        if adapter is None:
            return None
        arguments = call.params.get("arguments")
        return adapter.check_declared_headers(declared, arguments, call.param_headers)

    async def _shared_list(self, call: Call, exchange: Exchange, shared: SharedResults) -> Outcome:
        """A list from the cluster's shared results if a replica fetched it within its
        ttlMs; else from the upstream, and shared if it is public."""
        key = cache_key(call)
        try:
            cached = load(await shared.get(key))
        except Exception:  # the store is down: ask the upstream, as without a cluster
            cached = None
        if cached is not None:
            return Value(cached)
        outcome = await self._forward(call, exchange)
        if isinstance(outcome, Value):
            ttl = public_ttl_ms(outcome.result, exchange.profile)
            raw = orjson.dumps(outcome.result) if ttl else b""
            if ttl and len(raw) <= MAX_SHARED_BYTES:
                with contextlib.suppress(Exception):  # sharing is a saving, never a failure
                    await shared.put(key, raw, ttl)
        return outcome

    # ------------------------------------------------- the client's session

    def _mirrored(self, exchange: Exchange) -> bool:
        """Whether the client's session has an upstream session of its own."""
        return exchange.downstream is not None and not self.upstream.stateless

    async def _session_operation(self, call: Call, exchange: Exchange) -> Outcome:
        """The handshake, the log level and the session's notifications: the gateway
        keeps the client's session; a session's own upstream session hears them too."""
        op = call.operation
        if op is Operation.INITIALIZE:
            failure = await self.upstream.open(exchange) if self._mirrored(exchange) else None
            return failure or self._initialize(call, exchange.profile)
        if op is Operation.SET_LOG_LEVEL:
            if exchange.session is not None:
                exchange.session.log_level = str(call.params.get("level"))
            if self._mirrored(exchange) and "logging" in exchange.profile.capabilities:
                return await self.upstream.handle(call, exchange)
            return Value({})
        if op is Operation.ROOTS_LIST_CHANGED and not self.upstream.stateless:
            # The client's own upstream session (or its pool) asks for the roots again.
            await self.upstream.notify(call, exchange)
        return Value({})  # initialized, progress: the gateway's own session's business

    async def _notification(self, call: Call, exchange: Exchange) -> Outcome:
        """A notification the gateway has no use for (a vendor's) goes to the client's
        upstream session as one; a stateless upstream has nowhere to take it.  Never
        as a request: nothing would answer it, and its wait would hold a slot."""
        if not self.upstream.stateless:
            await self.upstream.notify(call, exchange)
        return Value({})

    async def end_session(self, exchange: Exchange) -> None:
        """The client's session ended: so does its own upstream session."""
        if self._mirrored(exchange):
            await self.upstream.end(exchange)

    # ------------------------------------------------- stateless upstreams

    async def _forward(self, call: Call, exchange: Exchange) -> Outcome:
        outcome = await self.upstream.handle(call, exchange)
        rounds = asked = 0
        while isinstance(outcome, InputRequired):
            rounds += 1
            asked += len(outcome.asks)
            if rounds > MAX_ASK_ROUNDS:
                return Failure(
                    FailureKind.UPSTREAM_PROTOCOL,
                    f"the upstream asked for input more than {MAX_ASK_ROUNDS} times",
                )
            flooded = self._flooded(outcome, asked, exchange)
            if flooded is not None:
                return flooded
            answers = await self._push_all(call, exchange, outcome)
            if answers is None:
                return self._hand_over(call, exchange, outcome)
            call = replace(call, answers=answers, state=outcome.state)
            outcome = await self.upstream.handle(call, exchange)
        return outcome

    def _flooded(self, outcome: InputRequired, asked: int, exchange: Exchange) -> Failure | None:
        """Past the route's bounds, a stateless upstream's questions are not pushed to
        a client (one answered by pushes): the call fails at once, naming the bound.
        A client that answers in its own retry gets them handed over as they are."""
        if exchange.ask is None:
            return None
        if len(outcome.asks) > self.questions_at_once:
            at_once = self.questions_at_once
            bound = f"{len(outcome.asks)} questions at once (questions_at_once={at_once})"
        elif asked > self.questions_per_call:
            bound = f"over {self.questions_per_call} questions in one call (questions_per_call)"
        else:
            return None
        return Failure(FailureKind.UPSTREAM_PROTOCOL, f"the upstream asked {bound}")

    async def _push_all(
        self, call: Call, exchange: Exchange, outcome: InputRequired
    ) -> dict[str, Answer] | None:
        """Answers to every ask from a client that takes pushed asks; None if it cannot."""
        if not outcome.asks:
            return None if exchange.ask is None else {}  # state only: retry at once
        if exchange.ask is None:
            return None
        answers: dict[str, Answer] = {}
        for key, ask in outcome.asks.items():
            if not ask.allowed_by(call.client.capabilities):
                raise missing(ask)
            answer = await exchange.ask(ask)
            if answer is None:
                return None
            answers[key] = answer
        return answers

    def _hand_over(self, call: Call, exchange: Exchange, outcome: InputRequired) -> Outcome:
        """The client answers in its own next request: give it the asks and the state."""
        for ask in outcome.asks.values():
            if not ask.allowed_by(call.client.capabilities):
                return missing(ask)
        if not exchange.can_park:
            asks = ", ".join(sorted({a.method for a in outcome.asks.values()})) or "input"
            return Failure(
                FailureKind.MISSING_CAPABILITY,
                f"the server needs {asks}, which this client cannot provide",
            )
        if outcome.state is None or exchange.ask is None:
            return outcome  # a stateless client of a stateless upstream: as it is
        sealed = self.sealer.seal(
            call, exchange.route, exchange.principal, {"k": "carried", "u": outcome.state}
        )
        return replace(outcome, state=sealed)

    # ----------------------------------------------- handshake-era upstreams

    def _sealed_here(self, state: str) -> bool:
        """Whether a requestState is this gateway's to open.  In front of a stateless
        upstream only a state whose seal verifies is: any other, however it looks,
        is the upstream's own and goes back to it unchanged (it judges its states;
        a client forging one gains nothing it could not send without the gateway).
        A handshake-era upstream has no states: a gateway-shaped one that does not
        verify is refused as tampered."""
        if not StateSealer.is_ours(state):
            return False
        return not self.upstream.stateless or self.sealer.peek(state) is not None

    async def _retry(self, call: Call, exchange: Exchange) -> Outcome:
        assert call.state is not None
        try:
            claims = await self.sealer.open_once(
                call.state, call, exchange.route, exchange.principal
            )
        except Failure as failure:
            return failure
        if claims.get("k") == "carried":
            # A stateless upstream's own state, carried through a client that
            # could not carry it unsealed: hand it back as it was.
            retried = replace(call, state=claims.get("u"))
            return await self._forward(retried, exchange)
        return await self.parked.resume(call, exchange, claims)

    # ------------------------------------------------------------ answers

    def client_adapter(self, call: Call) -> Adapter | Failure:
        """The adapter that decoded the call (it travels with the call's client)."""
        adapter = adapter_of(call.client)
        if adapter is None:
            return Failure(
                FailureKind.INTERNAL,
                f"no adapter decoded this call (revision {call.client.protocol_version})",
            )
        return adapter

    def _initialize(self, call: Call, profile: ServerProfile) -> Outcome:
        adapter = self.client_adapter(call)
        if isinstance(adapter, Failure):
            return adapter
        return Value(adapter.initialize_result(profile, call.client.protocol_version))

    def _discover(self, call: Call, profile: ServerProfile) -> Outcome:
        adapter = self.client_adapter(call)
        if isinstance(adapter, Failure):
            return adapter
        tasks = self.tasks.bridged(profile)
        return Value(adapter.discover_result(profile, list(self.stateless_versions), tasks=tasks))

    @property
    def parked_count(self) -> int:
        return len(self.parking)

    async def close(self) -> None:
        await self.parking.close()
        await self.tasks.close()
        if self.subscriptions is not None:
            await self.subscriptions.close()
