"""A wait for the client is bounded too (issue 36, item 4).

A 2025-11-25 session client with no standalone GET stream calls a tool whose upstream
floods it with `elicitation/create` and answers only after 8 s, on a route with
`timeout=4`.  The route's clock pauses while the upstream waits on the client, so the
pause needs a bound of its own (`ask_timeout`): past it the call ends with the
revision's timeout error and the questions left are refused upstream.  The questions
go out on the call's own response stream, where this client reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.gateway_proc import gateway

QUESTIONS = 2000
LATE = 8.0
WAIT = 30.0
ACCEPT = "application/json, text/event-stream"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}}


class Flooder:
    """A 2025-11-25 server whose `flood` asks ``questions`` times, then answers LATE;
    ``on_get``: it asks on its session's GET stream instead of the call's own."""

    def __init__(self, questions: int = QUESTIONS, on_get: bool = False) -> None:
        self.questions, self.on_get = questions, on_get
        self.answered: set[str] = set()  # the questions answered (or refused)
        self.all_answered = asyncio.Event()
        self.streams: dict[str, asyncio.Queue[dict[str, Any]]] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        session = request.headers.get("Mcp-Session-Id", "")
        if request.method == "GET":
            return await self._stream(request, session)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = json.loads(await request.read())
        method = message.get("method")
        if method is None:
            self.answered.add(str(message.get("id")))
            if len(self.answered) == self.questions:
                self.all_answered.set()
            return web.Response(status=202)
        if "id" not in message:
            return web.Response(status=202)
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flooder", "version": "0"},
            }
            headers = {"Mcp-Session-Id": uuid.uuid4().hex}
            return web.json_response(_result(message["id"], result), headers=headers)
        if method == "tools/call" and self.on_get:
            queue = self.streams.setdefault(session, asyncio.Queue())
            for ask in self._asks():
                queue.put_nowait(ask)
            await asyncio.sleep(LATE)
            text = {"content": [{"type": "text", "text": "late"}]}
            return web.json_response(_result(message["id"], text))
        if method == "tools/call":
            return await self._flood(request, message["id"])
        if method == "tools/list":
            tools = [{"name": "flood", "inputSchema": {"type": "object"}}]
            return web.json_response(_result(message["id"], {"tools": tools}))
        if method == "ping":
            return web.json_response(_result(message["id"], {}))
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error})

    async def _flood(self, request: web.Request, id_: Any) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        with contextlib.suppress(ConnectionError):
            for ask in self._asks():
                await stream.write(_sse(ask))
            await asyncio.sleep(LATE)
            text = {"content": [{"type": "text", "text": "late"}]}
            await stream.write(_sse(_result(id_, text)))
        return stream

    def _asks(self) -> list[dict[str, Any]]:
        params = [{"message": f"q{n}", "requestedSchema": FORM} for n in range(self.questions)]
        return [
            {"jsonrpc": "2.0", "id": f"q{n}", "method": "elicitation/create", "params": p}
            for n, p in enumerate(params)
        ]

    async def _stream(self, request: web.Request, session: str) -> web.StreamResponse:
        queue = self.streams.setdefault(session, asyncio.Queue())
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                await stream.write(_sse(await queue.get()))
        return stream


def _sse(message: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(message)}\n\n".encode()


def _result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


@contextlib.asynccontextmanager
async def serving(server: Flooder) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/mcp", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    finally:
        await runner.cleanup()


async def _session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    """A 2025-11-25 session declaring elicitation; its headers for what follows."""
    opening = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "e2e", "version": "0"},
        },
    }
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    async with http.post(url, json=opening, headers=headers) as reply:
        assert reply.status == 200, await reply.text()
        session = reply.headers["Mcp-Session-Id"]
    headers = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=done, headers=headers) as reply:
        assert reply.status == 202, await reply.text()
    return headers


async def _call(http: aiohttp.ClientSession, url: str) -> tuple[list[dict[str, Any]], float]:
    """The call's stream, read without answering anything (for WAIT seconds at most)."""
    headers = await _session(http, url)
    headers = {**headers, "Mcp-Method": "tools/call", "Mcp-Name": "flood"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "flood"}}
    started = time.monotonic()
    messages: list[dict[str, Any]] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WAIT), http.post(url, json=body, headers=headers) as reply:
            assert reply.status == 200
            if reply.content_type == "application/json":
                messages.append(await reply.json())
            else:
                async for line in reply.content:
                    if line.startswith(b"data:") and line[5:].strip():
                        messages.append(json.loads(line[5:]))
                        if messages[-1].get("id") == 1 and "method" not in messages[-1]:
                            break
    return messages, time.monotonic() - started


async def test_a_wait_for_the_client_is_bounded(tmp_path: Path) -> None:
    server = Flooder()
    async with serving(server) as url:
        route = f"/mcp={url},timeout=4,ask_timeout=3"
        with gateway(route, tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                messages, took = await _call(http, gw.url())
            # Every question is refused upstream: past the per-call bounds at once,
            # those put to the client when the wait for it ran out.
            async with asyncio.timeout(10):
                await server.all_answered.wait()
    asked = [m for m in messages if m.get("method") == "elicitation/create"]
    final = messages[-1]
    assert asked, f"no question reached the client on the call's own stream: {messages[:3]}"
    assert final.get("id") == 1 and "error" in final, final
    assert "ask_timeout" in final["error"]["message"], final
    assert took < LATE, took  # ended by the bound, not by the upstream's late answer


async def test_a_session_clients_questions_go_out_on_its_calls_own_stream(
    tmp_path: Path,
) -> None:
    """Asked on the upstream session's GET stream while the call waits on its first
    question, the rest went to the client's standalone stream, which this client does
    not have: they reach it on the call's own stream instead."""
    server = Flooder(questions=20, on_get=True)
    async with serving(server) as url:
        with gateway(f"/mcp={url},timeout=4", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                messages, took = await _call(http, gw.url())
    asked = [m for m in messages if m.get("method") == "elicitation/create"]
    assert len(asked) == 20, messages[:3]
    final = messages[-1]
    assert final.get("id") == 1 and "error" in final, final
    assert took < LATE, took
