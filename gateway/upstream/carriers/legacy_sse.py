"""The HTTP+SSE carrier (the legacy transport) and the probe that finds one.

One long GET stream carries every server message; the client POSTs to the
``endpoint`` that stream names.  The wire does not tie replies to requests,
so the carrier sorts them out by the rules of :mod:`.demux`.  Revision-agnostic
as the other carriers: callers pass every protocol header.  The
``aiohttp.ClientSession`` is the caller's: nothing here closes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

import aiohttp
import orjson
import structlog
from yarl import URL

from gateway.core.jsonrpc import valid_id as _is_id
from gateway.core.urls import http_url
from gateway.upstream.carriers.base import Carrier, CarrierError, Message, UpstreamReply, Where
from gateway.upstream.carriers.demux import Demux, Listening, ListenNamer, no_listen
from gateway.upstream.carriers.httpio import (
    EVENT_STREAM,
    JSON,
    MAX_ERROR_BODY,
    check_sent,
    error_body,
    event_messages,
    merge_headers,
    open_response,
    transport_error,
)
from gateway.upstream.carriers.redirects import RedirectPolicy, redacted
from gateway.wire.sse import DEFAULT_MAX_EVENT_SIZE, SseError, SseEvent, SseParser

log = structlog.get_logger(__name__)


class _LegacyConnection:
    """One HTTP+SSE stream and everything scoped to it (its session lives and dies with it)."""

    def __init__(
        self, resp: aiohttp.ClientResponse, max_queued: int, listen_named: ListenNamer
    ) -> None:
        self.resp = resp
        self.endpoint: URL | None = None
        self.endpoint_ready: asyncio.Future[URL] = asyncio.get_running_loop().create_future()
        self.demux = Demux(max_queued, "HTTP+SSE", log, listen_named)
        self.task: asyncio.Task[None] | None = None
        self.closed = False

    def shutdown(self, error: CarrierError) -> None:
        if self.closed:
            return
        self.closed = True
        self.resp.close()
        if not self.endpoint_ready.done():
            self.endpoint_ready.set_exception(error)
            self.endpoint_ready.exception()  # mark retrieved: start() may have given up
        self.demux.shutdown(error)


def _resolve_endpoint(base: URL, data: str) -> URL:
    """The POST URL an ``endpoint`` event names, resolved against the SSE URL.

    Only the SSE stream's own origin is accepted: otherwise an upstream could
    make the gateway POST (with forwarded credentials) anywhere.
    """
    text = data.strip()
    if not text:
        raise CarrierError("upstream sent an empty endpoint event")
    try:  # the check every URL the gateway connects to passes (port and host too)
        target = http_url(str(base.join(URL(text, encoded=True))), encoded=True)
    except (ValueError, UnicodeError):
        raise CarrierError("upstream sent an invalid endpoint event") from None
    if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
        raise CarrierError("upstream's endpoint is not on the SSE stream's origin")
    return target


class LegacySseCarrier(Carrier):
    """The HTTP+SSE transport: one long GET stream in, POSTs to its ``endpoint`` out.

    The wire does not tie replies to requests, so this carrier does, by the
    rules of :mod:`gateway.upstream.carriers.demux` (as for stdio): a response goes to
    the request with its id, a progress notification to the request that
    sent its token; any other message goes to the one request in flight if
    there is exactly one (it must be about that request), else to the queue
    ``listen()`` reads.

    The upstream session lives as long as the stream.  When the stream drops,
    pending requests fail and requests fail until ``start()`` opens a new
    stream, which is a new session the caller must initialize again.

    ``headers`` go on every HTTP request (the GET and each POST), e.g.
    forwarded credentials.  ``endpoint_timeout`` bounds ``start()``;
    ``read_timeout`` bounds a POST's answer; ``idle_timeout`` bounds silence
    on the stream (None: no bound).  ``listen_named`` reads which listen in
    flight a message names (see :mod:`.demux`).
    """

    cancels_by_close = False
    is_session = True

    def where(self) -> Where:
        return Where("tcp", self.url.host, self.url.port)

    def __init__(
        self,
        url: str | URL,
        session: aiohttp.ClientSession,
        *,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        endpoint_timeout: float = 10.0,
        read_timeout: float | None = 60.0,
        idle_timeout: float | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_queued: int = 1024,
        redirects: RedirectPolicy | None = None,
        listen_named: ListenNamer = no_listen,
    ) -> None:
        self.url = URL(url)
        self._session = session
        self._redirects = redirects or RedirectPolicy()
        self._headers = dict(headers or {})
        self._endpoint_timeout = endpoint_timeout
        self._post_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._stream_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=idle_timeout
        )
        self._max_event_size = max_event_size
        self._max_queued = max_queued
        self._listen_named = listen_named
        self._conn: _LegacyConnection | None = None
        self._lock = asyncio.Lock()
        # close() may run while start() connects: it stops that connection
        # too, or, before there is one, bumps the generation start() checks.
        self._connecting: _LegacyConnection | None = None
        self._generation = 0

    @property
    def is_open(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.closed and conn.endpoint is not None

    async def start(self) -> None:
        async with self._lock:
            if self._conn is not None and not self._conn.closed:
                return
            self._conn = None
            try:
                self._conn = await self._connect(self._generation)
            finally:
                self._connecting = None

    async def _connect(self, generation: int) -> _LegacyConnection:
        conn: _LegacyConnection | None = None
        try:
            async with asyncio.timeout(self._endpoint_timeout):
                resp = await open_response(
                    self._session,
                    "GET",
                    self.url,
                    headers=merge_headers(self._headers, Accept=EVENT_STREAM),
                    client_timeout=self._stream_timeout,
                    redirects=self._redirects,
                )
                if generation != self._generation:
                    # close() ran before there was a connection for it to stop.
                    resp.close()
                    raise CarrierError("the carrier was closed while starting")
                if not 200 <= resp.status < 300 or resp.content_type != EVENT_STREAM:
                    try:
                        body = await error_body(resp)
                    finally:
                        resp.close()
                    raise CarrierError(
                        f"upstream answered the HTTP+SSE GET with HTTP {resp.status}"
                        f" and {resp.content_type!r}",
                        status=resp.status,
                        body=body,
                    )
                conn = self._connecting = _LegacyConnection(
                    resp, self._max_queued, self._listen_named
                )
                conn.task = asyncio.create_task(self._read(conn), name="legacy-sse-reader")
                await conn.endpoint_ready
        except TimeoutError as exc:
            error = CarrierError("upstream sent no endpoint event in time", timeout=True)
            if conn is not None:
                await self._stop(conn, error)
            raise error from exc
        except BaseException as exc:
            if conn is not None:
                error = exc if isinstance(exc, CarrierError) else CarrierError("start aborted")
                await self._stop(conn, error)
            raise
        return conn

    async def _stop(self, conn: _LegacyConnection, error: CarrierError) -> None:
        conn.shutdown(error)
        task = conn.task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            # wait() rather than await: never swallow a cancellation aimed at us.
            await asyncio.wait([task])

    async def _read(self, conn: _LegacyConnection) -> None:
        parser = SseParser(self._max_event_size)
        error = CarrierError("the HTTP+SSE stream was closed")
        try:
            while chunk := await conn.resp.content.readany():
                for event in parser.feed(chunk):
                    self._dispatch(conn, event)
            error = CarrierError("upstream closed the HTTP+SSE stream")
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = transport_error(exc, "HTTP+SSE stream")
        except SseError as exc:
            error = CarrierError(str(exc))
        except Exception as exc:  # a bug here must not leave requests hanging
            log.exception("HTTP+SSE reader failed")
            error = CarrierError(f"HTTP+SSE reader failed: {exc}")
        finally:
            if not conn.closed:
                log.info("HTTP+SSE stream ended", reason=str(error))
            conn.shutdown(error)

    def _dispatch(self, conn: _LegacyConnection, event: SseEvent) -> None:
        if event.type == "endpoint":
            if conn.endpoint_ready.done():
                log.debug("ignoring a repeated endpoint event")
                return
            try:
                conn.endpoint = _resolve_endpoint(conn.resp.url, event.data)
            except CarrierError as exc:
                conn.endpoint_ready.set_exception(exc)
                conn.endpoint_ready.exception()
                return
            conn.endpoint_ready.set_result(conn.endpoint)
            return
        try:
            messages = event_messages(event)
        except CarrierError as exc:
            # One garbled event must not end the session for everyone.
            log.warning("dropping an HTTP+SSE event", reason=str(exc))
            return
        for message in messages:
            conn.demux.route(message)

    def _open_conn(self) -> _LegacyConnection:
        conn = self._conn
        if conn is None or conn.closed or conn.endpoint is None:
            # Nothing is posted without a stream to hear the answer: not sent.
            raise CarrierError("the HTTP+SSE stream is not open (call start())", unreached=True)
        return conn

    async def _post(
        self, conn: _LegacyConnection, message: Message, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        assert conn.endpoint is not None
        resp = await open_response(
            self._session,
            "POST",
            conn.endpoint,
            data=orjson.dumps(message),
            headers=merge_headers(self._headers, headers, Content_Type=JSON),
            client_timeout=self._post_timeout,
            redirects=self._redirects,
        )
        try:
            await check_sent(resp)
            return resp.headers
        finally:
            resp.release()

    async def request(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        if not _is_id(message.get("id")):
            raise ValueError("request() needs a JSON-RPC request with a string or integer id")
        conn = self._open_conn()
        # Registered before the POST: the answer may overtake the POST's own reply.
        key, queue = conn.demux.register(message)
        try:
            response_headers = await self._post(conn, message, headers)
        except BaseException:
            conn.demux.forget(key, queue)
            raise

        async def messages() -> AsyncIterator[Message]:
            try:
                while (item := await queue.get()) is not None:
                    yield item
            finally:
                conn.demux.forget(key, queue)

        return UpstreamReply(
            200, response_headers, messages(), closer=Listening(conn.demux, key, queue)
        )

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        await self._post(self._open_conn(), message, headers)

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        """Messages tied to no request; ends when the stream does.  One reader only."""
        queue = self._open_conn().demux.unsolicited

        async def messages() -> AsyncIterator[Message]:
            while (item := await queue.get()) is not None:
                yield item

        return messages()

    async def terminate(self, headers: Mapping[str, str]) -> None:
        """The session ends with the stream: see :meth:`close`."""

    async def close(self) -> None:
        self._generation += 1
        doomed = (self._conn, self._connecting)
        self._conn = None
        for conn in doomed:
            if conn is not None:
                await self._stop(conn, CarrierError("the carrier was closed"))


async def open_legacy_sse_probe(
    session: aiohttp.ClientSession,
    url: str | URL,
    timeout: float,  # noqa: ASYNC109 - also bounds connect and socket reads, not only the wait
    headers: Mapping[str, str] | None = None,
) -> str | None:
    """The endpoint URL if a GET to ``url`` opens an HTTP+SSE stream, else None;
    raises CarrierError (unreached) when no connection can be made at all.

    The spec's fallback test: the first event of a legacy server's stream is
    ``endpoint``.  The probe's stream (and its session) is closed afterwards.
    """
    target = URL(url)
    client_timeout = aiohttp.ClientTimeout(connect=timeout, sock_connect=timeout, sock_read=timeout)
    try:
        async with asyncio.timeout(timeout):
            async with session.get(
                target,
                headers=merge_headers(headers, Accept=EVENT_STREAM),
                timeout=client_timeout,
                allow_redirects=False,
            ) as resp:
                if resp.status != 200 or resp.content_type != EVENT_STREAM:
                    return None
                parser = SseParser(MAX_ERROR_BODY)
                while chunk := await resp.content.readany():
                    events = parser.feed(chunk)
                    if not events:
                        continue
                    if events[0].type != "endpoint":
                        return None
                    return str(_resolve_endpoint(resp.url, events[0].data))
                return None
    except CarrierError as exc:
        log.warning("HTTP+SSE probe refused", url=redacted(target), reason=str(exc))
        return None
    except (aiohttp.ClientConnectorError, ConnectionRefusedError) as exc:
        # Nobody listens there: unreachable (and nothing sent), not a server that
        # speaks no transport of ours.
        raise transport_error(exc, f"GET {redacted(target)}") from None
    except (aiohttp.ClientError, TimeoutError, OSError, SseError) as exc:
        log.debug("HTTP+SSE probe failed", url=redacted(target), reason=repr(exc))
        return None
