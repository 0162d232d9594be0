"""The lane: the usual Streamable HTTP POST served straight off the socket.

aiohttp's server was the largest library cost left per request (its request handler,
router, middleware, response and stream writer objects); parsed by httptools and
answered with one write, the same POST costs a fraction of that (the bench journal,
round 4: `git show 3514f2e:bench/README.md`).  The lane carries only what it does
exactly as aiohttp would: an HTTP/1.1 keep-alive POST to a route's own path (no
query), framed by Content-Length within the route's body limit, with a Host header.
Any other request -- a GET stream, a DELETE, a chunked or oversized body, an
``Expect`` or ``Upgrade`` header, the ops endpoints, bytes that do not parse --
hands the connection to aiohttp for good, with every byte of that request, so that
aiohttp parses and answers it as if it had held the connection from the start.

Requests are answered one at a time, in order: bytes of a pipelined request wait
(bounded; reading pauses past it) until the answer before it has gone out.
"""

from __future__ import annotations

import asyncio
import email.utils
import http
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httptools
import structlog
from aiohttp import web

from gateway.core.limits import DescriptorBudget
from gateway.core.transports import release
from gateway.transport.http import Endpoint
from gateway.transport.post import Sink, WholeAnswer, gateway_fault

log = structlog.get_logger(__name__)

# Bytes buffered while an answer is being made (a pipelined request) before reading
# pauses; and the most a request's head may take before aiohttp is given it (its
# parser then refuses what is too large, with its own limits).
BUFFER_LIMIT = 256 * 1024
HEAD_LIMIT = 32 * 1024
FIELD_LIMIT = 8190  # aiohttp's max_field_size / max_line_size
MAX_FIELDS = 100
_CHUNKED = b"Transfer-Encoding: chunked\r\n"
_LAST_CHUNK = b"0\r\n\r\n"
_OWS = (" ", "\t")
# Header names seen, decoded once: (as sent, lower-case).  Bounded: names are few.
_NAMES: dict[bytes, tuple[str, str]] = {}
NAMES_KEPT = 512


@dataclass
class LaneHooks:
    """What the lane asks of the gateway around each request (aiohttp's middleware
    does the same for the requests it carries)."""

    # Binds the request's log context; returns its request id.
    context: Callable[[Mapping[str, str]], str]
    # Whether the process is short of descriptors, and the refusal it answers then.
    budget: DescriptorBudget
    overloaded: Callable[[], WholeAnswer]
    # The requests in flight, which a drain waits for.
    requests: set[asyncio.Task[Any]]


# (route path, headers by lower-case name, body) -> answered here?
Local = Callable[[str, Mapping[str, str], bytes], bool]


class Lane:
    """The lane's side of one listening socket: its connections, the routes it
    carries, and aiohttp's server, which takes over whatever it does not carry."""

    def __init__(
        self,
        server: web.Server,
        endpoints: Mapping[str, Endpoint],
        hooks: LaneHooks,
        idle_timeout: float,
        local: Local | None = None,
        write_timeout: float = 300.0,
    ) -> None:
        self.server = server
        # In a cluster: whether a POST is this replica's to answer (else aiohttp's
        # cluster middleware relays it to its owner).
        self.local = local
        self.endpoints = {path.encode(): endpoint for path, endpoint in endpoints.items()}
        self.hooks = hooks
        self.idle_timeout = idle_timeout
        # How long a client may read nothing of an answer it is behind on.
        self.write_timeout = write_timeout
        self.connections: set[LaneConnection] = set()
        self.closing = False
        self.handoffs = 0  # connections given to aiohttp

    def __call__(self) -> LaneConnection:
        return LaneConnection(self)

    def pre_shutdown(self) -> None:
        """No new requests: idle connections close now, busy ones after their answer."""
        self.closing = True
        for connection in list(self.connections):
            connection.close_when_idle()

    def close_all(self) -> None:
        for connection in list(self.connections):
            connection.abort()


class _Stop(Exception):
    """Parsing stops here: a handoff, or a pipelined request that must wait."""


class LaneConnection(asyncio.Protocol):
    """One client connection while the lane carries it."""

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self.raw = bytearray()  # every byte since the current request began
        self.remote: str | None = None
        self.task: asyncio.Task[None] | None = None  # the request being answered
        self.close_after = False
        self.lost = False
        self._reset()
        # Idle (or a head too slow) past the deadline: closed.  One timer that, when it
        # fires early, waits again for the deadline, so an answer only moves the deadline.
        self._deadline = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._read_paused = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    def _reset(self) -> None:
        self.url = b""
        self.field_count = 0
        self.lowered: dict[str, str] = {}
        self.lengths = 0  # Content-Length fields seen
        self.field_too_large = False
        self.body: list[bytes] = []
        self.head_end = 0
        self.length = 0
        self.endpoint: Endpoint | None = None

    # ------------------------------------------------------------ the socket

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        peer = self.transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self.lane.connections.add(self)
        self._deadline = self.loop.time() + self.lane.idle_timeout
        self._idle_timer = self.loop.call_at(self._deadline, self._idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.parser = None  # it holds this protocol: freed by reference count, not by gc
        release(self.transport)  # so is the transport (Python 3.11)
        self.lane.connections.discard(self)
        self._disarm()
        if self.task is not None:
            self.task.cancel()  # the client is gone: so is its call (as aiohttp does)
        self._wake(ConnectionResetError("the client closed the connection"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake(None)

    def _wake(self, exc: Exception | None) -> None:
        waiter, self._drained = self._drained, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    async def drain(self) -> None:
        """Wait while the client is behind in reading; one that reads nothing for the
        write timeout is cut off (the answer is lost to it anyway)."""
        if self.lost:
            raise ConnectionResetError("the client closed the connection")
        if self._write_paused:
            self._drained = self.loop.create_future()
            try:
                async with asyncio.timeout(self.lane.write_timeout):
                    await self._drained
            except TimeoutError:
                log.info(
                    "client cut off: it read nothing for the write timeout",
                    remote=self.remote,
                    timeout=self.lane.write_timeout,
                )
                self.abort()
                raise ConnectionResetError("the client did not read its answer") from None

    def send(self, data: bytes) -> None:
        if self.lost or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.raw += data
        if self.task is not None or self.parser is None:
            # An answer is being made: a pipelined request waits its turn.
            if len(self.raw) > BUFFER_LIMIT and not self._read_paused:
                self._pause_reading()
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        parser = self.parser
        assert parser is not None
        try:
            parser.feed_data(data)
        except httptools.HttpParserError:
            # A callback stopped it (a request the lane does not carry; or, while an
            # answer is being made, a pipelined one), or bytes that do not parse: aiohttp
            # takes over, once any answer before them (same read) is out.
            self.parser = None
            if self.task is None:
                self._hand_over()
            return
        if self.endpoint is None and self.task is None and len(self.raw) > HEAD_LIMIT:
            self._hand_over()  # a head too large: aiohttp refuses it with its limits

    def _pause_reading(self) -> None:
        assert self.transport is not None
        self._read_paused = True
        self.transport.pause_reading()

    # ------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        if self.task is not None:
            raise _Stop  # pipelined: parsed again once the answer before it is out
        self._reset()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) > FIELD_LIMIT or len(value) > FIELD_LIMIT:
            self.field_too_large = True
        names = _NAMES.get(name)
        if names is None:
            key = name.decode("latin-1")
            names = (key, key.lower())
            if len(_NAMES) < NAMES_KEPT and len(name) <= 64:
                _NAMES[name] = names
        key, lower = names
        text = value.decode("utf-8", "surrogateescape")
        if text[-1:] in _OWS or text[:1] in _OWS:
            # Optional whitespace around a value is not part of it (RFC 9110 5.5), and
            # aiohttp's parser strips it too.
            text = text.strip(" \t")
        self.field_count += 1
        self.lowered[lower] = text
        if lower == "content-length":
            self.lengths += 1

    def on_headers_complete(self) -> None:
        endpoint = self._carried()
        head_end = _head_end(self.raw)
        if endpoint is None or head_end < 0:
            raise _Stop
        self.endpoint = endpoint
        self.head_end = head_end
        self.length = int(self.lowered["content-length"])
        self._deadline = math.inf  # no longer idle
        if len(self.raw) < head_end + self.length:  # the body is still on its way
            self._body_timer = self.loop.call_later(endpoint.route.body_timeout, self._body_late)

    def _carried(self) -> Endpoint | None:
        """The route whose endpoint answers this request here; None: aiohttp does."""
        parser = self.parser
        assert parser is not None
        if (
            self.lane.closing
            or parser.get_method() != b"POST"
            or parser.get_http_version() != "1.1"
            or not parser.should_keep_alive()
            or self.field_too_large
            or self.field_count > MAX_FIELDS
        ):
            return None
        endpoint = self.lane.endpoints.get(self.url)
        headers = self.lowered
        if endpoint is None or "host" not in headers or self.lengths != 1:
            return None
        if "transfer-encoding" in headers or "expect" in headers or "upgrade" in headers:
            return None
        length = headers["content-length"].strip()
        if not length.isdigit() or not length.isascii() or int(length) > endpoint.route.max_body:
            return None
        return endpoint

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        endpoint = self.endpoint
        assert endpoint is not None
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        local = self.lane.local
        if local is not None and not local(endpoint.route.path, self.lowered, body):
            raise _Stop  # another replica's: aiohttp's cluster middleware relays it
        end = self.head_end + self.length
        if self.raw[self.head_end : end] != body:
            # The framing is not what this lane measured: answer, then end the connection.
            self.close_after = True
        del self.raw[:end]
        self._dispatch(endpoint, body)

    # -------------------------------------------------------------- answering

    def _dispatch(self, endpoint: Endpoint, body: bytes | None) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._deadline = math.inf
        self.endpoint = None
        request = LanePost(self, self.lowered, self.length, body)
        self.task = self.loop.create_task(self._answer(endpoint, request))

    def _body_late(self) -> None:
        """The body did not arrive in time: answered so (the endpoint's words), and
        the connection ends after it (the rest of the body would follow)."""
        self._body_timer = None
        if self.task is None and self.endpoint is not None and not self.lost:
            self.parser = None
            self.close_after = True
            self._dispatch(self.endpoint, None)

    async def _answer(self, endpoint: Endpoint, request: LanePost) -> None:
        task = asyncio.current_task(self.loop)  # the loop given: no getpid (Python 3.11)
        assert task is not None
        requests = self.lane.hooks.requests
        requests.add(task)
        try:
            request.request_id = self.lane.hooks.context(request.lowered)
            hooks = self.lane.hooks
            if hooks.budget.reserve and hooks.budget.exhausted():
                answer: WholeAnswer | Sink = hooks.overloaded()
            else:
                answer = await endpoint.answer_post(request)
            if isinstance(answer, WholeAnswer):
                self.send(request.whole(answer))
                if self._write_paused:
                    await self.drain()  # a client that pipelines without reading waits
            else:
                await answer.write_eof()  # a stream the endpoint left open ends here
        except (ConnectionError, asyncio.CancelledError):
            self.close_after = True
        except Exception:
            log.exception("error handling a request")
            self.close_after = True
            if not request.started and not self.lost:
                self.send(request.whole(gateway_fault(request.request_id)))
        finally:
            requests.discard(task)
            self.task = None
            if not self.lost:
                self._next()

    def _next(self) -> None:
        """After an answer: end the connection, or wait for (or parse) the next request."""
        assert self.transport is not None
        if self.close_after or self.lane.closing:
            self.transport.close()
            return
        if self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()
        self._deadline = self.loop.time() + self.lane.idle_timeout
        if self.parser is None:
            self.parser = httptools.HttpRequestParser(self)
        if self.raw:
            # A pipelined request (read while answering): its bytes, from its start.
            self._feed(bytes(self.raw))

    # --------------------------------------------------------------- handoff

    def _hand_over(self) -> None:
        """aiohttp takes the connection: every byte of the current request and after."""
        transport = self.transport
        assert transport is not None and self.task is None
        self._disarm()
        self.lane.connections.discard(self)
        self.lane.handoffs += 1
        handler = self.lane.server()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if self._write_paused:
            handler.pause_writing()
        if self._read_paused:
            self._read_paused = False
            transport.resume_reading()
        raw, self.raw = bytes(self.raw), bytearray()
        if raw:
            handler.data_received(raw)

    # ---------------------------------------------------------------- timers

    def _disarm(self) -> None:
        for timer in (self._idle_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._idle_timer = self._body_timer = None

    def _idle(self) -> None:
        """Idle (or a head too slow) for the keep-alive timeout since the connection
        opened or its last answer: closed, as aiohttp does."""
        self._idle_timer = None
        if self.lost or self.transport is None:
            return
        now = self.loop.time()
        if self.task is None and now >= self._deadline:
            if self.transport.get_write_buffer_size():
                self.transport.abort()  # an answer it never read: close() would wait on it
            else:
                self.transport.close()
            return
        wake = self._deadline if self._deadline != math.inf else now + self.lane.idle_timeout
        self._idle_timer = self.loop.call_at(wake, self._idle)

    def close_when_idle(self) -> None:
        if self.task is None and self.transport is not None:
            self.transport.close()
        else:
            self.close_after = True

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class LanePost:
    """A POST the lane carries, as the endpoint reads it."""

    __slots__ = ("_body", "connection", "content_length", "lowered", "request_id", "started")

    def __init__(
        self,
        connection: LaneConnection,
        lowered: dict[str, str],
        content_length: int,
        body: bytes | None,
    ) -> None:
        self.connection = connection
        self.lowered = lowered
        self.content_length: int | None = content_length  # as measured for the framing
        self._body = body
        self.request_id = ""
        self.started = False  # the answer's head has been sent

    @property
    def headers(self) -> Mapping[str, str]:
        return _Caseless(self.lowered)

    @property
    def scheme(self) -> str:
        return "http"

    @property
    def host(self) -> str:
        return self.lowered.get("host", "")

    @property
    def remote(self) -> str | None:
        return self.connection.remote

    def query(self, name: str) -> str | None:
        return None  # the lane carries no URL with a query

    async def body(self, limit: int, within: float) -> bytes | None:
        body = self._body
        return body[:limit] if body is not None else None

    async def open_stream(self, headers: dict[str, str]) -> Sink:
        return LaneStream(self, self.head(200, headers, None, None))

    def whole(self, answer: WholeAnswer) -> bytes:
        return self.head(answer.status, answer.headers, answer.content_type, answer.body)

    def head(
        self, status: int, headers: Mapping[str, str], content_type: str | None, body: bytes | None
    ) -> bytes:
        """The status line and headers (and ``body``: Content-Length framing; None:
        chunked).  A CR or LF in a header is refused (ValueError), as aiohttp does."""
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        lines.append(f"Date: {_date()}")
        if "X-Request-Id" not in headers and self.request_id:
            lines.append(f"X-Request-Id: {self.request_id}")
        if self.connection.close_after or self.connection.lane.closing:
            lines.append("Connection: close")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        text = "\r\n".join(lines)
        if text.count("\n") != len(lines) - 1 or text.count("\r") != len(lines) - 1:
            raise ValueError("a newline or carriage return in a response header")
        self.started = True
        head = text.encode() + b"\r\n" + (b"\r\n" if body is not None else _CHUNKED + b"\r\n")
        return head + body if body else head


class _Caseless(Mapping[str, str]):
    """Headers by any case of their name (one value each, as ``lowered`` keeps)."""

    __slots__ = ("_lowered",)

    def __init__(self, lowered: dict[str, str]) -> None:
        self._lowered = lowered

    def __getitem__(self, name: str) -> str:
        return self._lowered[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lowered)

    def __len__(self) -> int:
        return len(self._lowered)


class LaneStream:
    """A chunked (SSE) answer: its head goes out with its first write."""

    __slots__ = ("_head", "done", "request")

    def __init__(self, request: LanePost, head: bytes) -> None:
        self.request = request
        self._head = head
        self.done = False

    def _take_head(self) -> bytes:
        head, self._head = self._head, b""
        return head

    async def write(self, data: bytes) -> None:
        if self.done:
            raise RuntimeError("write after the stream ended")
        connection = self.request.connection
        connection.send(self._take_head() + (_chunk(data) if data else b""))
        await connection.drain()

    async def write_eof(self, data: bytes = b"") -> None:
        if self.done:
            return
        self.done = True
        connection = self.request.connection
        connection.send(self._take_head() + (_chunk(data) if data else b"") + _LAST_CHUNK)
        await connection.drain()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _head_end(raw: bytearray) -> int:
    """Where the request's head ends: after its first empty line (CRLF or bare LF
    endings alike); -1 when there is none."""
    crlf = raw.find(b"\n\r\n")
    # A bare-LF empty line can only come first if it starts before that one: looked
    # for there alone, not through the whole body.
    bare = raw.find(b"\n\n", 0, crlf + 1 if crlf >= 0 else len(raw))
    if bare >= 0:
        return bare + 2
    return crlf + 3 if crlf >= 0 else -1


_REASONS = {status.value: status.phrase for status in http.HTTPStatus}
_date_cache: tuple[int, str] = (0, "")


def _reason(status: int) -> str:
    return _REASONS.get(status, "")


def _date() -> str:
    """The Date header, formatted once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]
