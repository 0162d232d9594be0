"""A small HTTP/1.1 client on raw asyncio sockets and httptools, for load and for held streams.

aiohttp's client costs about as much CPU per request as the gateway itself (the
bench journal, round 3: `git show 3514f2e:bench/README.md`), so a load generator
built on it measures itself once the gateway has cores of its own.  This one does
only what the bench needs: one keep-alive connection per caller, a request written
in one send, the response parsed by httptools (Content-Length or chunked), and
streams (an SSE answer, a GET stream) held open with their bytes counted.  No TLS,
no redirects, no pooling: a `Conn` is one connection, used by one caller.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import cast

import httptools


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip()


# How much of a held stream's body a `Conn` keeps (the rest is only counted).
KEEP = 4096


class HttpError(Exception):
    """The connection broke, or the server answered with something unparsable."""


@dataclass
class _Pending:
    """The response being read."""

    future: asyncio.Future[Reply]
    stream: bool  # resolve at the end of the headers (the body keeps flowing)
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    name: bytes = b""


class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._head = f"Host: {host}:{port}\r\n".encode()
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._pending: _Pending | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self.streamed = 0  # body bytes a held stream has received
        self.kept = bytearray()  # its first KEEP bytes (an `endpoint` event, say)
        self._streaming: asyncio.Future[None] | None = None
        self.keep_alive = True

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: cls(host, port), host, port)
        return conn

    # ----------------------------------------------------------------- requests

    def _send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            raise HttpError("connection closed")
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = f"{method} {path} HTTP/1.1\r\n{lines}Content-Length: {len(body)}\r\n".encode()
        self._transport.write(head + self._head + b"\r\n" + body)

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Reply:
        """One request; its whole response."""
        return await self._exchange(method, path, headers, body, stream=False)

    async def stream(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Reply:
        """A request whose response stays open: returns at its headers (``body`` empty);
        what follows is counted in ``streamed`` until the server or `close` ends it."""
        return await self._exchange(method, path, headers, body, stream=True)

    async def _exchange(
        self, method: str, path: str, headers: dict[str, str], body: bytes, *, stream: bool
    ) -> Reply:
        if self._pending is not None:
            raise HttpError("a request is already in progress on this connection")
        future = asyncio.get_running_loop().create_future()
        self._pending = _Pending(future, stream)
        self._send(method, path, headers, body)
        return await future

    async def wait_streamed(self, at_least: int) -> None:
        """Until a held stream has received ``at_least`` body bytes (or ended)."""
        while self.streamed < at_least and not self.closed.done():
            self._streaming = asyncio.get_running_loop().create_future()
            await asyncio.wait([self._streaming, self.closed], return_when=asyncio.FIRST_COMPLETED)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses: no isinstance here)
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(HttpError("unexpected upgrade"))
        except httptools.HttpParserError as exc:
            self._fail(HttpError(f"bad response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(HttpError(f"connection lost: {exc}"))
        if not self.closed.done():
            self.closed.set_result(None)

    def _fail(self, exc: Exception) -> None:
        pending, self._pending = self._pending, None
        if pending is not None and not pending.future.done():
            pending.future.set_exception(exc)
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------ httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._pending is not None:
            self._pending.headers[name.decode().lower()] = value.decode()

    def on_headers_complete(self) -> None:
        pending = self._pending
        if pending is None:
            return
        pending.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        if pending.stream and not pending.future.done():
            pending.future.set_result(Reply(pending.status, pending.headers, b""))

    def on_body(self, body: bytes) -> None:
        pending = self._pending
        if pending is None or pending.stream:
            self.streamed += len(body)
            if len(self.kept) < KEEP:
                self.kept += body[: KEEP - len(self.kept)]
            if self._streaming is not None and not self._streaming.done():
                self._streaming.set_result(None)
        else:
            pending.chunks.append(body)

    def on_message_complete(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None and not pending.future.done():
            pending.future.set_result(
                Reply(pending.status, pending.headers, b"".join(pending.chunks))
            )
        if not self.keep_alive and self._transport is not None:
            self._transport.close()
