"""The handshake-era upstream sessions of one route: opening, pooling, closing.

A session is opened with `initialize` and `notifications/initialized`, then
listened to on its own channel for what arrives outside any call.  The pool
keys sessions by an opaque string the link computes (which caller, or which
downstream session, a session serves); one lock per key makes sure a key
never gets two sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import structlog

from gateway.core import (
    Answer,
    AskKind,
    Call,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol import Adapter, AdapterSet
from gateway.protocol.models import LOG_LEVELS
from gateway.upstream.calls import Calls, Channel, InFlight, quiet, roundtrip
from gateway.upstream.carrier import Carrier, CarrierError, start_carrier
from gateway.upstream.http import LegacySseCarrier
from gateway.upstream.settings import UpstreamSettings
from gateway.upstream.stdio import StdioCarrier

log = structlog.get_logger(__name__)

# How often a handshake-era session's own stream is opened again after it drops.
LISTEN_RETRIES = 5
# Session-level notifications of a legacy upstream that belong to no call: handed to
# the notification sink (the bridge routes them to the downstream listeners).
SESSION_NOTIFICATIONS = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)
NotificationSink = Callable[[str, Event], Awaitable[None]]
SessionCallback = Callable[[str], Coroutine[Any, Any, None]]


@dataclass(kw_only=True)
class LegacySession(Channel):
    """One open handshake-era upstream session (the channel its calls run on)."""

    profile: ServerProfile
    owns_carrier: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    inflight: InFlight = field(default_factory=InFlight)
    # The level last set upstream with logging/setLevel (None: the server's default).
    log_level: str | None = None
    closed: bool = False
    listener: asyncio.Task[None] | None = None


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
        self._sessions: dict[str, LegacySession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Where session-level notifications go, with the key of the session they came in.
        self.notify: NotificationSink | None = None
        self.on_session: SessionCallback | None = None

    def adopt(self, key: str, session: LegacySession) -> None:
        """Keep a session opened elsewhere (by the era probe) under ``key``."""
        self._sessions[key] = session

    async def get(
        self, key: str, headers: Mapping[str, str], transport: str, adapter: Adapter
    ) -> LegacySession:
        """``key``'s session, opened (with ``adapter``'s revision offered) if there is none."""
        session = self._sessions.get(key)
        if session is not None:
            return session
        async with self._locks.setdefault(key, asyncio.Lock()):
            session = self._sessions.get(key)
            if session is None:
                session = await self.open(transport, headers, adapter)
                self._sessions[key] = session
                if self.on_session is not None:
                    # A new upstream session knows none of the old one's subscriptions.
                    self._calls.spawn(self.on_session(key))
            return session

    async def drop(self, key: str, session: LegacySession) -> None:
        """Forget a session that stopped working (the next call opens a new one)."""
        session.closed = True
        if self._sessions.get(key) is session:
            del self._sessions[key]
        if session.listener is not None:
            session.listener.cancel()
        if session.owns_carrier:
            await session.carrier.close()

    async def close(self) -> None:
        """End every session (DELETE) and close the carriers they own."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            if session.listener is not None:
                session.listener.cancel()
            try:
                if session.session_id is not None:
                    headers = session.adapter.client_headers(None, session.session_id)
                    await session.carrier.terminate(headers)
                if session.owns_carrier:
                    await session.carrier.close()
            except CarrierError:
                pass

    # ------------------------------------------------------------------ opening

    async def open(
        self, transport: str, headers: Mapping[str, str], pinned: Adapter | None
    ) -> LegacySession:
        """A new session over ``transport``: raises CarrierError when the upstream
        refuses it, Failure when it chose a revision the gateway does not speak."""
        offer = pinned or self.adapters.handshake[0]
        carrier = await self._carrier(transport, headers)
        message = offer.client_opening(
            next(self._calls.ids), self.settings.client_info, self.settings.client_capabilities
        )
        response, reply_headers = await roundtrip(
            carrier, message, {**headers, **offer.client_headers(None, None, message)}
        )
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
        session_id = reply_headers.get("mcp-session-id") if reply_headers else None
        session = LegacySession(
            adapter,
            carrier,
            session_id,
            profile=adapter.client_read_profile(result),
            owns_carrier=carrier is not self._primary and carrier is not self._streamable,
            headers={**headers, **adapter.client_headers(None, session_id)},
        )
        await carrier.send(rpc.notification("notifications/initialized"), session.headers)
        session.listener = asyncio.get_running_loop().create_task(self._listen(session))
        return session

    async def _carrier(self, transport: str, headers: Mapping[str, str]) -> Carrier:
        if transport == "sse":
            sse = LegacySseCarrier(
                self.settings.url,
                self._http,
                headers=headers,
                connect_timeout=self.settings.connect_timeout,
                endpoint_timeout=self.settings.probe_timeout,
                read_timeout=self.settings.request_timeout,
            )
            await sse.start()
            return sse
        if transport == "stdio":
            # A child per caller: a session of its own, which no other caller shares.
            carrier = self._child() if self.settings.per_principal else self._primary
            await start_carrier(carrier)
            return carrier
        return self._streamable

    def _child(self) -> StdioCarrier:
        settings = self.settings
        assert settings.command is not None
        return StdioCarrier(
            settings.command, env=settings.env, cwd=settings.cwd, route=settings.route
        )

    # ---------------------------------------------------------------- calls

    async def run(self, session: LegacySession, call: Call, exchange: Exchange) -> Outcome:
        """Run one call in ``session``, its log level brought up first if need be."""
        await self._ensure_level(session, call, exchange)
        return await self._calls.run(session, call, exchange)

    async def _ensure_level(self, session: LegacySession, call: Call, exchange: Exchange) -> None:
        """Logging is session-wide on a handshake-era upstream and per request for
        stateless clients: keep the upstream at the most verbose level any call asked
        for (logs are filtered per request on the way back)."""
        wanted = call.client.log_level
        if wanted not in LOG_LEVELS or "logging" not in session.profile.capabilities:
            return
        current = session.log_level
        if current is not None and LOG_LEVELS.index(current) <= LOG_LEVELS.index(wanted):
            return
        session.log_level = wanted
        set_level = Call(
            id=0,
            operation=Operation.SET_LOG_LEVEL,
            method=Operation.SET_LOG_LEVEL.value,
            params={"level": wanted},
            client=call.client,
        )
        outcome = await self._calls.run(session, set_level, quiet(exchange))
        if isinstance(outcome, Failure):
            session.log_level = current
            log.info("the upstream refused logging/setLevel", reason=outcome.message)

    # ------------------------------------------------- messages outside any call

    async def _listen(self, session: LegacySession) -> None:
        """The session's own channel (GET stream, or what HTTP+SSE could not attribute):
        server requests and notifications that arrive outside any call's stream."""
        for attempt in range(LISTEN_RETRIES):
            if attempt:
                # The stream dropped while the session lives on: open it again, after
                # a short pause that grows, or list changes and updates are lost.
                await asyncio.sleep(min(0.2 * 2**attempt, 5.0))
                if session.closed:
                    return
            try:
                stream = await session.carrier.listen(session.headers)
                if stream is None:
                    return  # the upstream offers no such stream
                async for message in stream:
                    if rpc.is_request(message):
                        self._calls.spawn(self._unsolicited_request(session, message))
                    else:
                        await self._unsolicited_event(session, message)
            except CarrierError as exc:
                log.info(
                    "upstream session stream ended", upstream=self.settings.url, reason=str(exc)
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken stream must not take the link down
                log.exception("upstream session stream failed", upstream=self.settings.url)
            if session.carrier.is_session:
                return  # HTTP+SSE and stdio: the stream is the session; it ends with it

    async def _unsolicited_request(self, session: LegacySession, message: dict[str, Any]) -> None:
        owner = session.inflight.owner()
        if owner is not None:
            session.inflight.waiting.add(owner[0])
            try:
                answer = await self._calls.answer_request(session.adapter, message, owner[1])
            finally:
                session.inflight.waiting.discard(owner[0])
        elif message.get("method") != Operation.PING.value:
            kind = AskKind.for_method(str(message.get("method")))
            answer = (
                session.adapter.client_answer(message["id"], Answer.refusal(kind))
                if kind is not None
                else rpc.error(message["id"], -32601, f"Method not found: {message.get('method')}")
            )
        else:
            answer = await self._calls.answer_request(session.adapter, message, None)
        with contextlib.suppress(CarrierError):
            await session.carrier.send(answer, session.headers)

    async def _unsolicited_event(self, session: LegacySession, message: dict[str, Any]) -> None:
        event = session.adapter.client_read_event(message)
        if event is None:
            return
        token = event.progress_token
        if token is not None:
            for upstream_id, (exchange, original) in list(session.inflight.calls.items()):
                if upstream_id == token and original is not None:
                    params = {**event.params, "progressToken": original}
                    await exchange.emit(replace(event, params=params))
            return
        if event.method in SESSION_NOTIFICATIONS:
            key = next((key for key, s in self._sessions.items() if s is session), None)
            if key is not None and self.notify is not None:
                await self.notify(key, event)
            return
        owner = session.inflight.owner()
        if owner is not None and event.method == "notifications/message":
            await owner[1].emit(event)
