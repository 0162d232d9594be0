"""HTTP carriers: Streamable HTTP and the legacy HTTP+SSE transport.

Both are revision-agnostic: callers pass every protocol header (session id,
protocol version, credentials) and read what they need from the answers.
The ``aiohttp.ClientSession`` is shared and owned by the caller, so these
classes never close it; they close only the responses they opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import EllipsisType
from typing import Any, Protocol

import aiohttp
import orjson
import structlog
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.core.jsonrpc import is_response as _is_response
from gateway.core.jsonrpc import valid_id as _is_id
from gateway.upstream.carriers.base import Carrier, CarrierError, Exchange, Message
from gateway.upstream.carriers.demux import Demux
from gateway.upstream.carriers.h1 import H1Pool, usable
from gateway.upstream.carriers.redirects import MAX_HOPS, RedirectPolicy, is_redirect, redacted
from gateway.wire.sse import DEFAULT_MAX_EVENT_SIZE, SseError, SseEvent, SseParser

log = structlog.get_logger(__name__)

JSON = "application/json"
EVENT_STREAM = "text/event-stream"

# Error bodies are only kept for diagnostics and era probing: no need for more.
_MAX_ERROR_BODY = 64 * 1024
# A call's stream the upstream ends before answering is resumed (GET with
# `Last-Event-ID`) at most this often, waiting the `retry` it asked for, bounded.
MAX_RESUMES = 5
MAX_RETRY_MS = 5000
# Opens the GET that resumes a stream after the given event id (None: refused).
Reopen = Callable[[str], Awaitable[aiohttp.ClientResponse | None]]
_SEND_OK = frozenset({200, 202, 204})
# Notifications and answers one Streamable HTTP carrier (one route) sends at once.
MAX_SENDS = 16
# How long an answered SSE response may take to end before its connection is dropped.
_DRAIN_S = 5.0


# --------------------------------------------------------------------------- helpers


class _Body(Protocol):
    async def readany(self) -> bytes: ...
    def is_eof(self) -> bool: ...
    def on_eof(self, callback: Callable[[], None]) -> None: ...


class Response(Protocol):
    """What the carriers read of a response: aiohttp's, or the lean client's (h1)."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> CIMultiDictProxy[str]: ...
    @property
    def content(self) -> _Body: ...
    @property
    def content_type(self) -> str: ...
    @property
    def content_length(self) -> int | None: ...
    def release(self) -> Any: ...
    def close(self) -> None: ...


def _answers(message: Message, request_id: Any) -> bool:
    """Whether ``message`` is the response to ``request_id``.

    A null id counts: a server that could not read the request's id answers
    with ``"id": null``, and on a per-request stream that error is ours.
    """
    return _is_response(message) and (message["id"] == request_id or message["id"] is None)


def _headers(*layers: Mapping[str, str] | None, **fixed: str) -> CIMultiDict[str]:
    """Merge header layers (later wins, case-insensitively); ``fixed`` wins over all."""
    merged: CIMultiDict[str] = CIMultiDict()
    for layer in layers:
        if layer:
            for key, value in layer.items():
                merged[key] = value
    for key, value in fixed.items():
        merged[key.replace("_", "-")] = value
    return merged


# Query strings carry legacy session ids and sometimes tokens: keep them out of errors.
_redact = redacted


def _transport_error(exc: BaseException, what: str) -> CarrierError:
    # aiohttp's timeout errors are also ClientErrors, so test for timeouts first.
    if isinstance(exc, TimeoutError):
        return CarrierError(f"{what}: timed out", timeout=True)
    return CarrierError(f"{what}: {type(exc).__name__}: {exc}")


async def _open(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    *,
    headers: CIMultiDict[str],
    client_timeout: aiohttp.ClientTimeout,
    redirects: RedirectPolicy,
    data: bytes | None = None,
) -> aiohttp.ClientResponse:
    """One request; a redirect is followed only as ``redirects`` allows (never, by
    default), and never to another origin."""
    for hops in range(MAX_HOPS + 1):
        resp = await _open_once(session, method, url, headers, client_timeout, data)
        if not is_redirect(resp.status):
            return resp
        resp.close()
        url = redirects.follow(resp.status, resp.headers.get("Location"), url, hops)
    raise AssertionError("unreachable: RedirectPolicy.follow refuses past MAX_HOPS")


async def _open_once(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: CIMultiDict[str],
    client_timeout: aiohttp.ClientTimeout,
    data: bytes | None,
) -> aiohttp.ClientResponse:
    if session.closed:  # shutting down: what was still to be sent is not
        raise CarrierError(f"{method} {_redact(url)}: the gateway is shutting down")
    try:
        return await session.request(
            method,
            url,
            data=data,
            headers=headers,
            timeout=client_timeout,
            allow_redirects=False,
        )
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise _transport_error(exc, f"{method} {_redact(url)}") from exc


async def _read_body(resp: Response, limit: int) -> bytes:
    """The whole body, refusing more than ``limit`` bytes."""
    if resp.content_length is not None and resp.content_length > limit:
        raise CarrierError(
            f"upstream body of {resp.content_length} bytes exceeds the limit of {limit}",
            status=resp.status,
        )
    buf = bytearray()
    try:
        while chunk := await resp.content.readany():
            buf += chunk
            if len(buf) > limit:
                raise CarrierError(
                    f"upstream body exceeds the limit of {limit} bytes",
                    status=resp.status,
                    body=bytes(buf[:_MAX_ERROR_BODY]),
                )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport_error(exc, "reading the upstream body") from exc
    return bytes(buf)


async def _check_sent(resp: Response) -> None:
    """A notification or response POSTed upstream must be accepted (202/200/204)."""
    if resp.status not in _SEND_OK:
        body = await _error_body(resp)
        raise CarrierError(
            f"upstream refused a message with HTTP {resp.status}", status=resp.status, body=body
        )


async def _error_body(resp: Response) -> bytes:
    """Up to ``_MAX_ERROR_BODY`` bytes of an error response; never raises."""
    try:
        return await _read_body(resp, _MAX_ERROR_BODY)
    except CarrierError as exc:
        return exc.body


def _jsonrpc_error(body: bytes) -> Message | None:
    """The JSON-RPC error response in a non-2xx body, if that is what it is."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if (
        isinstance(payload, dict)
        and isinstance(payload.get("error"), dict)
        and "method" not in payload
    ):
        return payload
    return None


def _decode_messages(data: bytes | str, *, status: int | None = None) -> list[Message]:
    """One JSON-RPC message or a batch of them, as a list."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CarrierError(
            "upstream sent a body that is not JSON", status=status, body=_excerpt(data)
        ) from exc
    items = payload if isinstance(payload, list) else [payload]
    if not items or not all(isinstance(item, dict) for item in items):
        raise CarrierError(
            "upstream sent JSON that is not a JSON-RPC message", status=status, body=_excerpt(data)
        )
    return items


def _excerpt(data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return raw[:_MAX_ERROR_BODY]


class _Listed:
    """Messages already read (a JSON body), iterated without an async generator: the
    loop's hooks for one (a WeakSet entry, a finaliser) cost more than the iteration."""

    __slots__ = ("_items",)

    def __init__(self, messages: list[Message]) -> None:
        self._items = iter(messages)

    def __aiter__(self) -> _Listed:
        return self

    async def __anext__(self) -> Message:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None


def _event_messages(event: SseEvent) -> list[Message]:
    """The JSON-RPC messages an SSE event carries (none for other event types)."""
    # Empty data: a priming event that only sets the resumption id.
    if event.type != "message" or not event.data:
        return []
    return _decode_messages(event.data)


class _Stream:
    """One open SSE response read as JSON-RPC messages.

    Closing it from another task (``Exchange.aclose``, ``Carrier.close``)
    ends the iteration quietly instead of surfacing the disconnect as an error.
    """

    def __init__(
        self,
        resp: Response,
        max_event_size: int,
        registry: set[_Stream],
        reopen: Reopen | None = None,
    ) -> None:
        self._resp = resp
        self._max_event_size = max_event_size
        self._registry = registry
        self.closed = False
        # Answered: the response is left to end on its own (see _finish).
        self._answered = False
        registry.add(self)
        # Resumption: a GET with `Last-Event-ID` when the stream ends before its answer.
        self._reopen = reopen
        self._last_id: str | None = None
        self._retry_ms = 0
        self._resumes = 0

    def close(self) -> None:
        """Drop the response (idempotent; a no-op once answered)."""
        self.closed = True
        self._registry.discard(self)
        if not self._answered:
            # close(), not release(): dropping the connection is what tells the
            # upstream to stop (Streamable HTTP cancellation).
            self._resp.close()

    async def aclose(self) -> None:
        self.close()

    async def messages(
        self, request_id: Any = None, *, answer: bool = False
    ) -> AsyncIterator[Message]:
        """Yield messages; with ``answer``, stop after the response to ``request_id``.

        With ``answer``, an end of stream before that response is an error;
        without it (the GET stream), a clean end just ends the iteration.
        """
        parser = SseParser(self._max_event_size)
        try:
            while not self.closed:
                try:
                    chunk = await self._resp.content.readany()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    if self.closed:
                        return
                    if answer and not isinstance(exc, TimeoutError):
                        if await self._resume():
                            parser = SseParser(self._max_event_size)
                            continue
                        raise CarrierError(
                            f"upstream closed the stream before answering: {exc}"
                        ) from exc
                    raise _transport_error(exc, "reading the upstream SSE stream") from exc
                if not chunk:
                    if answer and await self._resume():
                        parser = SseParser(self._max_event_size)
                        continue
                    break
                try:
                    events = parser.feed(chunk)
                except SseError as exc:
                    raise CarrierError(str(exc)) from exc
                for event in events:
                    self._last_id = event.id or self._last_id
                    self._retry_ms = event.retry if event.retry is not None else self._retry_ms
                    if answer and event.type == "endpoint":
                        # An HTTP+SSE server opened its stream in answer to a POST:
                        # it will never answer here, so say so (as a refusal) now.
                        raise CarrierError(
                            "the upstream answered with an HTTP+SSE stream, not Streamable HTTP",
                            status=405,
                        )
                    for message in _event_messages(event):
                        if answer and _answers(message, request_id):
                            # Let go of the response before handing over the
                            # answer: a consumer may stop iterating right there.
                            self._finish()
                            yield message
                            return
                        yield message
            if answer and not self.closed:
                raise CarrierError("upstream closed the stream before answering")
        finally:
            self.close()

    async def _resume(self) -> bool:
        """The upstream ended the stream before answering but gave event ids: wait
        the `retry` it asked for (bounded) and go on reading a GET with `Last-Event-ID`."""
        if self._reopen is None or self._last_id is None or self._resumes >= MAX_RESUMES:
            return False
        self._resumes += 1
        await asyncio.sleep(min(self._retry_ms, MAX_RETRY_MS) / 1000)
        resp = await self._reopen(self._last_id)
        if resp is None or self.closed:
            if resp is not None:
                resp.close()
            return False
        self._resp.close()
        self._resp = resp
        return True

    def _finish(self) -> None:
        """The upstream answered: let the connection go back to the pool.

        release() before the body's end (the chunked terminator often arrives
        just after the answer's event) would make aiohttp close the connection.
        Left alone, aiohttp pools it by itself at the end of the body; an
        upstream that does not end it within ``_DRAIN_S`` loses it.
        """
        self.closed = True
        self._answered = True
        self._registry.discard(self)
        resp = self._resp
        if resp.content.is_eof():
            resp.release()
            return
        timer = asyncio.get_running_loop().call_later(_DRAIN_S, resp.close)
        resp.content.on_eof(timer.cancel)


# --------------------------------------------------------------------------- Streamable HTTP


class StreamableHttpCarrier(Carrier):
    """The Streamable HTTP transport: one endpoint taking POST, GET and DELETE.

    ``read_timeout`` bounds the silence on a request's answer: until the status
    line (first byte) and then between chunks of its body (None: the caller bounds
    the call in all, as the link does).  ``send_timeout`` does the same for a
    notification's or an answer's POST and a DELETE (default: ``read_timeout``);
    ``listen_timeout`` for the GET stream, which may be idle for long; None means
    no bound.
    """

    def __init__(
        self,
        url: str | URL,
        session: aiohttp.ClientSession,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float | None = 300.0,
        listen_timeout: float | None = None,
        max_message_size: int = DEFAULT_MAX_EVENT_SIZE,
        redirects: RedirectPolicy | None = None,
        send_timeout: float | EllipsisType | None = ...,
        max_sends: int = MAX_SENDS,
    ) -> None:
        self.url = URL(url)
        self._session = session
        self._redirects = redirects or RedirectPolicy()
        self._post_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        # Notifications and answers in flight at once: an upstream that asks a flood of
        # questions gets its answers over a few pooled connections, not one each.
        self._sends = asyncio.Semaphore(max_sends)
        self._send_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout if send_timeout is ... else send_timeout,
        )
        self._listen_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=listen_timeout
        )
        self._max_message_size = max_message_size
        self._streams: set[_Stream] = set()
        # POSTs to a plain-http upstream go through the lean client (h1); GET and
        # DELETE, and a POST that a route lets follow a redirect, through aiohttp.
        self._lean = H1Pool(session.headers) if usable(self.url) else None

    async def start(self) -> None:
        """Nothing to open: every message is its own HTTP request."""

    async def request(self, message: Message, headers: Mapping[str, str]) -> Exchange:
        return await self._post(message, headers, self._post_timeout)

    async def stream(self, message: Message, headers: Mapping[str, str]) -> Exchange:
        """A request whose answer is a stream that may stay quiet for long (a listen):
        the GET stream's idle bound applies, not a call's."""
        return await self._post(message, headers, self._listen_timeout)

    async def _post(
        self, message: Message, headers: Mapping[str, str], limits: aiohttp.ClientTimeout
    ) -> Exchange:
        request_id = message.get("id")
        if not _is_id(request_id):
            raise ValueError("request() needs a JSON-RPC request with a string or integer id")
        resp = await self._open_post(orjson.dumps(message), headers, limits)
        try:
            return await self._exchange(resp, request_id, self._reopener(headers, limits))
        except BaseException:
            resp.close()
            raise

    async def _open_post(
        self, body: bytes, headers: Mapping[str, str], limits: aiohttp.ClientTimeout
    ) -> Response:
        merged = _headers(headers, Accept=f"{JSON}, {EVENT_STREAM}", Content_Type=JSON)
        url = self.url
        if self._lean is not None:
            try:
                resp = await self._lean.request(
                    url,
                    body,
                    merged,
                    connect_timeout=limits.sock_connect,
                    read_timeout=limits.sock_read,
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise _transport_error(exc, f"POST {_redact(url)}") from exc
            if not is_redirect(resp.status):
                return resp
            resp.close()
            # Refused unless the route allows it; then aiohttp sends it where it points.
            url = self._redirects.follow(resp.status, resp.headers.get("Location"), url, 0)
        return await _open(
            self._session,
            "POST",
            url,
            data=body,
            headers=merged,
            client_timeout=limits,
            redirects=self._redirects,
        )

    def _reopener(self, headers: Mapping[str, str], limits: aiohttp.ClientTimeout) -> Reopen:
        """How a call's stream is resumed: a GET with the call's headers and the last id."""

        async def reopen(last_event_id: str) -> aiohttp.ClientResponse | None:
            fixed = _headers(headers, Accept=EVENT_STREAM, Last_Event_ID=last_event_id)
            fixed.popall("Content-Type", None)
            try:
                resp = await _open(
                    self._session,
                    "GET",
                    self.url,
                    headers=fixed,
                    client_timeout=limits,
                    redirects=self._redirects,
                )
            except CarrierError:
                return None
            if resp.status == 200 and resp.content_type == EVENT_STREAM:
                return resp
            resp.release()
            return None

        return reopen

    async def _exchange(
        self, resp: Response, request_id: Any, reopen: Reopen | None = None
    ) -> Exchange:
        status = resp.status
        if status in (401, 403):
            # Credentials refused: the client must hear it as such, whatever the body.
            raise CarrierError(
                f"upstream answered HTTP {status}",
                status=status,
                body=await _error_body(resp),
                challenge=resp.headers.get("WWW-Authenticate"),
            )
        if not 200 <= status < 300:
            body = await _error_body(resp)
            error = _jsonrpc_error(body)
            if error is None:
                raise CarrierError(f"upstream answered HTTP {status}", status=status, body=body)
            resp.release()
            return Exchange(status, resp.headers, _Listed([error]))
        if resp.content_type == EVENT_STREAM:
            stream = _Stream(resp, self._max_message_size, self._streams, reopen)
            return Exchange(
                status,
                resp.headers,
                stream.messages(request_id, answer=True),
                closer=stream.aclose,
            )
        body = await _read_body(resp, self._max_message_size)
        resp.release()
        if resp.content_type != JSON:
            what = "no body" if not body else f"content type {resp.content_type!r}"
            raise CarrierError(
                f"upstream answered a request with HTTP {status} and {what}",
                status=status,
                body=body[:_MAX_ERROR_BODY],
            )
        messages = _decode_messages(body, status=status)
        final = next((m for m in messages if _answers(m, request_id)), None)
        if final is None:
            raise CarrierError(
                "upstream's JSON answer holds no response to the request",
                status=status,
                body=body[:_MAX_ERROR_BODY],
            )
        # Keep the exchange's promise that the response comes last.
        ordered = [m for m in messages if m is not final] + [final]
        return Exchange(status, resp.headers, _Listed(ordered))

    def pool_counts(self) -> tuple[int, int]:
        """The lean client's open connections: (carrying a request, idle)."""
        return self._lean.counts() if self._lean is not None else (0, 0)

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        async with self._sends:
            resp = await self._open_post(orjson.dumps(message), headers, self._send_timeout)
            try:
                await _check_sent(resp)
            finally:
                resp.release()

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        resp = await _open(
            self._session,
            "GET",
            self.url,
            headers=_headers(headers, Accept=EVENT_STREAM),
            client_timeout=self._listen_timeout,
            redirects=self._redirects,
        )
        try:
            if resp.status == 405:
                resp.release()
                return None
            if not 200 <= resp.status < 300:
                body = await _error_body(resp)
                raise CarrierError(
                    f"upstream refused the GET stream with HTTP {resp.status}",
                    status=resp.status,
                    body=body,
                )
            if resp.content_type != EVENT_STREAM:
                raise CarrierError(
                    f"upstream answered the GET stream with {resp.content_type!r}",
                    status=resp.status,
                )
        except BaseException:
            resp.close()
            raise
        return _Stream(resp, self._max_message_size, self._streams).messages()

    async def terminate(self, headers: Mapping[str, str]) -> None:
        resp = await _open(
            self._session,
            "DELETE",
            self.url,
            headers=_headers(headers),
            client_timeout=self._send_timeout,
            redirects=self._redirects,
        )
        try:
            # 404: the session is already gone; 405: the server keeps sessions itself.
            if not 200 <= resp.status < 300 and resp.status not in (404, 405):
                body = await _error_body(resp)
                raise CarrierError(
                    f"upstream refused to end the session with HTTP {resp.status}",
                    status=resp.status,
                    body=body,
                )
        finally:
            resp.release()

    async def close(self) -> None:
        for stream in list(self._streams):
            stream.close()
        if self._lean is not None:
            self._lean.close()


# --------------------------------------------------------------------------- HTTP+SSE (legacy)


class _LegacyConnection:
    """One HTTP+SSE stream and everything scoped to it (its session lives and dies with it)."""

    def __init__(self, resp: aiohttp.ClientResponse, max_queued: int) -> None:
        self.resp = resp
        self.endpoint: URL | None = None
        self.endpoint_ready: asyncio.Future[URL] = asyncio.get_running_loop().create_future()
        self.demux = Demux(max_queued, "HTTP+SSE", log)
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
    try:
        target = base.join(URL(text, encoded=True))
    except ValueError as exc:
        raise CarrierError(f"upstream sent an invalid endpoint {text!r}") from exc
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
    on the stream (None: no bound).
    """

    cancels_by_close = False
    is_session = True

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
        self._conn: _LegacyConnection | None = None
        self._lock = asyncio.Lock()
        # close() may run while start() connects: it stops that connection
        # too, or, before there is one, bumps the generation start() checks.
        self._connecting: _LegacyConnection | None = None
        self._generation = 0

    @property
    def endpoint_url(self) -> str | None:
        """Where messages are POSTed, once the upstream has said so."""
        conn = self._conn
        return str(conn.endpoint) if conn is not None and conn.endpoint is not None else None

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
                resp = await _open(
                    self._session,
                    "GET",
                    self.url,
                    headers=_headers(self._headers, Accept=EVENT_STREAM),
                    client_timeout=self._stream_timeout,
                    redirects=self._redirects,
                )
                if generation != self._generation:
                    # close() ran before there was a connection for it to stop.
                    resp.close()
                    raise CarrierError("the carrier was closed while starting")
                if not 200 <= resp.status < 300 or resp.content_type != EVENT_STREAM:
                    try:
                        body = await _error_body(resp)
                    finally:
                        resp.close()
                    raise CarrierError(
                        f"upstream answered the HTTP+SSE GET with HTTP {resp.status}"
                        f" and {resp.content_type!r}",
                        status=resp.status,
                        body=body,
                    )
                conn = self._connecting = _LegacyConnection(resp, self._max_queued)
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
            error = _transport_error(exc, "HTTP+SSE stream")
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
            messages = _event_messages(event)
        except CarrierError as exc:
            # One garbled event must not end the session for everyone.
            log.warning("dropping an HTTP+SSE event", reason=str(exc))
            return
        for message in messages:
            conn.demux.route(message)

    def _open_conn(self) -> _LegacyConnection:
        conn = self._conn
        if conn is None or conn.closed or conn.endpoint is None:
            raise CarrierError("the HTTP+SSE stream is not open (call start())")
        return conn

    async def _post(
        self, conn: _LegacyConnection, message: Message, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        assert conn.endpoint is not None
        resp = await _open(
            self._session,
            "POST",
            conn.endpoint,
            data=orjson.dumps(message),
            headers=_headers(self._headers, headers, Content_Type=JSON),
            client_timeout=self._post_timeout,
            redirects=self._redirects,
        )
        try:
            await _check_sent(resp)
            return resp.headers
        finally:
            resp.release()

    async def request(self, message: Message, headers: Mapping[str, str]) -> Exchange:
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

        async def closer() -> None:
            # No HTTP response to drop here: the caller cancels in-band.
            conn.demux.forget(key, queue)
            queue.close()

        return Exchange(200, response_headers, messages(), closer=closer)

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
    """The endpoint URL if a GET to ``url`` opens an HTTP+SSE stream, else None.

    The spec's fallback test: the first event of a legacy server's stream is
    ``endpoint``.  The probe's stream (and its session) is closed afterwards.
    """
    target = URL(url)
    client_timeout = aiohttp.ClientTimeout(connect=timeout, sock_connect=timeout, sock_read=timeout)
    try:
        async with asyncio.timeout(timeout):
            async with session.get(
                target,
                headers=_headers(headers, Accept=EVENT_STREAM),
                timeout=client_timeout,
                allow_redirects=False,
            ) as resp:
                if resp.status != 200 or resp.content_type != EVENT_STREAM:
                    return None
                parser = SseParser(_MAX_ERROR_BODY)
                while chunk := await resp.content.readany():
                    events = parser.feed(chunk)
                    if not events:
                        continue
                    if events[0].type != "endpoint":
                        return None
                    return str(_resolve_endpoint(resp.url, events[0].data))
                return None
    except CarrierError as exc:
        log.warning("HTTP+SSE probe refused", url=_redact(target), reason=str(exc))
        return None
    except (aiohttp.ClientError, TimeoutError, OSError, SseError) as exc:
        log.debug("HTTP+SSE probe failed", url=_redact(target), reason=repr(exc))
        return None
