"""The handshake-era upstream sessions of one route: opening, keeping, ending.

A session mirrors what its client would have had directly: a client with a
session of its own (any handshake-era revision) gets an upstream session of
its own, opened with its capabilities and ``clientInfo`` and ended when its
own ends; stateless clients share capability-true pools, one per principal
and declared capabilities.  The pool keys sessions by an opaque string the
link computes; one lock per key makes sure a key never gets two sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from typing import Any

import aiohttp
import structlog

from gateway.core import (
    Answer,
    AskKind,
    Call,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
)
from gateway.core import jsonrpc as rpc
from gateway.core.keylocks import KeyedLocks
from gateway.protocol import Adapter, AdapterSet
from gateway.protocol.models import LOG_LEVELS
from gateway.upstream.calls import Calls, listen_named, quiet, roundtrip
from gateway.upstream.carriers.base import Carrier, CarrierError, start_carrier
from gateway.upstream.carriers.crashes import Crashes
from gateway.upstream.carriers.legacy_sse import LegacySseCarrier
from gateway.upstream.carriers.stdio import StdioCarrier
from gateway.upstream.open_session import UpstreamSession
from gateway.upstream.passthrough import HELD
from gateway.upstream.poolcounts import PoolCounts
from gateway.upstream.roots import ROOTED, answering_roots, roots_digest, taking_roots
from gateway.upstream.settings import UpstreamSettings
from gateway.upstream.unsolicited import Unsolicited

log = structlog.get_logger(__name__)

SessionCallback = Callable[[str], Coroutine[Any, Any, None]]
# Pools (stateless clients' shared sessions) one principal may hold at once, and
# all principals together: the least recently used idle one (the principal's own,
# then anyone's) is ended to make room; with none idle, the new one is refused.
# The bound in all is above what the route's other quotas let be busy at once
# (calls in flight, parked calls, open streams: 2,000 + 1,000 + 1,000 by default),
# so a flood of callers meets those first, and an idle pool is always found to end.
MAX_POOLS_PER_PRINCIPAL = 16
MAX_POOLS = 4096
# A pool nobody has used for this long is ended (seconds); the next call re-opens it.
POOL_IDLE = 600.0
# Expired pools a sweep ends at once: thousands expiring together must not open as
# many upstream connections (each end is a DELETE) and descriptors in one burst.
ENDING_AT_ONCE = 8
# How long a new session's first call waits for the session's own stream (seconds).
LISTEN_OPEN_WAIT = 2.0
# How long ending a session waits for the cancel notices sent before it (seconds).
NOTICE_GRACE = 2.0

SHARED_KEY = "stdio"  # the one session of a route whose stdio child all callers share


def _busy(kind: FailureKind, limit: int) -> Failure:
    """Every shared upstream session in the way of a new one is in use."""
    whose = "this caller's" if kind is FailureKind.QUOTA_EXCEEDED else "the gateway's"
    return Failure(
        kind,
        f"all {limit} of {whose} shared upstream sessions are busy; try again later",
        {"quota": "shared upstream sessions", "limit": limit},
    )


def _asks_roots(message: dict[str, Any]) -> bool:
    return message.get("method") == AskKind.LIST_ROOTS.method


def _ended() -> Failure:
    return Failure(FailureKind.SESSION_NOT_FOUND, "the client's session has ended")


class SessionPool:
    """The open sessions, by key; safe for many concurrent calls."""

    def __init__(
        self,
        settings: UpstreamSettings,
        adapters: AdapterSet,
        http: aiohttp.ClientSession,
        carriers: tuple[Carrier, Carrier],
        calls: Calls,
    ) -> None:
        self.settings = settings
        self.adapters = adapters
        self._http = http
        # The route's carrier (Streamable HTTP or its stdio child), and Streamable HTTP.
        self._primary, self._streamable = carriers
        self._calls = calls
        self.crashes: Crashes | None = None  # the route's stdio command's (its link's)
        self._sessions: OrderedDict[str, UpstreamSession] = OrderedDict()
        self._counts = PoolCounts()  # the pools among them, by principal
        self._locks: KeyedLocks[str] = KeyedLocks()
        # Pools being opened, per principal: counted against the bounds meanwhile.
        self._opening: Counter[str] = Counter()
        self._sweeper: asyncio.TimerHandle | None = None
        # Whether someone still listens through a pool (its notifications): not idle.
        self.watched: Callable[[str], bool] = lambda key: False
        # The level each key's client last set: a re-opened session gets it again.
        self._levels: dict[str, str] = {}
        self.unsolicited = Unsolicited(calls, settings.url)
        self.on_session: SessionCallback | None = None
        self._profile: ServerProfile | None = None
        # Keys of roots-free pools with a call that may ask running (see claim).
        self._claims: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._sessions)

    def find(self, key: str) -> UpstreamSession | None:
        return self._sessions.get(key)

    def _shared(self, profile: ServerProfile) -> ServerProfile:
        """The profile the last session opened got, when this one's is the same (an
        upstream tells every session the same): one copy for thousands of sessions."""
        if profile != self._profile:
            self._profile = profile
        return self._profile

    def adopt(self, key: str, session: UpstreamSession) -> None:
        """Keep a session opened elsewhere (by the era probe) under ``key``."""
        session.key = key
        self._keep(key, session)

    def _keep(self, key: str, session: UpstreamSession) -> None:
        self._unkeep(key)
        self._sessions[key] = session
        if self._is_pool(session):
            self._counts.add(session.principal)

    def _unkeep(self, key: str) -> UpstreamSession | None:
        session = self._sessions.pop(key, None)
        if session is not None and self._is_pool(session):
            self._counts.remove(session.principal)
        return session

    @staticmethod
    def _is_pool(session: UpstreamSession) -> bool:
        return session.downstream is None and session.key != SHARED_KEY

    async def get(
        self,
        key: str,
        exchange: Exchange,
        transport: str,
        adapter: Adapter,
        roots: dict[str, Any] | None = None,
    ) -> UpstreamSession:
        """``key``'s session, opened (with ``adapter``'s revision offered, and the
        exchange's client declared) if there is none; ``roots``: what a new one's
        server is answered when it asks ``roots/list`` (the key names them)."""
        session = self._sessions.get(key)
        if session is None:
            async with self._locks.hold(key):
                session = self._sessions.get(key)
                if session is None:
                    opening = (transport, adapter, roots)
                    session = await self._open_for(key, exchange, opening)
        else:
            self._sessions.move_to_end(key)
        session.last_used = time.monotonic()
        return session

    async def _open_for(
        self,
        key: str,
        exchange: Exchange,
        opening: tuple[str, Adapter, dict[str, Any] | None],
    ) -> UpstreamSession:
        transport, adapter, roots = opening
        downstream = exchange.downstream
        principal = exchange.principal
        if downstream is None and key != SHARED_KEY:
            await self._make_room(principal)
            self._opening[principal] += 1
        elif downstream is not None and downstream.ended:
            raise _ended()
        reopened = key in self._levels
        try:
            session = await self.open(
                transport, exchange.forward_headers, adapter, exchange, key, roots=roots
            )
        finally:
            if downstream is None and key != SHARED_KEY:
                self._opening -= Counter({principal: 1})
        session.principal = principal
        if downstream is not None and downstream.ended:
            # The client's session ended while this one was opening: nobody will end it.
            await self._terminate(session)
            raise _ended()
        self._keep(key, session)
        if downstream is None:
            self._sweep_later()
        level = self._levels.get(key)
        if level is not None:
            await self._set_level(session, level, exchange)
        if self.on_session is not None:
            # A new upstream session knows none of the old one's subscriptions.
            self._calls.spawn(self.on_session(key))
        if reopened:
            log.info("upstream session re-opened", upstream=self.settings.url)
        return session

    def _pools(self) -> list[UpstreamSession]:
        """Stateless clients' shared sessions, least recently used first."""
        return [s for s in self._sessions.values() if self._is_pool(s)]

    def _idle(self, session: UpstreamSession) -> bool:
        busy = session.inflight.calls or len(session.held)
        return not busy and not self.watched(session.key or "")

    async def _make_room(self, principal: str) -> None:
        """Room for one more pool of ``principal``'s, within both bounds: the least
        recently used idle pool is ended (the principal's own first); a Failure when
        every pool in the way is busy."""
        if self._counts.held(principal) + self._opening[principal] >= MAX_POOLS_PER_PRINCIPAL:
            mine = [s for s in self._pools() if s.principal == principal]
            await self._end_idle(mine, _busy(FailureKind.QUOTA_EXCEEDED, MAX_POOLS_PER_PRINCIPAL))
        if self._counts.total + self._opening.total() >= MAX_POOLS:
            await self._end_idle(self._pools(), _busy(FailureKind.OVERLOADED, MAX_POOLS))

    async def _end_idle(self, pools: list[UpstreamSession], refusal: Failure) -> None:
        idle = next((s for s in pools if self._idle(s)), None)
        if idle is None or idle.key is None:
            raise refusal
        await self.end(idle.key)

    def _sweep_later(self) -> None:
        if self._sweeper is None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_later(POOL_IDLE / 4, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        expired = self.expired(time.monotonic())
        if expired:
            self._calls.spawn(self._end_expired(expired))
        # A dropped pool's level is kept for its next call to set again; one whose pool
        # was not opened again by now is forgotten (a client session's goes with it).
        for key in [k for k in self._levels if k not in self._sessions and k != SHARED_KEY]:
            if not key.startswith("s:"):
                del self._levels[key]
        if self._pools():
            self._sweep_later()

    def expired(self, now: float) -> list[str]:
        """The keys of the pools idle for longer than POOL_IDLE at ``now``."""
        return [s.key for s in self._pools() if s.key is not None and self._expired(s, now)]

    def _expired(self, session: UpstreamSession, now: float) -> bool:
        return now - session.last_used > POOL_IDLE and self._idle(session)

    async def _end_expired(self, keys: list[str]) -> None:
        """End these pools, ENDING_AT_ONCE at a time; one used again meanwhile stays."""
        pending = iter(keys)

        async def ender() -> None:
            for key in pending:
                session = self._sessions.get(key)
                if session is not None and self._expired(session, time.monotonic()):
                    log.info("ending an idle upstream session", upstream=self.settings.url)
                    await self.end(key)

        await asyncio.gather(*(ender() for _ in range(min(ENDING_AT_ONCE, len(keys)))))

    async def drop(self, key: str, session: UpstreamSession) -> None:
        """Forget a session that stopped working (the next call opens a new one); it
        is ended upstream too, in case only its stream broke."""
        if self._sessions.get(key) is session:
            self._unkeep(key)
        self._calls.spawn(self._terminate(session))

    async def end(self, key: str) -> bool:
        """The client the session served is gone: end it upstream (DELETE)."""
        session = self._unkeep(key)
        self._levels.pop(key, None)
        if session is None:
            return False
        await self._terminate(session)
        return True

    async def _terminate(self, session: UpstreamSession) -> None:
        session.closed = True
        if session.listener is not None:
            session.listener.cancel()
        session.held.cancel_all()
        try:
            if session.session_id is not None and self.settings.end_sessions:
                await self._calls.notices_sent(NOTICE_GRACE)
                headers = {
                    **session.headers,
                    **session.adapter.client_headers(None, session.session_id),
                }
                await session.carrier.terminate(headers)
        except CarrierError:
            pass
        finally:
            if session.owns_carrier:
                with contextlib.suppress(CarrierError):
                    await session.carrier.close()

    async def close(self) -> None:
        """End every session (DELETE) and close the carriers they own."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        sessions = list(self._sessions.values())
        self._sessions.clear()
        self._counts.clear()
        for session in sessions:
            await self._terminate(session)

    # ------------------------------------------------------------------ opening

    async def open(
        self,
        transport: str,
        headers: Mapping[str, str],
        pinned: Adapter | None,
        exchange: Exchange | None = None,
        key: str | None = None,
        *,
        roots: dict[str, Any] | None = None,
    ) -> UpstreamSession:
        """A new session over ``transport``, declaring the exchange's client (the
        gateway itself without one): raises CarrierError when the upstream refuses
        it, Failure when it chose a revision the gateway does not speak."""
        offer = pinned or self.adapters.handshake[0]
        carrier = await self._carrier(transport, headers)
        info, capabilities = self._client(offer, exchange)
        message = offer.client_opening(next(self._calls.ids), info, capabilities)
        try:
            response, reply_headers = await roundtrip(
                carrier,
                message,
                {**headers, **offer.client_headers(None, None, message)},
                within=self.settings.request_timeout,
            )
        except BaseException:
            if carrier is not self._primary and carrier is not self._streamable:
                with contextlib.suppress(CarrierError):
                    await carrier.close()
            raise
        adapter, result = self._chosen(offer, response)
        session_id = reply_headers.get("mcp-session-id") if reply_headers else None
        session = UpstreamSession(
            adapter,
            carrier,
            session_id,
            profile=self._shared(adapter.client_read_profile(result)),
            owns_carrier=carrier is not self._primary and carrier is not self._streamable,
            headers={**headers, **adapter.client_headers(None, session_id)},
            key=key,
            scope=key,
            downstream=exchange.downstream if exchange is not None else None,
            roots=roots,  # before its stream opens: the server may ask at once
        )
        await carrier.send(rpc.notification("notifications/initialized"), session.headers)
        opened = asyncio.Event()
        session.listener = asyncio.get_running_loop().create_task(
            self.unsolicited.listen(session, opened)
        )
        # Calls wait for the session's own stream (bounded): a server that asks
        # something outside a call right away asks it there, and a question sent
        # before the stream is open is lost (server-everything's roots/list is).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(opened.wait(), LISTEN_OPEN_WAIT)
        if carrier.is_session:
            await self.unsolicited.ping_first(session, next(self._calls.ids))
        return session

    def _client(
        self, offer: Adapter, exchange: Exchange | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Who the upstream session says its client is: the client itself, its
        capabilities projected onto the upstream's revision (plus elicitation where
        the gateway carries it in tool arguments for the client); the gateway when
        no client is known (the era probe)."""
        if exchange is None:
            return self.settings.client_info, self.settings.client_capabilities
        client = exchange.call.client
        capabilities = dict(client.capabilities)
        downstream = exchange.downstream
        if downstream is not None and downstream.carries_asks:
            capabilities.setdefault("elicitation", {"form": {}})
        info = client.info or self.settings.client_info
        return info, offer.client_project_capabilities(capabilities)

    def _chosen(self, offer: Adapter, response: dict[str, Any]) -> tuple[Adapter, dict[str, Any]]:
        if "result" not in response or not isinstance(response["result"], dict):
            failure = offer.client_read_failure(response.get("error"))
            raise CarrierError(f"initialize was refused: {failure.message}", status=400)
        result = response["result"]
        adapter = self.adapters.by_version.get(str(result.get("protocolVersion")))
        if adapter is None or not adapter.has_handshake:
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL,
                f"the upstream chose protocol revision {result.get('protocolVersion')!r}, "
                "which the gateway does not speak",
            )
        return adapter, result

    async def _carrier(self, transport: str, headers: Mapping[str, str]) -> Carrier:
        if transport == "sse":
            sse = LegacySseCarrier(
                self.settings.url,
                self._http,
                headers=headers,
                connect_timeout=self.settings.connect_timeout,
                endpoint_timeout=self.settings.probe_timeout,
                read_timeout=self.settings.request_timeout,
                redirects=self.settings.redirect_policy,
                listen_named=listen_named,
                max_event_size=self.settings.http_max_message,
            )
            await sse.start()
            return sse
        if transport == "stdio":
            # A child per session, as a client that spawned the server would have;
            # or one child for the whole route when it is shared.
            carrier = self._primary if self.settings.shared else self._child()
            await start_carrier(carrier)
            return carrier
        return self._streamable

    def _child(self) -> StdioCarrier:
        return stdio_child(self.settings, self.crashes)

    # ---------------------------------------------------------------- calls

    async def handle(
        self, call: Call, exchange: Exchange, session: UpstreamSession, rooting: bool = False
    ) -> Outcome:
        """Run one call in ``session``: a pool's held questions first, the log level
        brought up if need be.  ``rooting``: the caller's roots are its own (a
        stateless client's, upstream/roots.py), so a roots question moves the session
        to the key that names the answer."""
        if session.roots is not None:
            # Asked in the call, the pool's roots are the pool's to give, as outside it.
            heard = partial(self.unsolicited.heard_roots, True)
            ask = answering_roots(session.roots, exchange.ask, heard)
            exchange = exchange.routed(ask, exchange.emit)
        elif rooting:
            asking = partial(self._asking_roots, session)
            ask = taking_roots(exchange.ask, asking, partial(self._given_roots, session))
            exchange = exchange.routed(ask, exchange.emit)
        if session.downstream is None:
            await self._ensure_level(session, call, exchange)
            if session.held and HELD not in exchange.extra:
                # Questions it asked off any call, kept for a client: asked before the
                # call is sent (not once the lane sent it: it runs upstream meanwhile).
                await self.unsolicited.ask_held(session, exchange)
        outcome = await self._calls.handle(call, exchange, session)
        if call.operation is Operation.SET_LOG_LEVEL and not isinstance(outcome, Failure):
            level = call.params.get("level")
            if isinstance(level, str) and session.key is not None:
                session.log_level = self._levels[session.key] = level
        return outcome

    def _asking_roots(self, session: UpstreamSession) -> None:
        """A client is being asked for the roots ``session``'s server asked: no other
        call lands on it meanwhile (it leaves the roots-free pool now)."""
        self.unsolicited.heard_roots(in_call=True)
        if session.roots is None:
            self._rekey(session, f"{session.scope}{ROOTED}?{next(self._calls.ids)}")

    def _given_roots(self, session: UpstreamSession, roots: dict[str, Any] | None) -> None:
        """``session``'s server holds ``roots`` now: it is kept under the key naming them
        (a stateless client with the same roots asked first finds it there); given
        two clients' different roots, under a key nobody asks for.  None: no client
        was asked (its call ended first): back to the pool, the question held there
        for its next call (the pool has a new session meanwhile: left aside, ended
        once idle)."""
        if roots is None:
            scope = session.scope
            if session.roots is None and scope is not None and scope not in self._sessions:
                self._rekey(session, scope)
            return
        digest = roots_digest(roots)
        key = f"{session.scope}{ROOTED}{digest}"
        if session.roots is not None and roots_digest(session.roots) != digest:
            key = f"{session.scope}{ROOTED}mixed:{next(self._calls.ids)}"
        session.roots = roots
        # Asked again while its client answered (a tool's own roots/list): answered
        # now, with what its server was just given.
        for message, future in session.held.take(_asks_roots):
            future.set_result(session.adapter.client_answer(message["id"], Answer(result=roots)))
        held = self._sessions.get(key)
        if held is not None and held is not session:
            if not self._idle(held):
                key = f"{key}:{next(self._calls.ids)}"
            else:  # the older one serves nobody the newer cannot
                self._calls.spawn(self.drop(key, held))
        self._rekey(session, key)

    def claim(self, pool: str) -> str:
        """The key a call that may ask runs under, in a roots-free pool: one no other
        such call holds (``pool``, then ``pool|1`` ...), so a roots question its
        server asks, even outside the call's own stream, can only be this call's
        (its client's roots never reach another's call); past the principal's pool
        bound, ``pool`` shared.  Let go with :meth:`unclaim`."""
        for n in range(MAX_POOLS_PER_PRINCIPAL):
            key = f"{pool}|{n}" if n else pool
            if not self._claims[key]:
                break
        else:
            key = pool
        self._claims[key] += 1
        return key

    def unclaim(self, key: str) -> None:
        self._claims -= Counter({key: 1})

    def take_over(self, pool: str, key: str, roots: dict[str, Any]) -> None:
        """A client asked first gives ``roots`` (``key`` names them): the pool's idle
        session that no client gave roots yet, if any, becomes that key's, so a
        question its server asked outside calls (held there) is answered with them."""
        session = self._sessions.get(pool)
        if key in self._sessions or session is None or session.roots is not None:
            return
        if session.inflight.calls or session.closed:
            return
        session.roots = roots
        self._rekey(session, key)

    def _rekey(self, session: UpstreamSession, key: str) -> None:
        old = session.key
        if old is not None and self._sessions.get(old) is session:
            self._unkeep(old)
        elif session.closed:
            return
        session.key = key
        self._keep(key, session)

    async def notify(self, session: UpstreamSession, call: Call, exchange: Exchange) -> None:
        """A client notification for its own upstream session (roots changed, say)."""
        message = session.adapter.client_notification(call)
        headers = {**exchange.forward_headers, **session.headers}
        with contextlib.suppress(CarrierError):
            await session.carrier.send(message, headers)

    def touch(self, key: str) -> None:
        """``key``'s session was used now: the least recently used give way first."""
        self._sessions.move_to_end(key)

    def ready(self, session: UpstreamSession, call: Call) -> bool:
        """Whether a pool sends ``call`` at once: no question held for it to ask first,
        no log level to raise first."""
        return not session.held and _level_to_set(session, call) is None

    async def _ensure_level(self, session: UpstreamSession, call: Call, exchange: Exchange) -> None:
        """Logging is session-wide on a handshake-era upstream and per request for
        stateless clients: keep a pool at the most verbose level any call asked for
        (logs are filtered per request on the way back)."""
        wanted = _level_to_set(session, call)
        if wanted is not None:
            await self._set_level(session, wanted, exchange)

    async def _set_level(self, session: UpstreamSession, level: str, exchange: Exchange) -> None:
        current, session.log_level = session.log_level, level
        set_level = Call(
            id=0,
            operation=Operation.SET_LOG_LEVEL,
            method=Operation.SET_LOG_LEVEL.value,
            params={"level": level},
            client=exchange.call.client,
        )
        try:
            outcome = await self._calls.handle(set_level, quiet(exchange), session)
        except CarrierError as exc:
            session.log_level = current
            # The session broke before the call it goes before was sent: that one is
            # unsent (so it may go on a new session), whatever became of this one.
            said = f"logging/setLevel before the call: {exc}"
            raise CarrierError(said, status=exc.status, unreached=True) from exc
        if isinstance(outcome, Failure):
            session.log_level = current
            log.info("the upstream refused logging/setLevel", reason=outcome.message)


def _level_to_set(session: UpstreamSession, call: Call) -> str | None:
    """The level a pool must be set to before ``call`` (more verbose than it is)."""
    wanted = call.client.log_level
    if wanted not in LOG_LEVELS or "logging" not in session.profile.capabilities:
        return None
    current = session.log_level
    if current is not None and LOG_LEVELS.index(current) <= LOG_LEVELS.index(wanted):
        return None
    return wanted


def stdio_child(settings: UpstreamSettings, crashes: Crashes | None) -> StdioCarrier:
    """A child of the route's stdio command (the route's shared one, the probe's, or a
    client session's), sharing the route's record of crashes."""
    if not settings.command:
        raise ValueError("a stdio upstream needs a command")
    return StdioCarrier(
        settings.command,
        env=settings.env,
        cwd=settings.cwd,
        crashes=crashes,
        route=settings.route,
        read_timeout=None,  # bounded in all by the route's timeout (Calls)
        listen_named=listen_named,
        max_message_size=settings.stdio_max_message,
    )
