"""What a handshake-era upstream session sends outside any call, and where it goes.

Server requests (``roots/list``, sampling, elicitation) and notifications that
arrive on a session's own channel (its GET stream, or what HTTP+SSE and stdio
could not attribute to a call) belong to that session's client, never to
another one:

- ``roots/list`` on a pool that holds a client's roots (see :mod:`.roots`) is
  answered with them by the gateway;
- a message that only one call could have sent (one call in flight, not itself
  blocked on an ask) is that call's;
- otherwise a session that mirrors a client's own session hands requests to
  that client's standalone stream and its answer back upstream;
- a pooled session (stateless clients) holds the request until the pool's next
  call, which puts it to its client as one more ask (an ``input_required``
  round), or refuses it after ``HELD_TTL``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import structlog

from gateway.core import Answer, Asker, AskKind, Event, Exchange, Operation
from gateway.core import jsonrpc as rpc
from gateway.upstream.calls import Calls
from gateway.upstream.carriers.base import CarrierError, is_response_to
from gateway.upstream.carriers.demux import SESSION_NOTIFICATIONS
from gateway.upstream.open_session import UpstreamSession

log = structlog.get_logger(__name__)

# How often a handshake-era session's own stream is opened again after it drops.
LISTEN_RETRIES = 5
# How long a pooled session's question waits for the pool's next call.
HELD_TTL = 300.0
# A pool holds at most this many questions; more are refused at once (an upstream
# asking in a loop must not grow a table without bound).
MAX_HELD = 16
# How long a new stdio or HTTP+SSE session's first ping (the one that lets what the
# server sent on `initialized` arrive first) is waited for (seconds).
FIRST_PING_TIMEOUT = 2.0
NotificationSink = Callable[[str, Event], Awaitable[None]]


class Unsolicited:
    """Routes one route's off-call upstream messages to the sessions they belong to."""

    def __init__(self, calls: Calls, upstream: str) -> None:
        self._calls = calls
        self._upstream = upstream
        self.notify: NotificationSink | None = None
        # Told whenever a server asks roots/list, and whether inside a call
        # (upstream/roots.py).
        self.roots_heard: Callable[[bool], None] | None = None

    async def listen(self, session: UpstreamSession, opened: asyncio.Event | None = None) -> None:
        """The session's own channel, for as long as the session lives; ``opened`` is
        set once the first attempt has its answer (open, refused or failed)."""
        try:
            await self._listen(session, opened)
        finally:
            if opened is not None:
                opened.set()

    async def _listen(self, session: UpstreamSession, opened: asyncio.Event | None) -> None:
        for attempt in range(LISTEN_RETRIES):
            if attempt:
                # The stream dropped while the session lives on: open it again, after
                # a short pause that grows, or list changes and updates are lost.
                await asyncio.sleep(min(0.2 * 2**attempt, 5.0))
                if session.closed:
                    return
            try:
                stream = await session.carrier.listen(session.headers)
                if opened is not None:
                    opened.set()
                if stream is None:
                    session.streamless = True
                    return  # the upstream offers no such stream
                async for message in stream:
                    await self.take(session, message)
            except CarrierError as exc:
                log.info("upstream session stream ended", upstream=self._upstream, reason=str(exc))
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken stream must not take the link down
                log.exception("upstream session stream failed", upstream=self._upstream)
            if session.carrier.is_session:
                return  # HTTP+SSE and stdio: the stream is the session; it ends with it

    async def take(self, session: UpstreamSession, message: dict[str, Any]) -> None:
        """One message off any call: a request is answered in the background, an
        event is delivered now."""
        if rpc.is_request(message):
            own = self._roots_answer(session, message)
            if own is not None:
                # Sent before anything else is read or sent: a stdio or HTTP+SSE
                # session's first call must find the server with its roots.
                await self._calls.send_answer(session.carrier, own, session.headers)
                return
            self._calls.spawn(self._reply(session, self._answer(session, message)))
        else:
            await self.event(session, message)

    async def ping_first(self, session: UpstreamSession, request_id: int) -> None:
        """A ping on a new stdio or HTTP+SSE session, answered before its first call.

        Such a channel keeps order, so what the server sent on reading
        ``initialized`` (server-filesystem asks ``roots/list`` there) arrives before
        the ping's answer and is routed as off-call: held for the first call or put
        to the session's client.  Sent with the first call instead, it would be
        taken as that call's own, and lost when the call ends without asking.
        """
        ping = rpc.request(request_id, Operation.PING.value)
        try:
            async with asyncio.timeout(FIRST_PING_TIMEOUT):
                exchange = await session.carrier.request(ping, session.headers)
                try:
                    async for message in exchange.messages:
                        if is_response_to(message, request_id, exchange.status):
                            return
                        await self.take(session, message)
                finally:
                    await exchange.aclose()
        except (CarrierError, TimeoutError) as exc:
            # Only the ordering guarantee is lost: the session is usable.
            log.info("upstream session did not answer its first ping", reason=str(exc))

    async def _reply(
        self, session: UpstreamSession, answer: Awaitable[dict[str, Any] | None]
    ) -> None:
        message = await answer
        if message is None:
            return  # already sent (a held question's answer)
        await self._calls.send_answer(session.carrier, message, session.headers)

    def _roots_answer(
        self, session: UpstreamSession, message: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The gateway's own answer to ``roots/list`` on a pool that holds roots of its
        own (its key names them: no client is asked); None for any other request."""
        if message.get("method") != AskKind.LIST_ROOTS.method:
            return None
        self.heard_roots(in_call=False)
        if session.roots is None:
            return None
        return session.adapter.client_answer(message["id"], Answer(result=session.roots))

    def heard_roots(self, in_call: bool) -> None:
        """A session's server asked ``roots/list``, in a call or outside one."""
        if self.roots_heard is not None:
            self.roots_heard(in_call)

    def _answer(
        self, session: UpstreamSession, message: dict[str, Any]
    ) -> Awaitable[dict[str, Any] | None]:
        """Who answers a server request, decided now: a question the pool holds is
        queued before the session's next call can look for it."""
        owner = session.inflight.owner(question=True)
        if owner is None and session.downstream is not None:
            # A client session's calls are all that client's: any call's own stream
            # reaches it, where it reads (it may have no standalone stream open).
            owner = session.inflight.any_asking()
        if owner is not None and owner[1].ask is not None:
            # Only a call whose client can be asked may own a question (a listing
            # cannot carry one: the session's client or the pool's next call will).
            return self._owned(session, owner[0], owner[1].ask, message)
        return self._unowned(session, message)

    def _unowned(
        self, session: UpstreamSession, message: dict[str, Any]
    ) -> Awaitable[dict[str, Any] | None]:
        """A request no call owns: the session's client, or the pool's next call."""
        if message.get("method") == Operation.PING.value:
            return _ready(rpc.result(message["id"], {}))
        downstream = session.downstream
        if downstream is not None:
            return self._calls.answer_request(session.adapter, message, downstream.ask)
        kind = AskKind.for_method(message.get("method"))
        if kind is not None and session.gateways_own:
            # It declared no capability; nobody could answer a question held there.
            return _ready(session.adapter.client_answer(message["id"], Answer.refusal(kind)))
        if kind is not None:
            return self._hold(session, message)
        return _ready(
            rpc.error(message["id"], -32601, f"Method not found: {message.get('method')}")
        )

    async def _owned(
        self, session: UpstreamSession, key: int, ask: Asker, message: dict[str, Any]
    ) -> dict[str, Any] | None:
        session.inflight.waiting.add(key)
        try:
            answered = await self._calls.try_answer(session.adapter, message, ask)
        finally:
            session.inflight.waiting.discard(key)
        if answered is not None:
            return answered
        # The call ended before its client was asked: the question is the session's.
        return await self._unowned(session, message)

    def _hold(
        self, session: UpstreamSession, message: dict[str, Any]
    ) -> Awaitable[dict[str, Any] | None]:
        """A pooled session's question waits (queued now) for the pool's next call."""
        kind = AskKind.for_method(message.get("method"))
        assert kind is not None
        if len(session.held) >= MAX_HELD:
            return _ready(session.adapter.client_answer(message["id"], Answer.refusal(kind)))
        key, future = session.held.ask(message)
        return self._held(session, message, key, future, kind)

    @staticmethod
    async def _held(
        session: UpstreamSession,
        message: dict[str, Any],
        key: str,
        future: asyncio.Future[dict[str, Any] | None],
        kind: AskKind,
    ) -> dict[str, Any] | None:
        try:
            return await asyncio.wait_for(asyncio.shield(future), HELD_TTL)
        except TimeoutError:
            return session.adapter.client_answer(message["id"], Answer.refusal(kind))
        finally:
            session.held.forget(key)

    async def ask_held(self, session: UpstreamSession, exchange: Exchange) -> None:
        """Put a pooled session's held questions to this call's client (all at once,
        so they come back as one round); their answers go upstream first."""
        if not session.held or exchange.ask is None:
            return
        held = session.held.take_all()

        async def one(
            message: dict[str, Any], future: asyncio.Future[dict[str, Any] | None]
        ) -> None:
            answer = await self._calls.answer_request(session.adapter, message, exchange.ask)
            if future.done():
                return  # refused meanwhile (HELD_TTL)
            # Sent here, not by the holder: the upstream must have it before this call.
            future.set_result(None)
            await self._calls.send_answer(session.carrier, answer, session.headers)

        await asyncio.gather(*(one(message, future) for message, future in held))

    async def event(self, session: UpstreamSession, message: dict[str, Any]) -> None:
        """A notification off any call: progress to its call, list changes and updates
        to the listeners of the session, logs to the one call or the session's client."""
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
            scope = session.scope or session.key
            if scope is not None and self.notify is not None:
                await self.notify(scope, event)
            return
        owner = session.inflight.owner()
        if owner is not None and event.method == "notifications/message":
            await owner[1].emit(event)
        elif session.downstream is not None:
            await session.downstream.notify(event)


async def _ready(answer: dict[str, Any]) -> dict[str, Any]:
    return answer
