"""The Streamable HTTP carrier: one endpoint taking POST, GET and DELETE.

Revision-agnostic: callers pass every protocol header (session id, protocol
version, credentials) and read what they need from the answers.  A request's
answer is its POST's own reply, a JSON body or an SSE stream (read by
:class:`.httpio.SseReply`); POSTs to a plain-http upstream go through the
h1 client (:mod:`.h1`).  The ``aiohttp.ClientSession`` is shared and owned
by the caller, so the carrier never closes it, only the responses it opened.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import EllipsisType
from typing import Any

import aiohttp
import orjson
from yarl import URL

from gateway.core.jsonrpc import valid_id as _is_id
from gateway.upstream.carriers.base import (
    Carrier,
    CarrierError,
    Message,
    UpstreamReply,
    Where,
    is_response_to,
)
from gateway.upstream.carriers.h1 import H1Pool, usable
from gateway.upstream.carriers.httpio import (
    EVENT_STREAM,
    JSON,
    MAX_ERROR_BODY,
    Listed,
    Reopen,
    Response,
    SseReply,
    check_sent,
    decode_messages,
    error_body,
    jsonrpc_error,
    merge_headers,
    open_response,
    read_body,
    transport_error,
)
from gateway.upstream.carriers.redirects import REDIRECTS, RedirectPolicy, redacted
from gateway.wire.sse import DEFAULT_MAX_EVENT_SIZE


class StreamableHttpCarrier(Carrier):
    """The Streamable HTTP transport: one endpoint taking POST, GET and DELETE.

    ``read_timeout`` bounds the silence on a request's answer: until the status
    line (first byte) and then between chunks of its body (None: the caller bounds
    the call in all, as the link does).  ``send_timeout`` does the same for a
    notification's or an answer's POST and a DELETE (default: ``read_timeout``);
    ``listen_timeout`` for the GET stream, which may be idle for long; None means
    no bound.
    """

    def where(self) -> Where:
        return Where("tcp", self.url.host, self.url.port)

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
        max_connections: int = 1024,
    ) -> None:
        self.url = URL(url)
        self._session = session
        self._redirects = redirects or RedirectPolicy()
        self._post_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._send_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout if send_timeout is ... else send_timeout,
        )
        self._listen_timeout = aiohttp.ClientTimeout(
            connect=connect_timeout, sock_connect=connect_timeout, sock_read=listen_timeout
        )
        self._max_message_size = max_message_size
        self._streams: set[SseReply] = set()
        # POSTs to a plain-http upstream go through the h1 client (h1); GET and
        # DELETE, and a POST that a route lets follow a redirect, through aiohttp.
        self._lean = H1Pool(session.headers, max_connections) if usable(self.url) else None

    async def start(self) -> None:
        """Nothing to open: every message is its own HTTP request."""

    async def request(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        return await self._post(message, headers, self._post_timeout)

    async def stream(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        """A request whose answer is a stream that may stay quiet for long (a listen):
        the GET stream's idle bound applies, not a call's."""
        return await self._post(message, headers, self._listen_timeout)

    async def _post(
        self, message: Message, headers: Mapping[str, str], limits: aiohttp.ClientTimeout
    ) -> UpstreamReply:
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
        merged = merge_headers(headers, Accept=f"{JSON}, {EVENT_STREAM}", Content_Type=JSON)
        url, hops = self.url, 0
        if self._lean is not None:
            try:
                resp = await self._lean.request(
                    url,
                    body,
                    merged,
                    connect_timeout=limits.sock_connect,
                    read_timeout=limits.sock_read,
                )
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                raise transport_error(exc, f"POST {redacted(url)}") from exc
            if resp.status not in REDIRECTS:
                return resp
            resp.close()
            # Refused unless the route allows it; then aiohttp sends it where it points.
            url = self._redirects.follow(resp.status, resp.headers.get("Location"), url, 0)
            hops = 1
        return await open_response(
            self._session,
            "POST",
            url,
            data=body,
            headers=merged,
            client_timeout=limits,
            redirects=self._redirects,
            hops_taken=hops,
        )

    def _reopener(self, headers: Mapping[str, str], limits: aiohttp.ClientTimeout) -> Reopen:
        """How a call's stream is resumed: a GET with the call's headers and the last id."""

        async def reopen(last_event_id: str) -> aiohttp.ClientResponse | None:
            fixed = merge_headers(headers, Accept=EVENT_STREAM, Last_Event_ID=last_event_id)
            fixed.popall("Content-Type", None)
            try:
                resp = await open_response(
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
    ) -> UpstreamReply:
        status = resp.status
        if status in (401, 403):
            # Credentials refused: the client must hear it as such, whatever the body.
            raise CarrierError(
                f"upstream answered HTTP {status}",
                status=status,
                body=await error_body(resp),
                challenge=resp.headers.get("WWW-Authenticate"),
            )
        if not 200 <= status < 300:
            body = await error_body(resp)
            error = jsonrpc_error(body)
            if error is None:
                raise CarrierError(f"upstream answered HTTP {status}", status=status, body=body)
            resp.release()
            return UpstreamReply(status, resp.headers, Listed([error]))
        if resp.content_type == EVENT_STREAM:
            stream = SseReply(resp, self._max_message_size, self._streams, reopen)
            return UpstreamReply(
                status,
                resp.headers,
                stream.messages(request_id, answer=True),
                closer=stream,
            )
        body = await read_body(resp, self._max_message_size)
        resp.release()
        if resp.content_type != JSON:
            what = "no body" if not body else f"content type {resp.content_type!r}"
            raise CarrierError(
                f"upstream answered a request with HTTP {status} and {what}",
                status=status,
                body=body[:MAX_ERROR_BODY],
            )
        messages = decode_messages(body, status=status)
        final = next((m for m in messages if is_response_to(m, request_id, status)), None)
        if final is None:
            raise CarrierError(
                "upstream's JSON answer holds no response to the request",
                status=status,
                body=body[:MAX_ERROR_BODY],
            )
        # Keep the exchange's promise that the response comes last.
        ordered = [m for m in messages if m is not final] + [final]
        return UpstreamReply(status, resp.headers, Listed(ordered))

    def pool_counts(self) -> tuple[int, int]:
        """The h1 client's open connections: (carrying a request, idle)."""
        return self._lean.counts() if self._lean is not None else (0, 0)

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        resp = await self._open_post(orjson.dumps(message), headers, self._send_timeout)
        try:
            await check_sent(resp)
        finally:
            resp.release()

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        resp = await open_response(
            self._session,
            "GET",
            self.url,
            headers=merge_headers(headers, Accept=EVENT_STREAM),
            client_timeout=self._listen_timeout,
            redirects=self._redirects,
        )
        try:
            if resp.status == 405:
                resp.release()
                return None
            if not 200 <= resp.status < 300:
                body = await error_body(resp)
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
        return SseReply(resp, self._max_message_size, self._streams).messages()

    async def terminate(self, headers: Mapping[str, str]) -> None:
        resp = await open_response(
            self._session,
            "DELETE",
            self.url,
            headers=merge_headers(headers),
            client_timeout=self._send_timeout,
            redirects=self._redirects,
        )
        try:
            # 404: the session is already gone; 405: the server keeps sessions itself.
            if not 200 <= resp.status < 300 and resp.status not in (404, 405):
                body = await error_body(resp)
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
