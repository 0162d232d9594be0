"""A 2026-07-28 client that declares `roots`, in front of a handshake-era server, is asked
for its roots only when the server asks (issue 36).

The server below (2025-06-18, Streamable HTTP) has three tools: `plain` never asks,
`rooted` asks `roots/list` inside its call (on the call's own response stream, as SDK
servers' tools do) and says what it was told, and `held` says what its session was told.
With `asks_on_start` it asks `roots/list` on its session's GET stream right after
`initialized` (as server-filesystem and server-everything do), outside any call, and
`held` waits (bounded) until its session has the answer.
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
from aiohttp import web

from tests.e2e.fake_client import modern_headers, post, text_of
from tests.e2e.gateway_proc import gateway
from tests.e2e.sdk_peers import modern_call

ROOTS_CAPS = {"roots": {}}
A = "file:///srv/alice"
B = "file:///srv/bob"
WAIT = 10.0


class RootsServer:
    """A 2025-06-18 server; ``told`` holds each session's last roots answer."""

    def __init__(self, asks_on_start: bool = False, asks_on_get: bool = False) -> None:
        self.asks_on_start = asks_on_start
        self.asks_on_get = asks_on_get
        self.streams: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.told: dict[str, list[str]] = {}
        self.given: dict[str, asyncio.Event] = {}
        self.asked = 0
        self.calls: list[tuple[str, str]] = []  # (session, tool)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        session = request.headers.get("Mcp-Session-Id", "")
        if request.method == "GET":
            return await self._stream(request, session)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = json.loads(await request.read())
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "roots-server", "version": "0"},
            }
            headers = {"Mcp-Session-Id": uuid.uuid4().hex}
            return web.json_response(_result(message["id"], result), headers=headers)
        if method is None:  # an answer to a question
            future = self.waiting.pop(str(message.get("id")), None)
            if future is not None and not future.done():
                future.set_result(message)
            self._keep(session, message)
            return web.Response(status=202)
        if "id" not in message:
            if method == "notifications/initialized" and self.asks_on_start:
                self.streams.setdefault(session, asyncio.Queue()).put_nowait(self._question())
            return web.Response(status=202)
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            return web.json_response(_result(message["id"], {"tools": tools}))
        if method == "tools/call":
            name = message["params"]["name"]
            self.calls.append((session, name))
            if name == "rooted":
                return await self._rooted(request, session, message["id"])
            if name == "held" and self.asks_on_start:  # it needs its roots first
                async with asyncio.timeout(WAIT):
                    await self._roots_of(session).wait()
            text = json.dumps(self.told.get(session)) if name == "held" else "plain"
            return web.json_response(_result(message["id"], {"content": [_text(text)]}))
        if method == "ping":
            return web.json_response(_result(message["id"], {}))
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def _question(self) -> dict[str, Any]:
        self.asked += 1
        return {"jsonrpc": "2.0", "id": f"roots-{self.asked}", "method": "roots/list"}

    def _roots_of(self, session: str) -> asyncio.Event:
        return self.given.setdefault(session, asyncio.Event())

    def _keep(self, session: str, answer: dict[str, Any]) -> None:
        result = answer.get("result")
        if isinstance(result, dict):
            self.told[session] = [r["uri"] for r in result.get("roots", [])]
            self._roots_of(session).set()

    async def _rooted(self, request: web.Request, session: str, id_: Any) -> web.StreamResponse:
        """Asks roots/list on the call's own stream (``asks_on_get``: on the session's
        GET stream, as a TypeScript server's ``server.listRoots()`` in a tool does),
        then says what it was told."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        question = self._question()
        future = self.waiting[question["id"]] = asyncio.get_running_loop().create_future()
        if self.asks_on_get:
            self.streams.setdefault(session, asyncio.Queue()).put_nowait(question)
        else:
            await stream.write(_sse(question))
        answer = await asyncio.wait_for(future, WAIT)
        roots = [r["uri"] for r in answer.get("result", {}).get("roots", [])]
        await stream.write(_sse(_result(id_, {"content": [_text(json.dumps(roots))]})))
        await stream.write_eof()
        return stream

    async def _stream(self, request: web.Request, session: str) -> web.StreamResponse:
        queue = self.streams.setdefault(session, asyncio.Queue())
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        while True:
            await stream.write(_sse(await queue.get()))


TOOLS = ("plain", "rooted", "held")


def _sse(message: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(message)}\n\n".encode()


def _result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@contextlib.asynccontextmanager
async def serving(server: RootsServer) -> AsyncIterator[tuple[str, web.AppRunner]]:
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


class Client:
    """A 2026-07-28 client declaring roots, counting its HTTP exchanges."""

    def __init__(self, http: aiohttp.ClientSession, url: str, roots: str) -> None:
        self.http, self.url, self.roots = http, url, roots
        self.exchanges = 0
        self.asked: list[str] = []

    async def once(self, name: str, **kwargs: Any) -> dict[str, Any]:
        headers = {**modern_headers("tools/call", name), "Authorization": "Bearer alice"}
        self.exchanges += 1
        body = modern_call(name, {}, ROOTS_CAPS, **kwargs)
        reply = await post(self.http, self.url, body, headers)
        assert reply.status == 200, reply.text
        return reply.result

    async def call(self, name: str) -> dict[str, Any]:
        """The tool's result, each round's questions answered (roots only here)."""
        result = await self.once(name)
        while result.get("resultType") == "input_required":
            answers = {}
            for key, asked in result["inputRequests"].items():
                self.asked.append(asked["method"])
                answers[key] = {"roots": [{"uri": self.roots, "name": "home"}]}
            result = await self.once(name, responses=answers, state=result["requestState"])
        assert result.get("resultType", "complete") == "complete", result
        return result


async def _readyz(http: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    async with http.get(base + "/readyz") as response:
        body: dict[str, Any] = await response.json()
        return body["routes"]["/mcp"]


async def test_a_server_that_never_asks_roots_runs_each_call_in_one_exchange(
    tmp_path: Path,
) -> None:
    server = RootsServer()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice = Client(http, gw.url(), A)
                    for _ in range(3):
                        assert text_of(await alice.call("plain")) == "plain"
                    ready = await _readyz(http, gw.base)
            finally:
                await runner.cleanup()
    assert alice.exchanges == 3 and alice.asked == []
    assert ready["roots"] == "unseen", ready


async def test_only_the_tool_that_asks_roots_asks_them_in_its_own_round(tmp_path: Path) -> None:
    server = RootsServer()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice, bob = Client(http, gw.url(), A), Client(http, gw.url(), B)
                    assert text_of(await alice.call("plain")) == "plain"
                    assert alice.exchanges == 1
                    assert json.loads(text_of(await alice.call("rooted"))) == [A]
                    assert alice.exchanges == 3 and alice.asked == ["roots/list"]
                    # Bob's calls never land on the session that holds Alice's roots.
                    assert json.loads(text_of(await bob.call("held"))) is None
                    assert json.loads(text_of(await bob.call("rooted"))) == [B]
                    assert text_of(await alice.call("plain")) == "plain"
                    ready = await _readyz(http, gw.base)
            finally:
                await runner.cleanup()
    assert alice.exchanges == 4 and bob.exchanges == 3
    assert alice.asked == bob.asked == ["roots/list"]
    assert ready["roots"] == "in-calls", ready
    assert "upstream roots use learned" in gw.log() and "in-calls" in gw.log()
    sessions = [session for session, _ in server.calls]
    assert sessions[0] == sessions[1] and sessions[2] != sessions[1]


async def test_a_question_asked_on_start_goes_to_the_first_calls_client(tmp_path: Path) -> None:
    """Asked outside calls, the question waits for the pool's first call, whose client
    answers it in that call's round; the server keeps roots per session, so later calls
    ask first, each on a session of exactly its client's roots."""
    server = RootsServer(asks_on_start=True)
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice, bob = Client(http, gw.url(), A), Client(http, gw.url(), B)
                    assert json.loads(text_of(await alice.call("held"))) == [A]
                    assert alice.exchanges == 2 and alice.asked == ["roots/list"]
                    assert json.loads(text_of(await bob.call("held"))) == [B]
                    assert json.loads(text_of(await alice.call("held"))) == [A]
                    ready = await _readyz(http, gw.base)
            finally:
                await runner.cleanup()
    assert ready["roots"] == "per-session", ready
    assert bob.asked == ["roots/list"] and alice.asked == ["roots/list"] * 2
    first, second, third = (session for session, _ in server.calls)
    assert first == third != second


async def test_a_rounds_answer_is_not_charged_again_by_rate_limits(tmp_path: Path) -> None:
    """Issue 36, item 5: with one call allowed, the call's round is answered (its retry
    carries the gateway's requestState) and completes; a new call is then refused."""
    server = RootsServer()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url},rate=1/h,burst=1", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice = Client(http, gw.url(), A)
                    assert json.loads(text_of(await alice.call("rooted"))) == [A]
                    headers = {
                        **modern_headers("tools/call", "plain"),
                        "Authorization": "Bearer alice",
                    }
                    body = modern_call("plain", {}, ROOTS_CAPS)
                    refused = await post(http, gw.url(), body, headers)
            finally:
                await runner.cleanup()
    assert alice.exchanges == 2 and alice.asked == ["roots/list"]
    assert refused.status == 429, refused.text


async def test_concurrent_clients_asked_off_their_calls_streams_keep_their_own_roots(
    tmp_path: Path,
) -> None:
    """Two clients' calls at once, each tool asking roots on the session's GET stream
    (where no call's own stream names whose question it is): each call runs on a
    session of its own, so each question is its own caller's, and each tool sees its
    own caller's roots, never the other's."""
    server = RootsServer(asks_on_get=True)
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice, bob = Client(http, gw.url(), A), Client(http, gw.url(), B)
                    for _ in range(3):
                        told = await asyncio.gather(alice.call("rooted"), bob.call("rooted"))
                        assert [json.loads(text_of(t)) for t in told] == [[A], [B]]
            finally:
                await runner.cleanup()
    assert alice.asked == bob.asked == ["roots/list"] * 3


async def test_roots_per_session_asks_first_as_the_operator_said(tmp_path: Path) -> None:
    """`roots=per-session` says the server keeps roots per session from the start: each
    call that may ask is asked for its roots first, and runs on a session of exactly
    those (two clients, two sessions)."""
    server = RootsServer()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url},roots=per-session", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    alice, bob = Client(http, gw.url(), A), Client(http, gw.url(), B)
                    assert text_of(await alice.call("plain")) == "plain"
                    assert text_of(await bob.call("plain")) == "plain"
                    assert text_of(await alice.call("plain")) == "plain"
                    ready = await _readyz(http, gw.base)
            finally:
                await runner.cleanup()
    assert ready["roots"] == "per-session", ready
    assert alice.asked == ["roots/list"] * 2 and bob.asked == ["roots/list"]
    first, second, third = (session for session, _ in server.calls)
    assert first == third != second
