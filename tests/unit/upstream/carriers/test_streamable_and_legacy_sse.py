"""The HTTP carriers against real aiohttp servers on loopback ports."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from structlog.testing import capture_logs
from yarl import URL

from gateway.upstream.carriers.base import CarrierError, Message, UpstreamReply
from gateway.upstream.carriers.legacy_sse import LegacySseCarrier, open_legacy_sse_probe
from gateway.upstream.carriers.streamable import StreamableHttpCarrier
from gateway.wire.sse import encode_event

Serve = Callable[[web.Application], Awaitable[URL]]
HANDLER_RELEASE = web.AppKey("release", asyncio.Event)
SEEN = web.AppKey("seen", list)


def req(id_: int | str, method: str = "tools/call", **params: Any) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def note(method: str, **params: Any) -> Message:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def result(id_: Any, **value: Any) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def sse(message: Message | str, event: str | None = None, id_: str | None = None) -> bytes:
    data = message if isinstance(message, str) else orjson.dumps(message)
    return encode_event(data, event=event, id=id_)


async def collect(exchange: UpstreamReply) -> list[Message]:
    return [m async for m in exchange.messages]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    runners: list[tuple[web.AppRunner, asyncio.Event]] = []

    async def start(app: web.Application) -> URL:
        release = asyncio.Event()
        app[HANDLER_RELEASE] = release
        # handler_cancellation: a handler learns of a client that went away,
        # which the cancellation test observes.
        runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append((runner, release))
        host, port = runner.addresses[0][:2]
        return URL.build(scheme="http", host=host, port=port)

    yield start
    for runner, release in runners:
        release.set()  # let parked handlers finish
        await runner.cleanup()


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Mcp-Session-Id": "sess-1"})
    resp.content_type = "text/event-stream"
    await resp.prepare(request)
    return resp


# --------------------------------------------------------------------------- Streamable HTTP


def streamable_app(cancelled: asyncio.Event | None = None) -> web.Application:
    app = web.Application()
    app[SEEN] = []

    async def record(request: web.Request) -> Message:
        body: Message = await request.json()
        request.app[SEEN].append((request.method, request.path, dict(request.headers), body))
        return body

    async def json_answer(request: web.Request) -> web.Response:
        body = await record(request)
        return web.json_response(
            result(body["id"], echo=body["params"]), headers={"Mcp-Session-Id": "sess-1"}
        )

    async def batch(request: web.Request) -> web.Response:
        body = await record(request)
        # Response first on the wire: the exchange still ends with it.
        return web.json_response([result(body["id"], ok=True), note("notifications/message")])

    async def sse_answer(request: web.Request) -> web.StreamResponse:
        body = await record(request)
        resp = await open_sse(request)
        await resp.write(b": comment first\n\n")
        await resp.write(encode_event("", id="prime-1"))  # priming event, empty data
        await resp.write(sse(note("notifications/progress", progress=1)))
        await resp.write(sse(result(999, stray=True), event="other"))  # not a message event
        await resp.write(sse(note("notifications/message"), event="message"))
        reply = orjson.dumps(result(body["id"], done=True))
        # Split the response event mid-way across two writes.
        frame = encode_event(reply)
        await resp.write(frame[:7])
        await resp.write(frame[7:])
        # Keep the stream open: the carrier must stop at the response, not at EOF.
        await request.app[HANDLER_RELEASE].wait()
        return resp

    async def rpc_error(request: web.Request) -> web.Response:
        await record(request)
        err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}
        return web.json_response(err, status=400)

    async def not_found(request: web.Request) -> web.Response:
        return web.Response(status=404)

    async def plain_500(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    async def not_json(request: web.Request) -> web.Response:
        return web.Response(body=b"{nope", content_type="application/json")

    async def accepted(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=202)

    async def eof_early(request: web.Request) -> web.StreamResponse:
        await record(request)
        resp = await open_sse(request)
        await resp.write(sse(note("notifications/progress")))
        await resp.write_eof()  # a clean end, but no response
        return resp

    async def abort_mid_stream(request: web.Request) -> web.StreamResponse:
        await record(request)
        resp = await open_sse(request)
        await resp.write(sse(note("notifications/progress")))
        assert request.transport is not None
        request.transport.close()  # chunked body never terminated
        return resp

    async def slow_headers(request: web.Request) -> web.Response:
        await request.app[HANDLER_RELEASE].wait()
        return web.Response(status=204)

    async def slow_body(request: web.Request) -> web.StreamResponse:
        resp = await open_sse(request)
        await resp.write(encode_event("", id="prime"))
        await request.app[HANDLER_RELEASE].wait()
        return resp

    async def cancellable(request: web.Request) -> web.StreamResponse:
        resp = await open_sse(request)
        await resp.write(sse(note("notifications/progress")))
        try:
            await request.app[HANDLER_RELEASE].wait()
        except asyncio.CancelledError:
            assert cancelled is not None
            cancelled.set()
            raise
        return resp

    async def get_stream(request: web.Request) -> web.StreamResponse:
        request.app[SEEN].append((request.method, request.path, dict(request.headers), None))
        resp = await open_sse(request)
        await resp.write(encode_event("", id="p"))
        await resp.write(sse(note("notifications/tools/list_changed")))
        await resp.write(sse(note("notifications/resources/updated", uri="x")))
        await resp.write_eof()
        return resp

    async def get_forever(request: web.Request) -> web.StreamResponse:
        resp = await open_sse(request)
        await resp.write(sse(note("notifications/tools/list_changed")))
        await request.app[HANDLER_RELEASE].wait()
        return resp

    async def delete(request: web.Request) -> web.Response:
        request.app[SEEN].append((request.method, request.path, dict(request.headers), None))
        return web.Response(status=200)

    async def delete_500(request: web.Request) -> web.Response:
        return web.Response(status=500)

    async def wrong_id(request: web.Request) -> web.Response:
        body = await record(request)
        return web.json_response(result(f"not-{body['id']}"))

    async def get_json(request: web.Request) -> web.Response:
        return web.json_response({"hello": "world"})

    async def sse_null_error(request: web.Request) -> web.StreamResponse:
        await record(request)
        resp = await open_sse(request)
        # A null-id result answers nothing; a null-id error is this request's own.
        await resp.write(sse(result(None, stray=True)))
        await resp.write(sse({"jsonrpc": "2.0", "id": None, "error": {"code": -32600}}))
        await request.app[HANDLER_RELEASE].wait()
        return resp

    app.router.add_post("/json", json_answer)
    app.router.add_post("/batch", batch)
    app.router.add_post("/sse", sse_answer)
    app.router.add_post("/rpc-error", rpc_error)
    app.router.add_post("/missing", not_found)
    app.router.add_post("/boom", plain_500)
    app.router.add_post("/not-json", not_json)
    app.router.add_post("/accepted", accepted)
    app.router.add_post("/eof-early", eof_early)
    app.router.add_post("/abort", abort_mid_stream)
    app.router.add_post("/slow-headers", slow_headers)
    app.router.add_post("/slow-body", slow_body)
    app.router.add_post("/cancel", cancellable)
    app.router.add_get("/stream", get_stream)
    app.router.add_delete("/stream", delete)
    app.router.add_get("/forever", get_forever)
    app.router.add_delete("/boom", delete_500)
    app.router.add_get("/boom", plain_500)
    app.router.add_post("/wrong-id", wrong_id)
    app.router.add_get("/get-json", get_json)
    app.router.add_post("/sse-null-error", sse_null_error)
    return app


def carrier_at(
    base: URL, path: str, session: aiohttp.ClientSession, **kwargs: Any
) -> StreamableHttpCarrier:
    kwargs.setdefault("read_timeout", 2.0)
    return StreamableHttpCarrier(base / path.lstrip("/"), session, **kwargs)


async def test_json_answer(serve: Serve, session: aiohttp.ClientSession) -> None:
    app = streamable_app()
    base = await serve(app)
    carrier = carrier_at(base, "/json", session)
    await carrier.start()
    exchange = await carrier.request(req(1, x=1), {"Mcp-Session-Id": "abc", "Accept": "text/html"})
    assert exchange.status == 200
    assert exchange.headers["mcp-session-id"] == "sess-1"
    assert await collect(exchange) == [result(1, echo={"x": 1})]
    method, path, headers, body = app[SEEN][0]
    assert (method, path, body) == ("POST", "/json", req(1, x=1))
    assert headers["Mcp-Session-Id"] == "abc"
    # The carrier's Accept wins over a caller's.
    assert headers["Accept"] == "application/json, text/event-stream"
    assert headers["Content-Type"] == "application/json"


async def test_json_batch_yields_each_and_ends_with_response(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/batch", session)
    exchange = await carrier.request(req("a"), {})
    assert await collect(exchange) == [note("notifications/message"), result("a", ok=True)]


async def test_sse_answer(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/sse", session)
    exchange = await carrier.request(req(7), {})
    assert exchange.status == 200
    assert exchange.headers["Content-Type"] == "text/event-stream"
    # Priming event and the non-message event are skipped; the stream stays
    # open after the response, so ending here proves the carrier stopped on it.
    assert await collect(exchange) == [
        note("notifications/progress", progress=1),
        note("notifications/message"),
        result(7, done=True),
    ]
    assert not carrier._streams
    await exchange.aclose()  # harmless after the end


async def test_sse_answer_by_a_null_id_error(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/sse-null-error", session)
    exchange = await carrier.request(req(7), {})
    # The stream stays open: ending here proves the null-id error ended the call.
    assert await collect(exchange) == [
        result(None, stray=True),
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}},
    ]
    assert not carrier._streams


async def test_rpc_error_status_is_an_exchange(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/rpc-error", session)
    exchange = await carrier.request(req(1), {})
    assert exchange.status == 400
    [error] = await collect(exchange)
    assert error["error"]["code"] == -32600


async def test_404_without_body(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/missing", session)
    with pytest.raises(CarrierError) as info:
        await carrier.request(req(1), {})
    assert info.value.status == 404
    assert info.value.body == b""
    assert not info.value.timeout


async def test_500_with_text_body(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/boom", session)
    with pytest.raises(CarrierError) as info:
        await carrier.request(req(1), {})
    assert (info.value.status, info.value.body) == (500, b"boom")


async def test_json_body_that_is_not_json(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/not-json", session)
    with pytest.raises(CarrierError, match="not JSON") as info:
        await carrier.request(req(1), {})
    assert info.value.body == b"{nope"


async def test_202_to_a_request_is_an_error(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/accepted", session)
    with pytest.raises(CarrierError, match="no body") as info:
        await carrier.request(req(1), {})
    assert info.value.status == 202


async def test_json_answer_without_the_response(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/wrong-id", session)
    with pytest.raises(CarrierError, match="no response to the request"):
        await carrier.request(req(1), {})


async def test_json_body_over_the_size_limit(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/json", session, max_message_size=16)
    with pytest.raises(CarrierError, match="exceeds the limit"):
        await carrier.request(req(1, x="y" * 100), {})


async def test_sse_event_over_the_size_limit(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/sse", session, max_message_size=48)
    exchange = await carrier.request(req(1), {})
    with pytest.raises(CarrierError, match="exceeds the limit"):
        await collect(exchange)
    assert not carrier._streams


async def test_request_needs_an_id(session: aiohttp.ClientSession) -> None:
    carrier = StreamableHttpCarrier("http://127.0.0.1:9/", session)
    with pytest.raises(ValueError):
        await carrier.request(note("x"), {})


@pytest.mark.parametrize("path", ["/eof-early", "/abort"])
async def test_stream_ends_before_the_answer(
    serve: Serve, session: aiohttp.ClientSession, path: str
) -> None:
    carrier = carrier_at(await serve(streamable_app()), path, session)
    exchange = await carrier.request(req(1), {})
    seen: list[Message] = []
    with pytest.raises(CarrierError, match="upstream closed the stream before answering"):
        async for message in exchange.messages:
            seen.append(message)
    assert seen == [note("notifications/progress")]
    assert not carrier._streams


async def test_timeout_waiting_for_headers(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/slow-headers", session, read_timeout=0.2)
    with pytest.raises(CarrierError) as info:
        await carrier.request(req(1), {})
    assert info.value.timeout


async def test_timeout_reading_the_stream(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/slow-body", session, read_timeout=0.2)
    exchange = await carrier.request(req(1), {})
    with pytest.raises(CarrierError) as info:
        await collect(exchange)
    assert info.value.timeout


async def test_connection_refused(session: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    carrier = StreamableHttpCarrier(f"http://127.0.0.1:{port}/mcp", session)
    with pytest.raises(CarrierError) as info:
        await carrier.request(req(1), {})
    assert not info.value.timeout
    assert info.value.status is None


async def test_aclose_drops_the_response_and_the_upstream_sees_it(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    cancelled = asyncio.Event()
    carrier = carrier_at(await serve(streamable_app(cancelled)), "/cancel", session)
    exchange = await carrier.request(req(1), {})
    assert await anext(exchange.messages) == note("notifications/progress")
    await exchange.aclose()
    await asyncio.wait_for(cancelled.wait(), 5)
    assert [m async for m in exchange.messages] == []
    assert not carrier._streams


async def test_aclose_while_another_task_reads(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    carrier = carrier_at(await serve(streamable_app(asyncio.Event())), "/cancel", session)
    exchange = await carrier.request(req(1), {})
    first = await anext(exchange.messages)
    reader = asyncio.create_task(collect(exchange))
    await asyncio.sleep(0)  # likely blocks the reader on the socket; either order must work
    await exchange.aclose()
    # The reader ends quietly: the caller asked for this.
    assert first == note("notifications/progress")
    assert await asyncio.wait_for(reader, 5) == []


async def test_send_accepts_202(serve: Serve, session: aiohttp.ClientSession) -> None:
    app = streamable_app()
    carrier = carrier_at(await serve(app), "/accepted", session)
    await carrier.send(note("notifications/initialized"), {"Mcp-Session-Id": "s"})
    method, _, headers, body = app[SEEN][0]
    assert (method, body) == ("POST", note("notifications/initialized"))
    assert headers["Mcp-Session-Id"] == "s"


async def test_send_refused(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/boom", session)
    with pytest.raises(CarrierError) as info:
        await carrier.send(note("notifications/initialized"), {})
    assert info.value.status == 500


async def test_listen_yields_until_the_stream_ends(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    app = streamable_app()
    carrier = carrier_at(await serve(app), "/stream", session)
    stream = await carrier.listen({"Mcp-Session-Id": "s"})
    assert stream is not None
    assert [m async for m in stream] == [
        note("notifications/tools/list_changed"),
        note("notifications/resources/updated", uri="x"),
    ]
    _, _, headers, _ = app[SEEN][0]
    assert headers["Accept"] == "text/event-stream"
    assert headers["Mcp-Session-Id"] == "s"
    assert not carrier._streams


async def test_listen_405_means_no_channel(serve: Serve, session: aiohttp.ClientSession) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/json", session)
    assert await carrier.listen({}) is None


async def test_listen_refused_or_not_a_stream(serve: Serve, session: aiohttp.ClientSession) -> None:
    base = await serve(streamable_app())
    with pytest.raises(CarrierError) as info:
        await carrier_at(base, "/boom", session).listen({})
    assert (info.value.status, info.value.body) == (500, b"boom")
    with pytest.raises(CarrierError, match="application/json"):
        await carrier_at(base, "/get-json", session).listen({})


async def test_close_ends_an_open_listen_stream(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    carrier = carrier_at(await serve(streamable_app()), "/forever", session)
    stream = await carrier.listen({})
    assert stream is not None
    assert await anext(stream) == note("notifications/tools/list_changed")
    await carrier.close()
    assert [m async for m in stream] == []


async def test_terminate(serve: Serve, session: aiohttp.ClientSession) -> None:
    app = streamable_app()
    base = await serve(app)
    await carrier_at(base, "/stream", session).terminate({"Mcp-Session-Id": "s"})
    assert app[SEEN][0][:2] == ("DELETE", "/stream")
    assert app[SEEN][0][2]["Mcp-Session-Id"] == "s"
    await carrier_at(base, "/json", session).terminate({})  # 405: fine
    await carrier_at(base, "/nowhere", session).terminate({})  # 404: fine
    with pytest.raises(CarrierError) as info:
        await carrier_at(base, "/boom", session).terminate({})
    assert info.value.status == 500


# --------------------------------------------------------------------------- HTTP+SSE (legacy)


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
    # Nothing listening.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert await open_legacy_sse_probe(session, f"http://127.0.0.1:{port}/sse", 0.5) is None


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


def resuming_app(gets: list[dict[str, str]], *, ids: bool = True) -> web.Application:
    """A call's stream that the server ends before the answer (SEP-1699 polling); the
    answer comes on the GET that resumes it after the last event id."""
    app = web.Application()
    calls: list[Any] = []

    async def post(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        calls.append(body["id"])
        resp = await open_sse(request)
        await resp.write(encode_event("", id="s1-0" if ids else None, retry=10))
        await resp.write(
            sse(note("notifications/progress", progress=1), id_="s1-1" if ids else None)
        )
        await resp.write_eof()  # closes the connection without answering
        return resp

    async def get(request: web.Request) -> web.StreamResponse:
        gets.append(dict(request.headers))
        if request.headers.get("Last-Event-ID") != "s1-1":
            return web.Response(status=400)
        resp = await open_sse(request)
        await resp.write(sse(result(calls[-1], done=True), id_="s1-2"))
        await resp.write_eof()
        return resp

    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    return app


async def test_a_stream_ended_before_its_answer_is_resumed_with_last_event_id(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    gets: list[dict[str, str]] = []
    carrier = carrier_at(await serve(resuming_app(gets)), "/mcp", session)
    exchange = await carrier.request(req(7), {"Mcp-Session-Id": "sess-1"})
    seen = await collect(exchange)
    assert seen == [note("notifications/progress", progress=1), result(7, done=True)]
    [headers] = gets
    assert headers["Last-Event-ID"] == "s1-1"
    assert headers["Mcp-Session-Id"] == "sess-1"
    assert headers["Accept"] == "text/event-stream"
    assert "Content-Type" not in headers
    assert not carrier._streams


async def test_a_stream_without_ids_is_not_resumed(
    serve: Serve, session: aiohttp.ClientSession
) -> None:
    gets: list[dict[str, str]] = []
    carrier = carrier_at(await serve(resuming_app(gets, ids=False)), "/mcp", session)
    exchange = await carrier.request(req(7), {})
    with pytest.raises(CarrierError, match="before answering"):
        await collect(exchange)
    assert gets == []
