"""The HTTP carriers' shared I/O: opening requests, reading bodies and SSE replies.

What Streamable HTTP (:mod:`.streamable`) and HTTP+SSE (:mod:`.legacy_sse`)
both do on the wire: merging header layers, opening a request under the
route's redirect policy, reading a bounded body, turning transport failures
and refusals into ``CarrierError``, decoding JSON-RPC bodies and SSE events,
and reading one open SSE response (``SseReply``) as JSON-RPC messages up to
the answer to a request, resuming it when the upstream allows.  The
``aiohttp.ClientSession`` is the caller's: nothing here closes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.core.redaction import scrub
from gateway.upstream.carriers.base import CarrierError, Message, is_response_to
from gateway.upstream.carriers.redirects import MAX_HOPS, REDIRECTS, RedirectPolicy, redacted
from gateway.wire.sse import SseError, SseEvent, SseParser

JSON = "application/json"
EVENT_STREAM = "text/event-stream"

# Error bodies are only kept for diagnostics and era probing: no need for more.
MAX_ERROR_BODY = 64 * 1024
# A call's stream the upstream ends before answering is resumed (GET with
# `Last-Event-ID`) at most this often, waiting the `retry` it asked for, bounded.
MAX_RESUMES = 5
MAX_RETRY_MS = 5000
# Opens the GET that resumes a stream after the given event id (None: refused).
Reopen = Callable[[str], Awaitable[aiohttp.ClientResponse | None]]
_SEND_OK = frozenset({200, 202, 204})
# How long an answered SSE response may take to end before its connection is dropped.
_DRAIN_S = 5.0


class _Body(Protocol):
    async def readany(self) -> bytes: ...
    def is_eof(self) -> bool: ...
    def on_eof(self, callback: Callable[[], None]) -> None: ...


class Response(Protocol):
    """What the carriers read of a response: aiohttp's, or the h1 client's (h1)."""

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


def merge_headers(*layers: Mapping[str, str] | None, **fixed: str) -> CIMultiDict[str]:
    """Merge header layers (later wins, case-insensitively); ``fixed`` wins over all."""
    merged: CIMultiDict[str] = CIMultiDict()
    for layer in layers:
        if layer:
            for key, value in layer.items():
                merged[key] = value
    for key, value in fixed.items():
        merged[key.replace("_", "-")] = value
    return merged


def transport_error(exc: BaseException, what: str) -> CarrierError:
    # aiohttp's timeout errors are also ClientErrors, so test for timeouts first.
    if isinstance(exc, TimeoutError):
        return CarrierError(f"{what}: timed out", timeout=True)
    # A ValueError (a host name no resolver takes, a header no request can carry) is
    # raised before anything is written: not sent, as a refused connection is.
    unreached = isinstance(exc, ConnectionRefusedError | aiohttp.ClientConnectorError | ValueError)
    return CarrierError(f"{what}: {type(exc).__name__}: {scrub(str(exc))}", unreached=unreached)


async def open_response(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    *,
    headers: CIMultiDict[str],
    client_timeout: aiohttp.ClientTimeout,
    redirects: RedirectPolicy,
    data: bytes | None = None,
    hops_taken: int = 0,
) -> aiohttp.ClientResponse:
    """One request; a redirect is followed only as ``redirects`` allows (never, by
    default), and never to another origin (``hops_taken``: followed before it)."""
    for hops in range(hops_taken, MAX_HOPS + 1):
        resp = await _open_once(session, method, url, headers, client_timeout, data)
        if resp.status not in REDIRECTS:
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
    # Query strings carry legacy session ids and sometimes tokens: kept out of errors.
    if session.closed:  # shutting down: what was still to be sent is not
        raise CarrierError(f"{method} {redacted(url)}: the gateway is shutting down")
    try:
        return await session.request(
            method,
            url,
            data=data,
            headers=headers,
            timeout=client_timeout,
            allow_redirects=False,
        )
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        raise transport_error(exc, f"{method} {redacted(url)}") from exc


async def read_body(resp: Response, limit: int) -> bytes:
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
                    body=bytes(buf[:MAX_ERROR_BODY]),
                )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise transport_error(exc, "reading the upstream body") from exc
    return bytes(buf)


async def check_sent(resp: Response) -> None:
    """A notification or response POSTed upstream must be accepted (202/200/204)."""
    if resp.status not in _SEND_OK:
        body = await error_body(resp)
        raise CarrierError(
            f"upstream refused a message with HTTP {resp.status}", status=resp.status, body=body
        )


async def error_body(resp: Response) -> bytes:
    """Up to ``MAX_ERROR_BODY`` bytes of an error response; never raises."""
    try:
        return await read_body(resp, MAX_ERROR_BODY)
    except CarrierError as exc:
        return exc.body


def jsonrpc_error(body: bytes) -> Message | None:
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


def decode_messages(data: bytes | str, *, status: int | None = None) -> list[Message]:
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
    return raw[:MAX_ERROR_BODY]


class Listed:
    """Messages already read (a JSON body), iterated without an async generator: the
    loop's hooks for one (a WeakSet entry, a finaliser) cost more than the iteration."""

    __slots__ = ("_items",)

    def __init__(self, messages: list[Message]) -> None:
        self._items = iter(messages)

    def __aiter__(self) -> Listed:
        return self

    async def __anext__(self) -> Message:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None


def event_messages(event: SseEvent) -> list[Message]:
    """The JSON-RPC messages an SSE event carries (none for other event types)."""
    # Empty data: a priming event that only sets the resumption id.
    if event.type != "message" or not event.data:
        return []
    return decode_messages(event.data)


class SseReply:
    """One open SSE response read as JSON-RPC messages.

    Closing it from another task (``UpstreamReply.aclose``, ``Carrier.close``)
    ends the iteration quietly instead of surfacing the disconnect as an error.
    """

    def __init__(
        self,
        resp: Response,
        max_event_size: int,
        registry: set[SseReply],
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
                    raise transport_error(exc, "reading the upstream SSE stream") from exc
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
                    for message in event_messages(event):
                        if answer and is_response_to(message, request_id, self._resp.status):
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
