"""The lean HTTP/1.1 client (gateway/upstream/carriers/h1.py) against real servers on loopback:
aiohttp's, and raw asyncio servers for what aiohttp would never send."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from gateway.upstream.carriers.base import CarrierError
from gateway.upstream.carriers.h1 import H1Pool, H1Response, _encode, usable
from gateway.upstream.carriers.redirects import RedirectPolicy
from gateway.upstream.carriers.streamable import StreamableHttpCarrier

pytestmark = pytest.mark.timeout(30)
WAIT = 10.0


@pytest.fixture
async def pool() -> AsyncIterator[H1Pool]:
    found = H1Pool({"X-Default": "d"})
    yield found
    found.close()


async def serve_app(app: web.Application) -> tuple[web.AppRunner, URL, list[int]]:
    """``app`` on a free port; the list counts the connections it accepted."""
    accepted: list[int] = []

    @web.middleware
    async def count(request: web.Request, handler: Callable[..., Awaitable[web.StreamResponse]]):
        transport = request.transport
        ident = id(transport)
        if ident not in accepted:
            accepted.append(ident)
        return await handler(request)

    app.middlewares.append(count)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, URL(f"http://127.0.0.1:{port}/mcp"), accepted


@contextlib.asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[tuple[URL, list[int]]]:
    """``handler`` at POST /mcp on a free port: its URL and the connections accepted."""
    app = web.Application()
    app.router.add_post("/mcp", handler)
    runner, url, accepted = await serve_app(app)
    try:
        yield url, accepted
    finally:
        await runner.cleanup()


def post(
    pool: H1Pool, url: URL, body: bytes, headers: dict[str, str] | None = None
) -> Awaitable[H1Response]:
    return pool.request(url, body, headers or {}, connect_timeout=WAIT, read_timeout=WAIT)


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response(
        {
            "body": body.decode(),
            "default": request.headers.get("X-Default"),
            "ua": request.headers.get("User-Agent"),
        }
    )


async def sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for n in range(3):
        await response.write(f"data: {n}\n\n".encode())
    await response.write_eof()
    return response


async def read_all(resp: object) -> bytes:
    buf = b""
    while chunk := await resp.content.readany():  # type: ignore[attr-defined]
        buf += chunk
    return buf


async def test_keep_alive_connections_are_reused(pool: H1Pool) -> None:
    async with serving(echo) as (url, accepted):
        for n in range(50):
            resp = await post(pool, url, b"n%d" % n, {"Content-Type": "application/json"})
            assert resp.status == 200 and resp.content_type == "application/json"
            assert b'"n%d"' % n in await read_all(resp)
            resp.release()
        assert len(accepted) == 1

        # Concurrent requests each take a connection; they are reused afterwards.
        async def one(n: int) -> int:
            resp = await post(pool, url, b"x")
            await read_all(resp)
            return int(resp.status)

        assert await asyncio.gather(*(one(n) for n in range(8))) == [200] * 8
        assert await asyncio.gather(*(one(n) for n in range(8))) == [200] * 8
        assert len(accepted) <= 8


async def test_default_headers_and_user_agent_are_sent(pool: H1Pool) -> None:
    async with serving(echo) as (url, _):
        body = await read_all(await post(pool, url, b"{}"))
        assert b'"default": "d"' in body.replace(b'":"', b'": "') and b"aiohttp" in body


async def test_a_chunked_event_stream_arrives_in_order_and_ends(pool: H1Pool) -> None:
    async with serving(sse) as (url, accepted):
        for _ in range(3):
            resp = await post(pool, url, b"")
            assert resp.content_type == "text/event-stream" and resp.content_length is None
            assert await read_all(resp) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
            assert resp.content.is_eof()
        assert len(accepted) == 1


async def raw_server(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> tuple[asyncio.Server, URL]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, URL(f"http://127.0.0.1:{port}/mcp")


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


async def test_a_body_ended_by_closing_the_connection(pool: H1Pool) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"a":'
        )
        await writer.drain()
        writer.write(b"1}")
        writer.close()

    server, url = await raw_server(handle)
    async with server:
        resp = await post(pool, url, b"{}")
        assert resp.status == 200
        assert await read_all(resp) == b'{"a":1}'


async def test_silence_is_bounded_before_the_head_and_between_chunks(pool: H1Pool) -> None:
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        if b"mid" in request:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
            writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
            writer.write(b"5\r\ndata:\r\n")
            await writer.drain()
        await release.wait()
        writer.close()

    server, url = await raw_server(handle)
    async with server:
        with pytest.raises(aiohttp.ServerTimeoutError):
            await pool.request(url, b"head", {}, connect_timeout=WAIT, read_timeout=0.2)
        resp = await pool.request(url, b"mid", {}, connect_timeout=WAIT, read_timeout=0.2)
        assert await resp.content.readany() == b"data:"
        with pytest.raises(aiohttp.ServerTimeoutError):
            await resp.content.readany()
        release.set()


async def test_one_silence_timer_serves_a_connection_s_requests(pool: H1Pool) -> None:
    """The timer outlives a request: it never fires on an idle connection, and a
    request with a shorter bound than the timer's is still bounded by its own."""
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if await request.read() == b"slow":
            await release.wait()
        return web.Response(body=b"{}", content_type="application/json")

    async with serving(handle) as (url, accepted):
        quick = await pool.request(url, b"fast", {}, connect_timeout=WAIT, read_timeout=0.1)
        await read_all(quick)
        # Idle past that bound (time must pass here): the connection is still good.
        await asyncio.sleep(0.3)
        for _ in range(3):
            resp = await pool.request(url, b"fast", {}, connect_timeout=WAIT, read_timeout=WAIT)
            assert await read_all(resp) == b"{}"
        assert len(accepted) == 1
        # Its timer now fires WAIT from the last request; this one's bound is shorter.
        async with asyncio.timeout(WAIT / 2):
            with pytest.raises(aiohttp.ServerTimeoutError):
                await pool.request(url, b"slow", {}, connect_timeout=WAIT, read_timeout=0.2)
        release.set()


async def test_a_closed_idle_connection_is_not_reused(pool: H1Pool) -> None:
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive offered, then the server drops it while idle

    server, url = await raw_server(handle)
    async with server:
        for _ in range(3):
            resp = await post(pool, url, b"{}")
            assert await read_all(resp) == b"ok"
            # Until the client has seen the close, wait for it (bounded): that is the
            # state the pool meets on the next request in practice.
            async with asyncio.timeout(WAIT):
                while any(not c.closed for c in pool._all):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        assert served == 3


async def test_a_closed_connection_is_freed_by_reference_counting(pool: H1Pool) -> None:
    """Closed, a connection goes at once (no garbage collection needed: an idle gateway
    seldom runs one): its parser and its transport no longer refer back to it."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive offered, then the server drops it while idle

    server, url = await raw_server(handle)
    gc.collect()
    gc.disable()
    try:
        async with server:
            resp = await post(pool, url, b"{}")
            assert await read_all(resp) == b"ok"
            (conn,) = pool._all
            freed = [asyncio.Event(), asyncio.Event()]
            weakref.finalize(conn, freed[0].set)
            weakref.finalize(conn.transport, freed[1].set)
            del conn, resp
            async with asyncio.timeout(WAIT):
                for event in freed:
                    await event.wait()
    finally:
        gc.enable()


async def test_a_disconnect_mid_body_and_invalid_http_are_errors(pool: H1Pool) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        if b"garbage" in request:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.close()

    server, url = await raw_server(handle)
    async with server:
        resp = await post(pool, url, b"cut")
        assert await resp.content.readany() == b"partial"
        with pytest.raises(aiohttp.ClientError):
            await resp.content.readany()
        with pytest.raises(aiohttp.ClientError):
            await post(pool, url, b"garbage")


async def test_a_large_body_is_read_with_flow_control(pool: H1Pool) -> None:
    size = 4 * 1024 * 1024

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * size)

    async with serving(big) as (url, accepted):
        for _ in range(2):
            resp = await post(pool, url, b"")
            total = 0
            while chunk := await resp.content.readany():
                total += len(chunk)
                await asyncio.sleep(0)  # a slow reader: the socket is paused meanwhile
            assert total == size
        assert len(accepted) == 1


async def test_refused_connections_and_bad_headers_fail_cleanly(pool: H1Pool) -> None:
    server, url = await raw_server(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    with pytest.raises(OSError):
        await pool.request(url, b"", {}, connect_timeout=WAIT, read_timeout=WAIT)
    with pytest.raises(ValueError):
        await pool.request(
            url, b"", {"X-Bad": "a\r\nInjected: 1"}, connect_timeout=WAIT, read_timeout=WAIT
        )


def test_only_plain_http_without_credentials_is_carried() -> None:
    assert usable(URL("http://127.0.0.1:1/mcp"))
    assert not usable(URL("https://example.com/mcp"))
    assert not usable(URL("http://user:pw@127.0.0.1:1/mcp"))


async def test_the_carrier_follows_a_redirect_only_as_the_route_allows() -> None:
    """A redirecting upstream (a trailing-slash mount, say) is refused by default, with
    an error naming the route; with ``same_origin`` it is followed, every time (the
    lean client is not given up for the route)."""

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/mcp/")

    async def answer(request: web.Request) -> web.Response:
        message = await request.json()
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    app = web.Application()
    app.router.add_post("/mcp", moved)
    app.router.add_post("/mcp/", answer)
    runner, url, _ = await serve_app(app)
    try:
        async with aiohttp.ClientSession() as http:
            refusing = StreamableHttpCarrier(url, http, redirects=RedirectPolicy("/r"))
            with pytest.raises(CarrierError, match=r"route /r answered HTTP 307 .*redirects="):
                await refusing.request({"jsonrpc": "2.0", "id": 0, "method": "ping"}, {})
            await refusing.close()
            carrier = StreamableHttpCarrier(
                url, http, redirects=RedirectPolicy("/r", same_origin=True)
            )
            for n in range(2):
                exchange = await carrier.request({"jsonrpc": "2.0", "id": n, "method": "ping"}, {})
                assert [m async for m in exchange.messages] == [
                    {"jsonrpc": "2.0", "id": n, "result": {}}
                ]
                await exchange.aclose()
            await carrier.close()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "headers",
    [{"X": "a\r\nB: c"}, {"X": "a\nB"}, {"X\r\nY": "z"}, {"X": "a\r"}, {"User-Agent": "u\n"}],
)
def test_no_header_can_inject_a_line(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        _encode(URL("http://127.0.0.1:1/mcp"), b"", headers)


def test_the_request_is_written_as_expected() -> None:
    raw = _encode(
        URL("http://127.0.0.1:8080/mcp?x=1"), b"{}", {"A": "b", "User-Agent": "me", "Host": "x"}
    )
    assert raw == (
        b"POST /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nA: b\r\n"
        b"User-Agent: me\r\nContent-Length: 2\r\n\r\n{}"
    )


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://[::1]:8080/mcp", b"Host: [::1]:8080\r\n"),
        ("http://example.com/mcp", b"Host: example.com\r\n"),
        ("http://b\u00fccher.example:81/", b"Host: xn--bcher-kva.example:81\r\n"),
    ],
)
def test_the_host_header_is_valid_for_every_kind_of_host(url: str, host: bytes) -> None:
    assert host in _encode(URL(url), b"", {})


@pytest.mark.parametrize(("keep_s", "connections"), [(30, 1), (1, 2)])
async def test_the_servers_keep_alive_timeout_is_honoured(
    pool: H1Pool, keep_s: int, connections: int
) -> None:
    """A connection the server will close within a second is not written to again."""
    accepted = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                await read_request(reader)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
                writer.write(b"Keep-Alive: timeout=%d\r\n\r\nok" % keep_s)
                await writer.drain()
        writer.close()

    server, url = await raw_server(handle)
    async with server:
        for _ in range(2):
            assert await read_all(await post(pool, url, b"{}")) == b"ok"
        assert accepted == connections


async def test_past_its_cap_the_pool_refuses_a_new_connection_then_serves_again() -> None:
    """One route's calls cannot take every descriptor of the process: at the cap a
    request is refused at once, and a connection let go makes room again."""
    gate, both = asyncio.Event(), asyncio.Event()
    arrived: list[bytes] = []

    async def held(request: web.Request) -> web.Response:
        arrived.append(await request.read())
        if len(arrived) == 2:
            both.set()
        await gate.wait()
        return web.json_response({"ok": True})

    capped = H1Pool(max_connections=2)
    async with serving(held) as (url, _):
        busy = [asyncio.create_task(post(capped, url, b"x")) for _ in range(2)]
        await asyncio.wait_for(both.wait(), WAIT)
        with pytest.raises(aiohttp.ClientConnectionError, match="max_connections"):
            await post(capped, url, b"third")
        gate.set()
        for response in await asyncio.gather(*busy):
            await read_all(response)
            response.release()
        again = await post(capped, url, b"again")
        assert await read_all(again) == b'{"ok": true}'
        again.release()
    capped.close()
