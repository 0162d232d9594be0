"""The upstreams the HTTP carriers' tests talk to: a Streamable HTTP server with a
path per behaviour, and the helpers both carriers' tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from gateway.upstream.carriers.base import Message, UpstreamReply
from gateway.upstream.carriers.streamable import StreamableHttpCarrier
from gateway.wire.sse import encode_event

Serve = Callable[[web.Application], Awaitable[URL]]
HANDLER_RELEASE = web.AppKey("release", asyncio.Event)
SEEN = web.AppKey("seen", list)
CANCELLED = web.AppKey("cancelled", asyncio.Event)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Mcp-Session-Id": "sess-1"})
    resp.content_type = "text/event-stream"
    await resp.prepare(request)
    return resp


# The Streamable HTTP upstream's behaviours, one handler each.


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
        request.app[CANCELLED].set()
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


STREAMABLE_ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("POST", "/json", json_answer),
    ("POST", "/batch", batch),
    ("POST", "/sse", sse_answer),
    ("POST", "/rpc-error", rpc_error),
    ("POST", "/missing", not_found),
    ("POST", "/boom", plain_500),
    ("POST", "/not-json", not_json),
    ("POST", "/accepted", accepted),
    ("POST", "/eof-early", eof_early),
    ("POST", "/abort", abort_mid_stream),
    ("POST", "/slow-headers", slow_headers),
    ("POST", "/slow-body", slow_body),
    ("POST", "/cancel", cancellable),
    ("GET", "/stream", get_stream),
    ("DELETE", "/stream", delete),
    ("GET", "/forever", get_forever),
    ("DELETE", "/boom", delete_500),
    ("GET", "/boom", plain_500),
    ("POST", "/wrong-id", wrong_id),
    ("GET", "/get-json", get_json),
    ("POST", "/sse-null-error", sse_null_error),
)


def streamable_app(cancelled: asyncio.Event | None = None) -> web.Application:
    """A Streamable HTTP upstream with a path per behaviour (see its handlers)."""
    app = web.Application()
    app[SEEN] = []
    app[CANCELLED] = cancelled or asyncio.Event()
    for method, path, handler in STREAMABLE_ROUTES:
        app.router.add_route(method, path, handler)
    return app


def carrier_at(
    base: URL, path: str, session: aiohttp.ClientSession, **kwargs: Any
) -> StreamableHttpCarrier:
    kwargs.setdefault("read_timeout", 2.0)
    return StreamableHttpCarrier(base / path.lstrip("/"), session, **kwargs)
