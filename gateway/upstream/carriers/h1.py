"""An HTTP/1.1 client for plain-http upstreams: a keep-alive pool and httptools.

aiohttp's client spends most of its CPU per request on what a keep-alive POST to a
known upstream does not need (request and response objects, URL handling, a timer
re-armed per read: the bench journal, round 3, `git show 3514f2e:bench/README.md`).
It serves only what the Streamable HTTP carrier POSTs; its responses look like
aiohttp's where the carrier reads them (``status``, ``headers``, ``content_type``,
``content_length``, ``content.readany()``, ``release()``, ``close()``), and fail
with aiohttp's exception types, so the carrier's error handling is the same for
both.  What it does not do (TLS, credentials in the URL, redirects) the carrier
leaves to aiohttp.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Mapping
from typing import cast

import aiohttp
import httptools
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.core.transports import release

# Idle pooled connections are closed after this long (aiohttp's default keep-alive),
# or sooner when the server says (`Keep-Alive: timeout=N`) it keeps them less long.
KEEPALIVE_S = 15.0
# A connection is not reused this close to the server's own idle timeout: its close
# may already be on the way, and a POST written onto it would be lost.
_KEEPALIVE_MARGIN_S = 1.0
# Buffered body bytes past which the socket stops being read until the reader catches up.
_HIGH_WATER = 256 * 1024
_USER_AGENT = f"Python/3 aiohttp/{aiohttp.__version__}"
# Headers this client writes itself.
_OWN = frozenset({"host", "content-length", "user-agent", "connection", "transfer-encoding"})
# A lost connection's parser (bound to nothing, fed nothing): its own is let go.
_NO_PARSER = httptools.HttpResponseParser(object())


def usable(url: URL) -> bool:
    """Whether this client can carry requests to ``url`` (plain http, no userinfo)."""
    return url.scheme == "http" and url.user is None and url.host is not None


class _Content:
    """A response body as it arrives: the subset of aiohttp's StreamReader used."""

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._on_eof: list[Callable[[], None]] = []

    def is_eof(self) -> bool:
        return self._eof

    def on_eof(self, callback: Callable[[], None]) -> None:
        if self._eof or self._error is not None:
            callback()
        else:
            self._on_eof.append(callback)

    async def readany(self) -> bytes:
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        self._conn.drained()
        return data

    # The connection's side.

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size > _HIGH_WATER:
            self._conn.pause()
        self._wake()

    def end(self, error: BaseException | None = None) -> None:
        if self._eof or self._error is not None:
            return
        if error is None:
            self._eof = True
        else:
            self._error = error
        self._wake()
        callbacks, self._on_eof = self._on_eof, []
        for callback in callbacks:
            callback()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class H1Response:
    """One response, its head read; its body arrives in ``content``."""

    def __init__(self, conn: _Connection, status: int, headers: CIMultiDict[str]) -> None:
        self._conn: _Connection | None = conn
        self.status = status
        self.headers = CIMultiDictProxy(headers)
        self.content = _Content(conn)

    @property
    def content_type(self) -> str:
        raw = self.headers.get("Content-Type")
        if raw is None:
            return "application/octet-stream"
        return raw.partition(";")[0].strip().lower()

    @property
    def content_length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        return int(raw) if raw is not None and raw.isdigit() else None

    def release(self) -> None:
        """Done with it: a complete response's connection is already pooled; an
        incomplete one's is dropped (as aiohttp does)."""
        self.close()

    def close(self) -> None:
        """Drop the connection unless the body already ended (it is pooled then)."""
        conn, self._conn = self._conn, None
        if conn is not None and not self.content.is_eof():
            self.content.end(aiohttp.ClientConnectionError("response closed"))
            conn.abort()

    def detach(self) -> None:
        self._conn = None


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request at a time."""

    def __init__(self, pool: H1Pool, key: tuple[str, int]) -> None:
        self._pool = pool
        self.key = key
        # Made by its loop's create_connection: kept, since on Python 3.11 every
        # asyncio.get_running_loop() is a getpid system call, and a call asked for
        # it three times here.
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._head: asyncio.Future[H1Response] | None = None
        self._headers: CIMultiDict[str] = CIMultiDict()
        self._response: H1Response | None = None
        # An informational (1xx) head: skipped, the real one follows.
        self._interim = False
        self._paused = False
        self.closed = False
        self.idle_since = 0.0
        self.keepalive = KEEPALIVE_S
        # Silence bound (aiohttp's sock_read): checked by one timer, not re-armed per read.
        self._read_timeout: float | None = None
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------- requests

    def send(self, data: bytes, read_timeout: float | None) -> asyncio.Future[H1Response]:
        assert self.transport is not None
        loop = self.loop
        self._head = loop.create_future()
        self._headers = CIMultiDict()
        self._read_timeout = read_timeout
        self._last_read = loop.time()
        if read_timeout is not None:
            # One timer per connection, kept across requests (it finds an idle
            # connection and lets go); re-armed only if it would fire too late.
            due = self._last_read + read_timeout
            timer = self._timer
            if timer is None or timer.when() > due:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(due, self._check_silence)
        self.transport.write(data)
        return self._head

    def _check_silence(self) -> None:
        self._timer = None
        if self._read_timeout is None or self.closed or self._paused:
            return
        if self._head is None and self._response is None:
            return
        loop = self.loop
        due = self._last_read + self._read_timeout
        if loop.time() < due:
            self._timer = loop.call_at(due, self._check_silence)
            return
        self._fail(aiohttp.ServerTimeoutError("Timeout on reading data from socket"))

    # ------------------------------------------------------- flow control

    def pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def drained(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()
            self._last_read = self.loop.time()
            if self._timer is None and self._read_timeout is not None:
                self._timer = self.loop.call_at(
                    self._last_read + self._read_timeout, self._check_silence
                )

    def abort(self) -> None:
        self.closed = True
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------ protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._head is None and self._response is None:
            # Bytes nobody asked for: the connection cannot be trusted for the next request.
            self.abort()
            return
        if self._read_timeout is not None:
            self._last_read = self.loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(aiohttp.ClientPayloadError(f"upstream sent invalid HTTP: {exc}"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        self._pool.forget(self)
        if self._response is not None and self._until_close():
            self._complete()  # a body delimited by the end of the connection
        else:
            self._fail(aiohttp.ServerDisconnectedError())
        # The parser's callbacks are this protocol's methods, and the transport refers
        # to itself (Python 3.11): both dropped, so all goes by reference counting.
        self._parser = _NO_PARSER
        release(self.transport)

    def _until_close(self) -> bool:
        assert self._response is not None
        headers = self._response.headers
        chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        return "Content-Length" not in headers and not chunked

    def _fail(self, error: BaseException) -> None:
        head, self._head = self._head, None
        if head is not None and not head.done():
            head.set_exception(error)
        response, self._response = self._response, None
        if response is not None:
            response.content.end(error)
            response.detach()
        if not self.closed:
            self.abort()

    # ------------------------------------------------------ parser callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.add(
            name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape")
        )

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            self._interim = True
            self._headers = CIMultiDict()
            return
        head, self._head = self._head, None
        if head is None:  # a second answer to one request: not to be trusted
            self.abort()
            return
        response = H1Response(self, status, self._headers)
        self._response = response
        if not head.done():
            head.set_result(response)

    def on_body(self, body: bytes) -> None:
        if self._response is not None:
            self._response.content.feed(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete()

    def _complete(self) -> None:
        # The silence timer stays: the next request on this connection reuses it.
        response, self._response = self._response, None
        if response is not None:
            response.content.end()
            response.detach()
        if self.closed or not self._parser.should_keep_alive():
            self.abort()
            return
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        if response is not None:
            self.keepalive = _keepalive(response.headers.get("Keep-Alive"))
        self._pool.put(self)


class H1Pool:
    """Keep-alive connections per (host, port), at most ``max_connections`` open at
    once: past that a request is refused at once (a route's calls in flight and
    parked calls are bounded anyway; this keeps one route from taking every
    descriptor the process has)."""

    def __init__(
        self, default_headers: Mapping[str, str] | None = None, max_connections: int = 1024
    ) -> None:
        self.max_connections = max_connections
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._defaults = dict(default_headers or {})
        self._sweeper: asyncio.TimerHandle | None = None
        self._closed = False

    async def request(
        self,
        url: URL,
        body: bytes,
        headers: Mapping[str, str],
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> H1Response:
        """POST ``body`` to ``url``; the response once its head is read."""
        assert url.host is not None and url.port is not None
        key = (url.host, url.port)
        data = _encode(url, body, {**self._defaults, **headers})
        conn = self._take(key) or await self._connect(key, connect_timeout)
        try:
            return await conn.send(data, read_timeout)
        except BaseException:
            conn.abort()
            raise

    def counts(self) -> tuple[int, int]:
        """Open connections: (carrying a request, idle in the pool)."""
        idle = sum(len(conns) for conns in self._idle.values())
        return max(0, len(self._all) - idle), idle

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = idle[-1].loop.time()  # the clock put() read, without asking for the loop
        while idle:
            conn = idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since >= conn.keepalive:
                conn.abort()
                continue
            return conn
        return None

    async def _connect(self, key: tuple[str, int], within: float | None) -> _Connection:
        if self._closed:
            raise aiohttp.ClientConnectionError("the upstream client is closed")
        if len(self._all) >= self.max_connections:
            raise aiohttp.ClientConnectionError(
                f"the gateway holds its maximum of {self.max_connections} connections"
                " to this upstream (route option max_connections)"
            )
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(within):
            _, conn = await loop.create_connection(lambda: _Connection(self, key), *key)
        self._all.add(conn)
        return conn

    def put(self, conn: _Connection) -> None:
        if self._closed:
            conn.abort()
            return
        conn.idle_since = conn.loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        if self._sweeper is None:
            self._sweeper = conn.loop.call_later(KEEPALIVE_S, self._sweep)

    def forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)

    def _sweep(self) -> None:
        """Close connections idle for the keep-alive time; come back while any remain."""
        self._sweeper = None
        now = asyncio.get_running_loop().time()
        for idle in self._idle.values():
            for conn in [c for c in idle if now - c.idle_since >= c.keepalive]:
                idle.remove(conn)
                conn.abort()
        if any(self._idle.values()):
            self._sweeper = asyncio.get_running_loop().call_later(KEEPALIVE_S / 2, self._sweep)

    def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()


def _keepalive(header: str | None) -> float:
    """How long an idle connection may be reused, from the server's `Keep-Alive`."""
    if header is None:
        return KEEPALIVE_S
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "timeout" and value.strip().isdigit():
            return min(KEEPALIVE_S, int(value.strip()) - _KEEPALIVE_MARGIN_S)
    return KEEPALIVE_S


@functools.lru_cache(maxsize=64)
def _request_line(url: URL) -> str:
    target = url.raw_path_qs or "/"
    # Bracketed IPv6, IDNA-encoded names, the port only when not the default.
    host = url.host_port_subcomponent
    return f"POST {target} HTTP/1.1\r\nHost: {host}\r\n"


def _encode(url: URL, body: bytes, headers: Mapping[str, str]) -> bytes:
    """The request's bytes: a POST with a Content-Length body."""
    lines = [_request_line(url)]
    agent = _USER_AGENT
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in _OWN:
            if lowered == "user-agent":
                agent = value
            continue
        if ":" in name:
            raise ValueError(f"invalid character in the {name!r} header name")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"User-Agent: {agent}\r\nContent-Length: {len(body)}\r\n\r\n")
    head = "".join(lines)
    # Each line ends in CRLF and nothing else may hold CR or LF (header injection):
    # counted in C rather than checked header by header.
    expected = len(lines) + 3
    if head.count("\n") != expected or head.count("\r") != expected:
        raise ValueError("a header holds a CR or LF character")
    try:
        return head.encode("latin-1") + body
    except UnicodeEncodeError:
        return head.encode("utf-8") + body
