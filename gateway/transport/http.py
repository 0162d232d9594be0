"""The inbound HTTP endpoint: Streamable HTTP and the old HTTP+SSE transport on one path.

A POST makes one call into the pipeline (:meth:`Pipeline.receive`,
:mod:`gateway.transport.pipeline`), which lets it in in the order every transport
shares, then its calls are answered through :meth:`Runner.run` as JSON, as an SSE
stream (:class:`Responder`), or on an HTTP+SSE session's stream.  What is HTTP's
own is here: the envelope (headers, session id), the body read within its limits,
the session id a handshake-era POST must carry (:meth:`Endpoint.check_headers`; the
revision's own header rules are its adapter's), and the GET streams and DELETE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson
import structlog
from aiohttp import web

from gateway.auth.front import RequestSeen
from gateway.core import MAY_ASK, Call, Failure, FailureKind, Preamble
from gateway.protocol import Adapter, adapter_of
from gateway.transport.common import is_initialize, too_large
from gateway.transport.inbound import Arrival, Running, Send
from gateway.transport.marks import OWNER_UNKNOWN
from gateway.transport.page import page, wants_page
from gateway.transport.pipeline import Pipeline, Refusal
from gateway.transport.post import PostRequest, Sink, WholeAnswer
from gateway.transport.reasons import log_refusal
from gateway.transport.responder import EVENT_STREAM, JSON, KEEPALIVE_COMMENT, Responder
from gateway.transport.resume import EventLog
from gateway.transport.route import Route
from gateway.transport.sessions import Session
from gateway.wire.sse import encode_event

log = structlog.get_logger(__name__)

SESSION_QUERY = "sessionId"
# The request key a middleware (a cluster's) sets when the session or parked call a
# request names belongs to another process that could not be located: the Failure to
# answer in the client's revision instead of "not found".
# What an HTTP+SSE client's POST gets: its answers travel on its stream.
_ACCEPTED = WholeAnswer(202, {}, b"Accepted", "text/plain; charset=utf-8")


class _AnswerStream(web.StreamResponse):
    """A POST's SSE answer whose headers go out with its first event, in one send:
    it is only opened to write at once (aiohttp's own ``web.Response`` defers its
    headers the same way)."""

    _send_headers_immediately = False


class Endpoint:
    """The aiohttp handlers for one route."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.adapters = route.adapters
        self.pipeline = Pipeline(route, route.sessions, _queue)
        self._logs: dict[str, EventLog] = {}  # by session id, while the session lasts

    def _refuse(self, refusal: Refusal, headers: dict[str, str] | None = None) -> WholeAnswer:
        failure = refusal.failure
        status = refusal.adapter.http_status(failure)
        log_refusal(self.route.path, status, failure)
        return WholeAnswer(
            status,
            {**failure.headers, **(headers or {})},
            orjson.dumps(refusal.message()),
            JSON,
        )

    def _log_of(self, session: Session | None) -> EventLog | None:
        """The session's log of resumable SSE events (None: its revision has none)."""
        if session is None:
            return None
        adapter = adapter_of(session.view)
        if adapter is None or not adapter.resumable_streams:
            return None
        log = self._logs.get(session.id)
        if log is None:
            log = self._logs[session.id] = EventLog()
            session_id = session.id

            def forget() -> None:
                self._logs.pop(session_id, None)

            session.on_end(forget)
        return log

    def _failure(self, adapter: Adapter, failure: Failure) -> web.Response:
        """A failure before any message was read, in ``adapter``'s words."""
        return to_web(self._refuse(Refusal(adapter, failure)))

    # --------------------------------------------------------------- POST

    async def post(self, request: web.Request) -> web.StreamResponse:
        """aiohttp's handler: what the lane does not carry comes here."""
        answer = await self.answer_post(AioPost(request), request.get(OWNER_UNKNOWN))
        if isinstance(answer, WholeAnswer):
            return to_web(answer)
        assert isinstance(answer, web.StreamResponse)
        return answer

    async def answer_post(
        self, request: PostRequest, owner_unknown: Failure | None = None
    ) -> WholeAnswer | Sink:
        """One POST, on whichever server carries it: in through the pipeline, then
        answered (JSON, an SSE stream, or on an HTTP+SSE session's stream)."""
        headers = request.lowered
        legacy_sse_id = request.query(SESSION_QUERY)
        preamble = Preamble(
            body=None,
            headers=headers,
            http_method="POST",
            transport="sse" if legacy_sse_id is not None else "http",
            peer=request.remote or "",
            session_id=legacy_sse_id or headers.get("mcp-session-id"),
            owner_unknown=owner_unknown,
        )
        view = RequestSeen(headers, request.scheme, request.host)
        arrival = await self.pipeline.receive(self, request, preamble, view)
        if arrival is None:
            return WholeAnswer(400)
        if isinstance(arrival, Refusal):
            return await self._refuse_post(arrival, preamble)
        response_headers: dict[str, str] = {}
        if arrival.opened and preamble.transport == "http":
            assert arrival.session is not None
            if arrival.adapter.session_header:
                response_headers["Mcp-Session-Id"] = arrival.session.id
        if not arrival.requests and not arrival.failures:
            return WholeAnswer(202, response_headers)
        if preamble.transport == "sse":
            return await self._answer_on_stream(arrival)
        return await self._answer(request, arrival, response_headers)

    async def _refuse_post(self, refusal: Refusal, preamble: Preamble) -> WholeAnswer:
        """An HTTP+SSE client reads every answer on its stream, JSON-RPC errors too (it
        never reads a POST's body); an HTTP status of its own stays the POST's."""
        status = refusal.adapter.http_status(refusal.failure)
        session = refusal.session
        if preamble.transport == "sse" and session is not None and status == 200:
            log_refusal(self.route.path, status, refusal.failure)
            if refusal.id is not None:
                await self.pipeline.deliver(session, refusal.message())
            return _ACCEPTED
        return self._refuse(refusal)

    async def _session_of(
        self, request: web.Request, headers: dict[str, str]
    ) -> tuple[Session | None, str] | web.Response:
        """The caller's principal, and its session named in the request (None: none
        named, or not one of the caller's); or the response refusing the caller."""
        preamble = Preamble(body=None, headers=headers, http_method=request.method)
        principal = await self.pipeline.caller(preamble, request, guarded=True)
        if isinstance(principal, Refusal):
            return to_web(self._refuse(principal))
        return self.route.sessions.get(headers.get("mcp-session-id"), principal), principal

    # ------------------------------------------------ the pipeline's door

    # Host and Origin are checked; each POST names its session, whose calls in
    # flight are what its cancellations name; a notification's events go to the
    # session's stream.
    guarded = True
    own_session: Session | None = None
    running: Running | None = None
    events: Send | None = None

    def check_headers(
        self, adapter: Adapter, preamble: Preamble, session: Session | None
    ) -> Failure | None:
        """A session id, once the handshake made one (only initialize comes without)."""
        if (
            adapter.has_handshake
            and session is None
            and adapter.session_header
            and not is_initialize(preamble.body)
        ):
            return Failure(
                FailureKind.SESSION_REQUIRED, "Bad Request: missing Mcp-Session-Id header"
            )
        return None

    async def read(self, source: PostRequest, preamble: Preamble) -> bytes | Refusal | None:
        """The body, within the route's size limit and time (None: the connection
        broke while it arrived)."""
        limit = self.route.max_body
        if source.content_length is not None and source.content_length > limit:
            return self.pipeline.refusal(preamble, too_large(limit))
        try:
            raw = await source.body(limit + 1, self.route.body_timeout)
        except (ConnectionError, asyncio.IncompleteReadError):
            return None
        if raw is None:
            failure = Failure(
                FailureKind.INVALID_REQUEST,
                f"the request body did not arrive within {self.route.body_timeout:g}s",
            )
            return self.pipeline.refusal(preamble, failure)
        if len(raw) > limit:
            return self.pipeline.refusal(preamble, too_large(limit))
        return raw

    async def _answer(
        self, request: PostRequest, arrival: Arrival, headers: dict[str, str]
    ) -> WholeAnswer | Sink:
        """Streamable HTTP: the answers in the response, as JSON or as an SSE stream."""
        adapter, failures, requests = arrival.adapter, arrival.failures, arrival.requests
        log = self._log_of(arrival.session)
        responder = Responder(
            request, headers, log, priming=adapter.primes_streams, keepalive=self.route.keepalive
        )
        if isinstance(arrival.preamble.body, list):
            responses = [
                adapter.encode_failure(f.id, f.failure, None) for f in failures if f.id is not None
            ]
            responses.extend(await self.pipeline.run_all(arrival, requests, None))
            if failures and not responses:
                return self._refuse(Refusal(adapter, failures[0].failure))
            return await responder.finish(responses)
        if failures:
            return self._refuse(Refusal(adapter, failures[0].failure, failures[0].id), headers)
        if log is not None and adapter.primes_streams and requests[0].operation in MAY_ASK:
            responder.open_soon()  # a call that may run long: resumable from the start
        try:
            reply = await self.pipeline.run(arrival, requests[0], responder.send)
            responder.headers.update(reply.headers)
            return await responder.finish(reply.message, reply.status)
        finally:
            responder.disarm()

    async def _answer_on_stream(self, arrival: Arrival) -> WholeAnswer:
        """HTTP+SSE: the answers travel on the session's stream."""
        session = arrival.session
        assert session is not None
        for bad in arrival.failures:
            message = arrival.adapter.encode_failure(bad.id, bad.failure)
            await self.pipeline.deliver(session, message)
        for call in arrival.requests:
            self.pipeline.spawn(self._run_on_stream(arrival, call, session))
        return _ACCEPTED

    async def _run_on_stream(self, arrival: Arrival, call: Call, session: Session) -> None:
        reply = await self.pipeline.run(arrival, call, None)
        if reply.message is not None:
            await self.pipeline.deliver(session, reply.message)

    # ---------------------------------------------------------------- GET

    async def get(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if wants_page(headers):  # a browser: a page, not an SSE stream that never ends
            refused = self.route.guard.check(headers)
            if refused is not None:
                return self._failure(self.adapters.default_legacy, refused)
            return page(request, [self.route.path])
        reporter = self.adapters.default_legacy
        found = await self._session_of(request, headers)
        if isinstance(found, web.Response):
            return found
        session, principal = found
        if EVENT_STREAM not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            return self._failure(
                reporter,
                Failure(FailureKind.NOT_ACCEPTABLE, "Accept must include text/event-stream"),
            )
        if self.adapters.names_stateless(headers.get("mcp-protocol-version")):
            return web.Response(status=405, headers={"Allow": "POST"})
        if headers.get("mcp-session-id") is None:
            return await self._legacy_sse_stream(request, principal)
        if session is None:
            return self._failure(reporter, _not_found(request))
        log = self._log_of(session)
        last = headers.get("last-event-id")
        resumed = log.after(last) if log is not None and last is not None else None
        if resumed is not None and log is not None and resumed[0] != log.standalone:
            return await self._replay(request, resumed[1])  # a POST's stream, polled
        if session.stream_open:
            return web.Response(status=409, text="a stream is already open for this session")
        refused = self.route.streams.acquire(principal)
        if refused is not None:
            return self._failure(reporter, refused)
        try:
            stream = web.StreamResponse(
                headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
            )
            await stream.prepare(request)
            number = await self._open_log(session, stream, log, resumed)
            # Idle for the whole timeout: ended (the client reconnects when it wants).
            await self._pump(session, stream, log, number, idle_ends=True)
        finally:
            self.route.streams.release(principal)
        return stream

    async def _open_log(
        self,
        session: Session,
        stream: web.StreamResponse,
        log: EventLog | None,
        resumed: tuple[int, list[bytes], bool] | None,
    ) -> int:
        """The standalone stream's event number: a resumed one replays what was
        missed; a new one is opened in the log (and primed where the revision asks)."""
        if log is None:
            return 0
        if resumed is not None:
            for frame in resumed[1]:
                await stream.write(frame)
            return resumed[0]
        number = log.standalone = log.open()
        adapter = self.pipeline.session_adapter(session)
        if adapter is not None and adapter.primes_streams:
            await stream.write(log.priming(number))
        return number

    async def _replay(self, request: web.Request, missed: list[bytes]) -> web.StreamResponse:
        """A POST's stream, resumed: what it sent since the client's last event.  It
        ends there; a call still running is polled again (the `retry` delay)."""
        stream = web.StreamResponse(
            headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        for frame in missed:
            await stream.write(frame)
        await stream.write_eof()
        return stream

    async def _legacy_sse_stream(self, request: web.Request, principal: str) -> web.StreamResponse:
        """The HTTP+SSE transport: the stream, its `endpoint` event, then every message."""
        sse_capable = [a for a in self.adapters.handshake if "sse" in a.transports]
        if not sse_capable:
            return web.Response(status=405, headers={"Allow": "POST"})
        refused = self.route.sessions.room_for(principal) or self.route.streams.acquire(principal)
        if refused is not None:
            return self._failure(sse_capable[-1], refused)
        try:
            return await self._legacy_session(request, principal, sse_capable[-1])
        finally:
            self.route.streams.release(principal)

    async def _legacy_session(
        self, request: web.Request, principal: str, adapter: Adapter
    ) -> web.StreamResponse:
        session = self.pipeline.open_session(adapter, principal)
        stream = web.StreamResponse(
            headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        try:
            await stream.prepare(request)
            endpoint = f"{request.path}?{SESSION_QUERY}={session.id}"
            await stream.write(encode_event(endpoint, event="endpoint"))
            await self._pump(session, stream)
        finally:
            # The HTTP+SSE session is the connection: it ends with it.
            self.pipeline.end_session(session.id)
        return stream

    async def _pump(
        self,
        session: Session,
        stream: web.StreamResponse,
        log: EventLog | None = None,
        number: int = 0,
        *,
        idle_ends: bool = False,
    ) -> None:
        """The session's messages onto its stream (with a ``log``, event ``number``'s
        ids).  After ``stream_idle_timeout`` with nothing to send the stream ends
        (``idle_ends``) or gets a keep-alive comment; a client that does not read for
        that long is cut off."""
        idle = self.route.stream_idle_timeout
        beat = self.route.keepalive
        loop = asyncio.get_running_loop()
        self.pipeline.stream_opened(session, True)
        try:
            quiet_since = spoke = loop.time()  # the last message; the last write
            while True:
                now = loop.time()
                wait = idle - (now - quiet_since)
                if beat > 0:
                    wait = min(wait, beat - (now - spoke))
                try:
                    async with asyncio.timeout(max(wait, 0.0)):
                        message = await session.outbox.get()
                except TimeoutError:
                    now = spoke = loop.time()
                    if now - quiet_since >= idle:
                        if idle_ends:
                            break
                        quiet_since = now
                    async with asyncio.timeout(idle):
                        await stream.write(KEEPALIVE_COMMENT)
                    continue
                if message is None:
                    break
                quiet_since = spoke = loop.time()
                async with asyncio.timeout(idle):
                    await stream.write(_framed(message, log, number))
                # Not kept while the stream idles: thousands of idle streams would each
                # hold the last message they sent.
                del message
        except (ConnectionResetError, asyncio.CancelledError, TimeoutError):
            pass
        finally:
            self.pipeline.stream_opened(session, False)

    # ------------------------------------------------------------- DELETE

    async def delete(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        found = await self._session_of(request, headers)
        if isinstance(found, web.Response):
            return found
        session, _ = found
        if self.adapters.names_stateless(headers.get("mcp-protocol-version")):
            # The stateless revision has no sessions to end (as GET answers too).
            return web.Response(status=405, headers={"Allow": "POST"})
        if headers.get("mcp-session-id") is None:
            return web.Response(status=405 if not self.adapters.handshake else 400)
        if session is None or not self.pipeline.end_session(session.id):
            return self._failure(self.adapters.default_legacy, _not_found(request))
        return web.Response(status=200)

    async def close(self) -> None:
        await self.route.backend.close()
        await self.pipeline.close()

    def busy(self) -> set[asyncio.Task[None]]:
        """Calls answered in the background (on an HTTP+SSE stream): what a drain
        waits for (notifications passed upstream owe no answer: not these)."""
        return self.pipeline.owed()


class AioPost:
    """An aiohttp request as the endpoint reads a POST."""

    __slots__ = ("lowered", "request")

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.lowered = {k.lower(): v for k, v in request.headers.items()}

    @property
    def headers(self) -> Mapping[str, str]:
        return self.request.headers

    @property
    def scheme(self) -> str:
        return self.request.scheme

    @property
    def host(self) -> str:
        return self.request.host

    @property
    def remote(self) -> str | None:
        return self.request.remote

    @property
    def content_length(self) -> int | None:
        return self.request.content_length

    def query(self, name: str) -> str | None:
        return self.request.query.get(name)

    async def body(self, limit: int, within: float) -> bytes | None:
        if self.request.content.is_eof():
            # All of it has arrived (the usual small body): reading cannot wait, so it
            # needs no timer.
            return await self._read(limit)
        try:
            async with asyncio.timeout(within):
                return await self._read(limit)
        except TimeoutError:
            return None

    async def _read(self, limit: int) -> bytes:
        """The body, up to ``limit`` bytes (one `read(n)` returns only what has arrived)."""
        content = self.request.content
        chunk = await content.read(limit)
        if content.at_eof():
            return chunk  # all of it in one piece (the usual small body): no copies
        buf = bytearray(chunk)
        while chunk and len(buf) < limit:
            chunk = await content.read(limit - len(buf))
            buf += chunk
        return bytes(buf)

    async def open_stream(self, headers: dict[str, str]) -> Sink:
        stream = _AnswerStream(status=200, headers=headers)
        await stream.prepare(self.request)
        return stream


def _not_found(request: web.Request) -> Failure:
    """A GET or DELETE's session is not here: not found, or (its owner could not be
    located) what the middleware that marked it says to answer."""
    failure: Failure | None = request.get(OWNER_UNKNOWN)
    return failure or Failure(FailureKind.SESSION_NOT_FOUND, "Session not found")


def to_web(answer: WholeAnswer) -> web.Response:
    headers = answer.headers
    if answer.content_type is not None:
        headers = {**headers, "Content-Type": answer.content_type}
    return web.Response(body=answer.body, status=answer.status, headers=headers)


def _framed(message: dict[str, Any], log: EventLog | None, number: int) -> bytes:
    """A standalone stream's event (with a ``log``, with its id and kept for replay)."""
    data = orjson.dumps(message)
    return log.record(number, data) if log is not None else encode_event(data, event="message")


async def _queue(session: Session, message: dict[str, Any]) -> None:
    """A message for a session's stream waits in its outbox for the GET (or HTTP+SSE)
    stream to write it."""
    session.deliver(message)
