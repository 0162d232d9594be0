"""A question a Streamable HTTP server asks on its session's GET stream while one call is
in flight, which that call ends before its client was asked, is not lost: it goes back
to the session (here a stateless client's pool), and the pool's next call asks it.

Taken as the one call's own (the gateway cannot tell an off-call question from one a
tool awaits), it used to wait for that call's client forever once the call had ended:
never answered upstream, never asked again.  The server below asks on its GET stream
and answers its tool without waiting (as server-everything's tools do); the gateway
gathers questions for 2 s (`GATEWAY_ASK_SETTLE`), so the call ends while the question
is pending with it.

That is the route option `roots=shared` (a pool's roots come from whichever caller it
asked); by default (`roots=per-client`) a server seen asking off-call keeps roots per
session: a pool then holds its own caller's roots and the gateway answers the server's
`roots/list` itself, which the last test shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.e2e.fake_client import modern_headers, post, text_of
from tests.e2e.gateway_proc import gateway
from tests.e2e.sdk_peers import modern_call

ROOTS_CAPS = {"roots": {"listChanged": True}}
ROOT = "file:///srv/project"


class OffCallAsker:
    """A 2025-06-18 server: `fire` asks `roots/list` on the GET stream and answers at
    once; `roots` says what it was told.  ``seen`` is what it read, in order."""

    def __init__(self) -> None:
        self.streams: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.stream_open = asyncio.Event()
        self.roots: list[str] | None = None
        self.seen: list[Any] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return await self._stream(request)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = json.loads(await request.read())
        method = message.get("method")
        self.seen.append(method or ["answer", message.get("id")])
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "off-call-asker", "version": "0"},
            }
            session = {"Mcp-Session-Id": uuid.uuid4().hex}
            return web.json_response(_result(message["id"], result), headers=session)
        if "id" not in message or method is None:
            if message.get("id") == "roots-1" and "result" in message:
                self.roots = [r["uri"] for r in message["result"].get("roots", [])]
            return web.Response(status=202)
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("fire", "roots")]
            return web.json_response(_result(message["id"], {"tools": tools}))
        if method == "tools/call":
            if message["params"]["name"] == "fire":
                await self._ask(request.headers["Mcp-Session-Id"])
            text = json.dumps(self.roots)
            return web.json_response(_result(message["id"], {"content": [_text(text)]}))
        if method == "ping":
            return web.json_response(_result(message["id"], {}))
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error})

    async def _ask(self, session: str) -> None:
        queue = self.streams[session]
        queue.put_nowait({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
        await queue.join()  # written on the stream; then answered (a server's own pace)
        await asyncio.sleep(0.02)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.streams[request.headers["Mcp-Session-Id"]] = queue
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        self.stream_open.set()
        while True:
            message = await queue.get()
            await stream.write(f"data: {json.dumps(message)}\n\n".encode())
            queue.task_done()


def _result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@contextlib.asynccontextmanager
async def serving(server: OffCallAsker) -> AsyncIterator[tuple[str, web.AppRunner]]:
    app = web.Application()
    app.router.add_route("*", "/mcp", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/mcp", runner
    finally:
        await runner.cleanup()


async def _call(http: aiohttp.ClientSession, url: str, name: str, **kwargs: Any) -> dict[str, Any]:
    headers = {**modern_headers("tools/call", name), "Authorization": "Bearer alice"}
    reply = await post(http, url, modern_call(name, {}, ROOTS_CAPS, **kwargs), headers)
    assert reply.status == 200, reply.text
    return reply.result


async def test_a_question_its_call_did_not_live_to_ask_goes_to_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = OffCallAsker()
    monkeypatch.setenv("GATEWAY_ASK_SETTLE", "2")
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url},roots=shared", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    third = await _rounds(http, gw.url())
            finally:
                # Stopped first (this loop blocks while the gateway stops): the
                # gateway's DELETE on its way out is refused at once, not left hanging.
                await runner.cleanup()
    assert third.get("resultType") == "complete", third
    assert json.loads(text_of(third)) == [ROOT]
    calls = [m for m in server.seen if m in ("tools/call", ["answer", "roots-1"])]
    assert calls == ["tools/call", ["answer", "roots-1"], "tools/call"], server.seen


async def _rounds(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    """`fire` ends without asking; the next call asks what it left; its retry ends."""
    first = await _call(http, url, "fire")
    assert first.get("resultType") == "complete", first
    second = await _call(http, url, "roots")
    assert second.get("resultType") == "input_required", second
    ((key, asked),) = second["inputRequests"].items()
    assert asked["method"] == "roots/list", asked
    answer = {key: {"roots": [{"uri": ROOT, "name": "project"}]}}
    return await _call(http, url, "roots", responses=answer, state=second["requestState"])


async def _own_roots_call(http: aiohttp.ClientSession, url: str, name: str) -> dict[str, Any]:
    """A call that is first asked for its client's roots (one round), then answered."""
    first = await _call(http, url, name)
    assert first.get("resultType") == "input_required", first
    ((key, asked),) = first["inputRequests"].items()
    assert asked["method"] == "roots/list", asked
    answer = {key: {"roots": [{"uri": ROOT, "name": "project"}]}}
    return await _call(http, url, name, responses=answer, state=first["requestState"])


async def test_per_client_the_pool_answers_with_its_callers_roots(tmp_path: Path) -> None:
    """Per client (the default), the first call runs at once (nothing asked it); the
    question its server then asks off-call, which the call did not live to ask, says
    the server keeps roots per session: the next call brings its client's roots first,
    and the held question is answered by the gateway with them, so the server knows the
    caller's roots before that call runs."""
    server = OffCallAsker()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    fired = await _call(http, gw.url(), "fire")
                    assert fired.get("resultType") == "complete", fired
                    told = await _own_roots_call(http, gw.url(), "roots")
            finally:
                await runner.cleanup()
    assert told.get("resultType") == "complete", told
    assert json.loads(text_of(told)) == [ROOT]
    assert ["answer", "roots-1"] in server.seen, server.seen
