"""The HTTP+SSE (legacy) carrier against real aiohttp servers on loopback ports."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from structlog.testing import capture_logs
from yarl import URL

from gateway.upstream.carriers.base import CarrierError, Message
from gateway.upstream.carriers.legacy_sse import LegacySseCarrier, open_legacy_sse_probe
from gateway.wire.sse import encode_event
from tests.unit.upstream.carriers.http_peers import (
    HANDLER_RELEASE,
    Serve,
    collect,
    note,
    open_sse,
    req,
    result,
    sse,
    streamable_app,
)


class LegacyServer:
    """A minimal HTTP+SSE server: GET /sse gives an endpoint, POSTs answer on the stream."""

    def __init__(self, endpoint: str = "/messages?session_id={sid}") -> None:
        self.endpoint = endpoint
        self.sessions: dict[str, asyncio.Queue[bytes | None]] = {}
        self.held: list[tuple[str, Message]] = []
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.silent_opened = asyncio.Event()
        self.get_arrived = asyncio.Event()
        self.gate: asyncio.Event | None = None  # when set, GET /sse waits for it
        self.app = web.Application()
        self.app.router.add_get("/sse", self.stream)
        self.app.router.add_get("/silent", self.silent)
        self.app.router.add_post("/messages", self.post)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(("GET", dict(request.headers)))
        self.get_arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        sid = f"s{len(self.sessions) + 1}"
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sessions[sid] = queue
        resp = web.StreamResponse()
        resp.content_type = "text/event-stream"
        await resp.prepare(request)
        await resp.write(b": hi\n\n")
        await resp.write(encode_event(self.endpoint.format(sid=sid), event="endpoint"))
        while (frame := await queue.get()) is not None:
            await resp.write(frame)
        await resp.write_eof()
        return resp

    async def silent(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.content_type = "text/event-stream"
        await resp.prepare(request)
        await resp.write(sse(note("notifications/message")))
        self.silent_opened.set()
        await request.app[HANDLER_RELEASE].wait()
        return resp

    async def post(self, request: web.Request) -> web.Response:
        self.seen.append(("POST", dict(request.headers)))
        sid = request.query.get("session_id", "")
        queue = self.sessions.get(sid)
        if queue is None:
            return web.Response(status=404, text="no session")
        msg: Message = await request.json()
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "bad":
            return web.Response(status=400, text="bad request")
        if method == "notifications/poke":
            for i in range(params.get("count", 1)):
                queue.put_nowait(sse(note("notifications/hello", n=i)))
        elif method == "echo":
            queue.put_nowait(sse(note("notifications/progress", of=msg["id"])))
            queue.put_nowait(sse(result(msg["id"], echo=params)))
        elif method == "pair":
            # Answer once two have arrived, in reverse order of arrival, with
            # one unattributable notification between the answers.
            self.held.append((sid, msg))
            if len(self.held) == 2:
                for i, (hsid, held) in enumerate(reversed(self.held)):
                    q = self.sessions[hsid]
                    q.put_nowait(sse(result(held["id"], echo=held["params"])))
                    if i == 0:
                        q.put_nowait(sse(note("notifications/message", between=True)))
                self.held.clear()
        elif method == "hold":
            self.held.append((sid, msg))
        elif method == "progress":
            token = params["_meta"]["progressToken"]
            queue.put_nowait(sse(note("notifications/progress", progressToken=token)))
            queue.put_nowait(sse(result(msg["id"])))
        elif method == "flood":
            for i in range(params["count"]):
                queue.put_nowait(sse(note("notifications/hello", n=i)))
            queue.put_nowait(sse(result(msg["id"])))
        elif method == "garbage":
            queue.put_nowait(b"data: {not json\n\n")
            queue.put_nowait(sse(result(msg["id"], after="garbage")))
        elif method == "drop":
            queue.put_nowait(None)
        return web.Response(status=202, text="Accepted")


async def legacy(
    serve: Serve, session: aiohttp.ClientSession, server: LegacyServer | None = None, **kw: Any
) -> tuple[LegacyServer, LegacySseCarrier, URL]:
    server = server or LegacyServer()
    base = await serve(server.app)
    kw.setdefault("endpoint_timeout", 2.0)
    kw.setdefault("read_timeout", 2.0)
    carrier = LegacySseCarrier(base / "sse", session, **kw)
    return server, carrier, base


def endpoint_of(carrier: LegacySseCarrier) -> str | None:
    """Where the carrier POSTs messages, once the upstream has said so (read from its
    connection: the gateway itself never needs to ask)."""
    conn = carrier._conn
    return str(conn.endpoint) if conn is not None and conn.endpoint is not None else None


async def test_legacy_start_resolves_a_relative_endpoint(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    server, carrier, base = await legacy(serve, session, headers={"Authorization": "Bearer t"})
    assert endpoint_of(carrier) is None
    assert not carrier.is_open
    await carrier.start()
    assert endpoint_of(carrier) == str(base / "messages") + "?session_id=s1"
    assert carrier.is_open
    await carrier.start()  # already open: no second stream
    assert len(server.sessions) == 1
    get_headers = server.seen[0][1]
    assert get_headers["Accept"] == "text/event-stream"
    assert get_headers["Authorization"] == "Bearer t"
    await carrier.close()
    assert not carrier.is_open


async def test_legacy_absolute_endpoint(serve: Serve, session: aiohttp.ClientSession) -> None:
    server = LegacyServer()
    base = await serve(server.app)
    server.endpoint = str(base) + "/messages?session_id={sid}"
    carrier = LegacySseCarrier(base / "sse", session, endpoint_timeout=2.0)
    await carrier.start()
    exchange = await carrier.request(req(1, "echo"), {})
    assert (await collect(exchange))[-1] == result(1, echo={})
    await carrier.close()


async def test_legacy_rejects_an_endpoint_on_another_origin(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    server = LegacyServer(endpoint="http://elsewhere.invalid/messages?session_id={sid}")
    _, carrier, _ = await legacy(serve, session, server)
    with pytest.raises(CarrierError, match="origin"):
        await carrier.start()
    assert not carrier.is_open


async def test_legacy_endpoint_timeout(serve: Serve, session: aiohttp.ClientSession) -> None:
    server = LegacyServer()
    base = await serve(server.app)
    carrier = LegacySseCarrier(base / "silent", session, endpoint_timeout=0.2)
    with pytest.raises(CarrierError) as info:
        await carrier.start()
    assert info.value.timeout
    assert endpoint_of(carrier) is None


async def test_legacy_get_refused(serve: Serve, session: aiohttp.ClientSession) -> None:
    server = LegacyServer()
    base = await serve(server.app)
    carrier = LegacySseCarrier(base / "messages", session, endpoint_timeout=2.0)
    with pytest.raises(CarrierError) as info:
        await carrier.start()
    assert info.value.status == 405


async def test_legacy_request_gets_attributed_messages_then_its_response(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    server, carrier, _ = await legacy(serve, session, headers={"Authorization": "Bearer t"})
    await carrier.start()
    exchange = await carrier.request(req(5, "echo", a=1), {"X-Extra": "1"})
    assert exchange.status == 200
    assert await collect(exchange) == [
        note("notifications/progress", of=5),
        result(5, echo={"a": 1}),
    ]
    post_headers = server.seen[-1][1]
    assert post_headers["Authorization"] == "Bearer t"
    assert post_headers["X-Extra"] == "1"
    assert post_headers["Content-Type"] == "application/json"
    await carrier.close()


async def test_legacy_two_concurrent_requests_get_their_own_responses(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    listener = await carrier.listen({})
    assert listener is not None
    first, second = await asyncio.gather(
        carrier.request(req("a", "pair", who="a"), {}),
        carrier.request(req("b", "pair", who="b"), {}),
    )
    got_a, got_b = await asyncio.gather(collect(first), collect(second))
    assert got_a[-1] == result("a", echo={"who": "a"})
    assert got_b[-1] == result("b", echo={"who": "b"})
    # The notification between the answers came with one request still in
    # flight, so it belongs to that one; the first answer ended the other.
    assert [m for m in got_a + got_b if "method" in m] == [
        note("notifications/message", between=True)
    ]
    await carrier.close()
    assert [m async for m in listener] == []


async def test_legacy_unsolicited_messages_go_to_listen(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    listener = await carrier.listen({})
    assert listener is not None
    await carrier.send(note("notifications/poke", count=2), {})
    assert await anext(listener) == note("notifications/hello", n=0)
    assert await anext(listener) == note("notifications/hello", n=1)
    await carrier.close()


async def test_legacy_unsolicited_queue_is_bounded(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    _, carrier, _ = await legacy(serve, session, max_queued=3)
    await carrier.start()
    listener = await carrier.listen({})
    assert listener is not None
    # With two requests in flight nothing is attributable, so the flood goes
    # to the unsolicited queue; the flood's own answer comes after it.
    held = await carrier.request(req(1, "hold"), {})
    with capture_logs() as logs:
        flood = await carrier.request(req(2, "flood", count=10), {})
        assert await collect(flood) == [result(2)]
    assert any("dropped the oldest" in entry["event"] for entry in logs)
    await carrier.close()
    assert [m async for m in listener] == [
        note("notifications/hello", n=7),
        note("notifications/hello", n=8),
        note("notifications/hello", n=9),
    ]
    with pytest.raises(CarrierError, match="closed"):
        await collect(held)


async def test_legacy_progress_goes_to_the_request_that_sent_its_token(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    listener = await carrier.listen({})
    assert listener is not None
    # Two requests in flight: only the progress token says whose the progress is.
    held = await carrier.request(req(1, "hold"), {})
    exchange = await carrier.request(req(2, "progress", _meta={"progressToken": "t2"}), {})
    assert await collect(exchange) == [
        note("notifications/progress", progressToken="t2"),
        result(2),
    ]
    await carrier.close()
    assert [m async for m in listener] == []
    with pytest.raises(CarrierError, match="closed"):
        await collect(held)


async def test_legacy_bad_event_is_skipped(serve: Serve, session: aiohttp.ClientSession) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    exchange = await carrier.request(req(1, "garbage"), {})
    assert await collect(exchange) == [result(1, after="garbage")]
    await carrier.close()


async def test_legacy_post_refused(serve: Serve, session: aiohttp.ClientSession) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    with pytest.raises(CarrierError) as info:
        await carrier.request(req(1, "bad"), {})
    assert (info.value.status, info.value.body) == (400, b"bad request")
    # The id is free again.
    exchange = await carrier.request(req(1, "echo"), {})
    assert (await collect(exchange))[-1] == result(1, echo={})
    with pytest.raises(CarrierError):
        await carrier.send(note("bad"), {})
    await carrier.close()


async def test_legacy_duplicate_id_in_flight(serve: Serve, session: aiohttp.ClientSession) -> None:
    _, carrier, _ = await legacy(serve, session)
    await carrier.start()
    held = await carrier.request(req(1, "hold"), {})
    with pytest.raises(CarrierError, match="already in flight"):
        await carrier.request(req(1, "echo"), {})
    await held.aclose()
    assert [m async for m in held.messages] == []
    await carrier.close()


async def test_legacy_stream_drop_fails_waiters_and_start_reconnects(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    server, carrier, _ = await legacy(serve, session)
    await carrier.start()
    held = await carrier.request(req(1, "hold"), {})
    await carrier.send(note("drop"), {})
    with pytest.raises(CarrierError, match="closed the HTTP\\+SSE stream"):
        await collect(held)
    assert not carrier.is_open
    with pytest.raises(CarrierError, match="not open"):
        await carrier.request(req(2, "echo"), {})
    await carrier.start()
    assert endpoint_of(carrier) is not None
    assert endpoint_of(carrier).endswith("session_id=s2")
    exchange = await carrier.request(req(2, "echo"), {})
    assert (await collect(exchange))[-1] == result(2, echo={})
    assert len(server.sessions) == 2
    await carrier.close()


async def test_legacy_close_during_start(serve: Serve, session: aiohttp.ClientSession) -> None:
    server = LegacyServer()
    base = await serve(server.app)
    # Closed while the GET awaits its response headers.
    carrier = LegacySseCarrier(base / "sse", session, endpoint_timeout=2.0)
    server.gate = asyncio.Event()
    starting = asyncio.create_task(carrier.start())
    await server.get_arrived.wait()
    await carrier.close()
    server.gate.set()
    with pytest.raises(CarrierError, match="carrier was closed"):
        await starting
    assert not carrier.is_open
    # Closed while waiting for the endpoint event.
    carrier = LegacySseCarrier(base / "silent", session, endpoint_timeout=2.0)
    starting = asyncio.create_task(carrier.start())
    await server.silent_opened.wait()
    await carrier.close()
    with pytest.raises(CarrierError, match="carrier was closed") as info:
        await starting
    assert not info.value.timeout
    assert not carrier.is_open


async def test_legacy_requires_start(session: aiohttp.ClientSession) -> None:
    carrier = LegacySseCarrier("http://127.0.0.1:9/sse", session)
    with pytest.raises(CarrierError, match="not open"):
        await carrier.request(req(1), {})
    with pytest.raises(CarrierError, match="not open"):
        await carrier.listen({})
    await carrier.terminate({})
    await carrier.close()


async def test_probe(serve: Serve, session: aiohttp.ClientSession) -> None:
    server = LegacyServer()
    base = await serve(server.app)
    modern = await serve(streamable_app())
    endpoint = await open_legacy_sse_probe(session, base / "sse", 2.0)
    assert endpoint == str(base / "messages") + "?session_id=s1"
    # A Streamable HTTP server: GET refused, or a stream whose first event is a message.
    assert await open_legacy_sse_probe(session, modern / "json", 2.0) is None
    assert await open_legacy_sse_probe(session, modern / "stream", 2.0) is None
    assert await open_legacy_sse_probe(session, base / "silent", 2.0) is None
    # Nothing listening: unreachable (never sent), not "no transport of ours".
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CarrierError) as caught:
        await open_legacy_sse_probe(session, f"http://127.0.0.1:{port}/sse", 0.5)
    assert caught.value.unreached


async def test_probe_times_out(serve: Serve, session: aiohttp.ClientSession) -> None:
    # An SSE stream that opens but says nothing.
    app = web.Application()

    async def mute(request: web.Request) -> web.StreamResponse:
        resp = await open_sse(request)
        await request.app[HANDLER_RELEASE].wait()
        return resp

    app.router.add_get("/mute", mute)
    base = await serve(app)
    assert await open_legacy_sse_probe(session, base / "mute", 0.2) is None
