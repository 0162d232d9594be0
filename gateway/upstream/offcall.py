"""What a handshake-era upstream session sends outside any call, and where it goes.

Server requests (``roots/list``, sampling, elicitation) and notifications that
arrive on a session's own channel (its GET stream, or what HTTP+SSE and stdio
could not attribute to a call) belong to that session's client, never to
another one:

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
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from gateway.core import Answer, AskKind, Event, Exchange, Operation
from gateway.core import jsonrpc as rpc
from gateway.upstream.calls import Calls
from gateway.upstream.carrier import CarrierError
from gateway.upstream.demux import SESSION_NOTIFICATIONS

if TYPE_CHECKING:
    from gateway.upstream.sessions import LegacySession

log = structlog.get_logger(__name__)

# How often a handshake-era session's own stream is opened again after it drops.
LISTEN_RETRIES = 5
# How long a pooled session's question waits for the pool's next call.
HELD_TTL = 300.0
# A pool holds at most this many questions; more are refused at once (an upstream
# asking in a loop must not grow a table without bound).
MAX_HELD = 16
NotificationSink = Callable[[str, Event], Awaitable[None]]


class OffCall:
    """Routes one route's off-call upstream messages to the sessions they belong to."""

    def __init__(self, calls: Calls, upstream: str) -> None:
        self._calls = calls
        self._upstream = upstream
        self.notify: NotificationSink | None = None

    async def listen(self, session: LegacySession, opened: asyncio.Event | None = None) -> None:
        """The session's own channel, for as long as the session lives; ``opened`` is
        set once the first attempt has its answer (open, refused or failed)."""
        try:
            await self._listen(session, opened)
        finally:
            if opened is not None:
                opened.set()

    async def _listen(self, session: LegacySession, opened: asyncio.Event | None) -> None:
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
                    return  # the upstream offers no such stream
                async for message in stream:
                    if rpc.is_request(message):
                        self._calls.spawn(self.request(session, message))
                    else:
                        await self.event(session, message)
            except CarrierError as exc:
                log.info("upstream session stream ended", upstream=self._upstream, reason=str(exc))
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken stream must not take the link down
                log.exception("upstream session stream failed", upstream=self._upstream)
            if session.carrier.is_session:
                return  # HTTP+SSE and stdio: the stream is the session; it ends with it

    async def request(self, session: LegacySession, message: dict[str, Any]) -> None:
        """A server request off any call: answered by whoever it belongs to."""
        answer = await self._answer(session, message)
        with contextlib.suppress(CarrierError):
            await session.carrier.send(answer, session.headers)

    async def _answer(self, session: LegacySession, message: dict[str, Any]) -> dict[str, Any]:
        owner = session.inflight.owner()
        if owner is not None and owner[1].ask is not None:
            # Only a call whose client can be asked may own a question (a listing
            # cannot carry one: the session's client or the pool's next call will).
            session.inflight.waiting.add(owner[0])
            try:
                return await self._calls.answer_request(session.adapter, message, owner[1].ask)
            finally:
                session.inflight.waiting.discard(owner[0])
        if message.get("method") == Operation.PING.value:
            return rpc.result(message["id"], {})
        downstream = session.downstream
        if downstream is not None:
            return await self._calls.answer_request(session.adapter, message, downstream.ask)
        if AskKind.for_method(str(message.get("method"))) is not None:
            return await self._hold(session, message)
        return rpc.error(message["id"], -32601, f"Method not found: {message.get('method')}")

    async def _hold(self, session: LegacySession, message: dict[str, Any]) -> dict[str, Any]:
        """A pooled session's question waits for the pool's next call to ask it."""
        kind = AskKind.for_method(str(message.get("method")))
        assert kind is not None
        if len(session.held) >= MAX_HELD:
            return session.adapter.client_answer(message["id"], Answer.refusal(kind))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        session.held.append((message, future))
        try:
            return await asyncio.wait_for(asyncio.shield(future), HELD_TTL)
        except TimeoutError:
            return session.adapter.client_answer(message["id"], Answer.refusal(kind))
        finally:
            with contextlib.suppress(ValueError):
                session.held.remove((message, future))

    async def ask_held(self, session: LegacySession, exchange: Exchange) -> None:
        """Put a pooled session's held questions to this call's client (all at once,
        so they come back as one round); their answers go upstream first."""
        if not session.held or exchange.ask is None:
            return
        held, session.held[:] = list(session.held), []

        async def one(message: dict[str, Any], future: asyncio.Future[dict[str, Any]]) -> None:
            answer = await self._calls.answer_request(session.adapter, message, exchange.ask)
            if not future.done():
                future.set_result(answer)

        await asyncio.gather(*(one(message, future) for message, future in held))

    async def event(self, session: LegacySession, message: dict[str, Any]) -> None:
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
            if session.key is not None and self.notify is not None:
                await self.notify(session.key, event)
            return
        owner = session.inflight.owner()
        if owner is not None and event.method == "notifications/message":
            await owner[1].emit(event)
        elif session.downstream is not None:
            await session.downstream.notify(event)
