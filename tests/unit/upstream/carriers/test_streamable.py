"""The Streamable HTTP carrier against real aiohttp servers on loopback ports."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.upstream.carriers.base import CarrierError, Message
from gateway.upstream.carriers.streamable import StreamableHttpCarrier
from gateway.wire.sse import encode_event
from tests.unit.upstream.carriers.http_peers import (
    SEEN,
    Serve,
    carrier_at,
    collect,
    note,
    open_sse,
    req,
    result,
    sse,
    streamable_app,
)


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
