"""A stateless-era HTTP upstream whose tools mirror arguments into headers
(`x-mcp-header`): the gateway, as that upstream's client, must send the
`Mcp-Param-*` headers and must not offer tools whose annotations are invalid."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.demo import DemoServer
from tests.e2e.fake_client import (
    call_tool_legacy,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import gateway

MODERN = "2026-07-28"
Handler = Callable[[web.Request], Awaitable[web.Response]]
TOOLS = [
    {
        "name": "query",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "options": {
                    "type": "object",
                    "properties": {"shard": {"type": "integer", "x-mcp-header": "Shard"}},
                },
                "sql": {"type": "string"},
            },
        },
    },
    {  # invalid: an annotation under `items` is not statically reachable
        "name": "broken",
        "inputSchema": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}
            },
        },
    },
]


async def serve(handle: Handler) -> tuple[web.AppRunner, str]:
    """``handle`` as an HTTP server's POST /mcp on a free loopback port."""
    app = web.Application()
    app.router.add_post("/mcp", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    return runner, f"http://127.0.0.1:{port}/mcp"


async def modern_upstream(
    seen: list[dict[str, str]], tools: list[dict[str, Any]] = TOOLS
) -> tuple[web.AppRunner, str]:
    async def handle(request_: web.Request) -> web.Response:
        body = await request_.json()
        method, id_ = body.get("method"), body.get("id")
        meta = (body.get("params") or {}).get("_meta") or {}
        if meta.get("io.modelcontextprotocol/protocolVersion") != MODERN:
            error = {"code": -32022, "message": "unsupported", "data": {"supported": [MODERN]}}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=400)
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            seen.append({k: v for k, v in request_.headers.items() if k.startswith("Mcp-")})
            params = {k: v for k, v in request_.headers.items() if k.startswith("Mcp-Param-")}
            result = {"content": [{"type": "text", "text": json.dumps(params, sort_keys=True)}]}
        else:
            error = {"code": -32601, "message": "Method not found"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=404)
        result.update(resultType="complete", ttlMs=0, cacheScope="private")
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})

    return await serve(handle)


async def test_mcp_param_headers_are_sent_and_invalid_tools_hidden(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    runner, url = await modern_upstream(seen)
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                session_id = await open_session(http, gw.url("/mcp"), "2025-06-18")
                headers = session_headers(session_id, "2025-06-18")
                # A call before any tools/list: the gateway reads the list itself.
                reply = await call_tool_legacy(
                    http,
                    gw.url("/mcp"),
                    session_id,
                    "query",
                    {"region": "Hello, 世界", "options": {"shard": 7}, "sql": "select 1"},
                    version="2025-06-18",
                )
                sent = json.loads(text_of(reply.result))
                assert sent == {
                    "Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?=",
                    "Mcp-Param-Shard": "7",
                }
                assert seen[-1]["Mcp-Name"] == "query"
                listed = await post(http, gw.url("/mcp"), request(2, "tools/list"), headers)
                names = [tool["name"] for tool in listed.result["tools"]]
                assert names == ["query"]  # `broken` is not offered
            await runner.cleanup()
    finally:
        await runner.cleanup()


async def test_a_modern_clients_param_headers_are_checked_against_the_tool(tmp_path: Path) -> None:
    """The gateway processes the body, so it checks the `Mcp-Param-*` headers a
    2026-07-28 client mirrors (SEP-2243): malformed, missing or different is 400/-32020."""
    seen: list[dict[str, str]] = []
    runner, url = await modern_upstream(seen)
    arguments = {"region": "Hello", "options": {"shard": 7}}
    body = modern_request(5, "tools/call", {"name": "query", "arguments": arguments})
    base = modern_headers("tools/call", "query")
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                # The client learns the tool's header parameters from the list.
                listing = modern_request(4, "tools/list")
                listed = await post(http, gw.url("/mcp"), listing, modern_headers("tools/list"))
                assert listed.status == 200, listed.text
                accepted = [
                    {"Mcp-Param-Region": "=?base64?SGVsbG8=?=", "Mcp-Param-Shard": "7"},
                    {"mcp-param-region": "Hello", "MCP-PARAM-SHARD": "7.0"},
                ]
                for extra in accepted:
                    reply = await post(http, gw.url("/mcp"), body, {**base, **extra})
                    assert reply.status == 200, (extra, reply.text)
                    assert "result" in reply.message, reply.text
                refused = [
                    {"Mcp-Param-Region": "=?base64?SGVsbG8?=", "Mcp-Param-Shard": "7"},
                    {"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?=", "Mcp-Param-Shard": "7"},
                    {"Mcp-Param-Shard": "7"},  # omitted while arguments.region is set
                    {"Mcp-Param-Region": "Hello", "Mcp-Param-Shard": "8"},
                    {"Mcp-Param-Region": "World", "Mcp-Param-Shard": "7"},
                ]
                calls_before = len(seen)
                for extra in refused:
                    reply = await post(http, gw.url("/mcp"), body, {**base, **extra})
                    assert reply.status == 400, (extra, reply.text)
                    assert reply.message["error"]["code"] == -32020, reply.text
                    assert reply.message["id"] == 5
                assert len(seen) == calls_before  # none reached the upstream
                # A header for an argument the body leaves out does not match it either.
                bare = modern_request(6, "tools/call", {"name": "query", "arguments": {}})
                reply = await post(http, gw.url("/mcp"), bare, {**base, "Mcp-Param-Shard": "7"})
                assert reply.status == 400 and reply.message["error"]["code"] == -32020
                reply = await post(http, gw.url("/mcp"), bare, base)
                assert reply.status == 200, reply.text
    finally:
        await runner.cleanup()


async def test_a_wrong_header_is_refused_from_a_client_that_never_listed(tmp_path: Path) -> None:
    """A stateless client may call a tool it learned earlier without listing it
    through the gateway: its headers are still checked, against the list the
    gateway reads with the caller's credentials, and a wrong one never reaches
    the upstream (the gateway mints the upstream's headers from the body, so the
    upstream could not see it)."""
    seen: list[dict[str, str]] = []
    runner, url = await modern_upstream(seen)
    body = modern_request(7, "tools/call", {"name": "query", "arguments": {"region": "a"}})
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                headers = {**modern_headers("tools/call", "query"), "Mcp-Param-Region": "b"}
                reply = await post(http, gw.url("/mcp"), body, headers)
                assert reply.status == 400, reply.text
                assert reply.message["error"]["code"] == -32020, reply.text
                assert seen == []
                headers["Mcp-Param-Region"] = "a"
                reply = await post(http, gw.url("/mcp"), body, headers)
                assert reply.status == 200, reply.text
                assert seen[-1]["Mcp-Param-Region"] == "a"
    finally:
        await runner.cleanup()


def _query_tool(header: str) -> dict[str, Any]:
    region = {"type": "string", "x-mcp-header": header}
    return {"name": "query", "inputSchema": {"type": "object", "properties": {"region": region}}}


async def test_each_principal_calls_tools_as_its_own_list_shows_them(tmp_path: Path) -> None:
    """An upstream may list a tool differently to different callers: a call is shaped
    by the list its own caller's credentials read, never by another caller's."""
    lists = {"Bearer alice": [_query_tool("Region")], "Bearer bob": [_query_tool("Zone")]}
    seen: list[dict[str, str]] = []

    async def handle(request_: web.Request) -> web.Response:
        body = await request_.json()
        method, id_ = body.get("method"), body.get("id")
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": lists[request_.headers["Authorization"]]}
        else:
            seen.append({k: v for k, v in request_.headers.items() if k.startswith("Mcp-Param")})
            result = {"content": [{"type": "text", "text": "ok"}]}
        result.update(resultType="complete", ttlMs=0, cacheScope="private")
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})

    runner, url = await serve(handle)
    arguments = {"region": "north"}
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                # Alice lists the tools first; Bob calls at once (his client knew the
                # tool already), so the gateway reads the list with Bob's credentials.
                for who in ("alice", "bob"):
                    auth = {"Authorization": f"Bearer {who}"}
                    if who == "alice":
                        listing = modern_request(1, "tools/list")
                        headers = {**modern_headers("tools/list"), **auth}
                        listed = await post(http, gw.url("/mcp"), listing, headers)
                        assert listed.status == 200, listed.text
                    body = modern_request(
                        2, "tools/call", {"name": "query", "arguments": arguments}
                    )
                    mirrored = "Region" if who == "alice" else "Zone"
                    headers = {**modern_headers("tools/call", "query"), **auth}
                    headers[f"Mcp-Param-{mirrored}"] = "north"
                    reply = await post(http, gw.url("/mcp"), body, headers)
                    assert reply.status == 200, (who, reply.text)
                    assert seen[-1] == {f"Mcp-Param-{mirrored}": "north"}, who
    finally:
        await runner.cleanup()


async def handshake_upstream(
    seen: list[dict[str, str]], tools: list[dict[str, Any]] = TOOLS[:1]
) -> tuple[web.AppRunner, str]:
    """A 2025-11-25 server (sessions, no era of mirrored headers) listing `query`: it
    never checks `Mcp-Param-*` itself, so only the gateway can."""
    sessions: set[str] = set()

    async def handle(request_: web.Request) -> web.Response:
        if request_.method != "POST":
            return web.Response(status=200 if request_.method == "DELETE" else 405)
        body = await request_.json()
        method, id_ = body.get("method"), body.get("id")
        session = request_.headers.get("Mcp-Session-Id", "")
        if method == "initialize":
            session = f"s{len(sessions)}"
            sessions.add(session)
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "handshake-query", "version": "0"},
            }
            reply = {"jsonrpc": "2.0", "id": id_, "result": result}
            return web.json_response(reply, headers={"Mcp-Session-Id": session})
        if session not in sessions:
            error = {"code": -32600, "message": "Bad Request: No valid session ID provided"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=400)
        if id_ is None:
            return web.Response(status=202)
        if method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            seen.append({k: v for k, v in request_.headers.items() if k.startswith("Mcp-")})
            result = {"content": [{"type": "text", "text": "ok"}]}
        else:
            result = {}
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})

    app = web.Application()
    app.router.add_route("*", "/mcp", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    return runner, f"http://127.0.0.1:{port}/mcp"


async def test_headers_toward_a_handshake_era_upstream_are_checked_listed_or_not(
    tmp_path: Path,
) -> None:
    """In front of a handshake-era upstream a 2026-07-28 client's `Mcp-Param-*`
    headers are checked too, whether it listed the tools through the gateway first
    (Bob) or never did (Alice: the gateway reads the list on a session of its own)."""
    seen: list[dict[str, str]] = []
    runner, url = await handshake_upstream(seen)
    body = modern_request(7, "tools/call", {"name": "query", "arguments": {"region": "a"}})
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                for who in ("alice", "bob"):
                    auth = {"Authorization": f"Bearer {who}"}
                    if who == "bob":
                        listing = modern_request(1, "tools/list")
                        headers = {**modern_headers("tools/list"), **auth}
                        listed = await post(http, gw.url("/mcp"), listing, headers)
                        assert listed.status == 200, listed.text
                    headers = {**modern_headers("tools/call", "query"), **auth}
                    calls_before = len(seen)
                    for wrong in ({"Mcp-Param-Region": "b"}, {}):
                        reply = await post(http, gw.url("/mcp"), body, {**headers, **wrong})
                        assert reply.status == 400, (who, wrong, reply.text)
                        assert reply.message["error"]["code"] == -32020, (who, reply.text)
                        assert reply.message["id"] == 7
                    assert len(seen) == calls_before, who  # none reached the upstream
                    headers["Mcp-Param-Region"] = "a"
                    reply = await post(http, gw.url("/mcp"), body, headers)
                    assert reply.status == 200, (who, reply.text)
                    assert text_of(reply.result) == "ok"
                    assert len(seen) == calls_before + 1, who
            # Gone before the gateway stops: its sessions' DELETEs need no answer from
            # this loop, which waits for the gateway's exit without running.
            await runner.cleanup()
    finally:
        await runner.cleanup()


def _many_tools(count: int) -> list[dict[str, Any]]:
    """``count`` tools, the first (#0, `first`) and the last (#count - 1, `query`) with
    a header parameter each."""
    plain = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [
        {"name": f"tool_{n:05d}", "description": f"Tool {n}", "inputSchema": plain}
        for n in range(1, count - 1)
    ]
    return [{**_query_tool("Region"), "name": "first"}, *tools, _query_tool("Region")]


@pytest.mark.parametrize("era", ["stateless", "handshake"])
async def test_every_one_of_10000_tools_has_its_headers_checked(era: str, tmp_path: Path) -> None:
    """A list of 10,000 tools is known whole: the first and the last tool's
    `Mcp-Param-*` header is checked, whether the client listed the tools first (Bob)
    or never did (Alice)."""
    seen: list[dict[str, str]] = []
    upstream = modern_upstream if era == "stateless" else handshake_upstream
    runner, url = await upstream(seen, _many_tools(10_000))
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                for who in ("alice", "bob"):
                    auth = {"Authorization": f"Bearer {who}"}
                    if who == "bob":
                        listing = modern_request(1, "tools/list")
                        headers = {**modern_headers("tools/list"), **auth}
                        listed = await post(http, gw.url("/mcp"), listing, headers)
                        assert listed.status == 200, listed.text
                        assert len(listed.result["tools"]) == 10_000
                    for tool in ("query", "first"):
                        await _checked(http, gw.url("/mcp"), tool, auth, seen)
            await runner.cleanup()
    finally:
        await runner.cleanup()


async def _checked(
    http: aiohttp.ClientSession,
    url: str,
    tool: str,
    auth: dict[str, str],
    seen: list[dict[str, str]],
) -> None:
    """A wrong or missing header is refused before the upstream; the right one passes."""
    body = modern_request(7, "tools/call", {"name": tool, "arguments": {"region": "a"}})
    headers = {**modern_headers("tools/call", tool), **auth}
    calls_before = len(seen)
    for wrong in ({"Mcp-Param-Region": "b"}, {}):
        reply = await post(http, url, body, {**headers, **wrong})
        assert reply.status == 400, (tool, auth, wrong, reply.text)
        assert reply.message["error"]["code"] == -32020, (tool, reply.text)
    assert len(seen) == calls_before, tool  # none reached the upstream
    headers["Mcp-Param-Region"] = "a"
    reply = await post(http, url, body, headers)
    assert reply.status == 200, (tool, reply.text)
    assert len(seen) == calls_before + 1, tool


class CountingDemo(DemoServer):
    """The demo server, telling a waiting test of each session ended (DELETE)."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = asyncio.Condition()

    async def delete(self, request: web.Request) -> web.Response:
        answer = await super().delete(request)
        async with self.ended:
            self.ended.notify_all()
        return answer

    async def until(self, sessions: int) -> None:
        """Until the server holds ``sessions`` sessions (bounded)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10), self.ended:
                await self.ended.wait_for(lambda: len(self.sessions) == sessions)
        assert len(self.sessions) == sessions, list(self.sessions)


async def test_a_stateless_principal_keeps_one_upstream_session(tmp_path: Path) -> None:
    """In front of a handshake-era server (the demo server, counting its sessions) a
    2026-07-28 principal's first call reads the tool list on a session of the
    gateway's own, then calls on its pool: once the list is read, that session is
    ended, and the server keeps the pool alone."""
    demo = CountingDemo()
    runner = web.AppRunner(demo.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    try:
        with gateway(f"/mcp=http://127.0.0.1:{port}/mcp", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                for n, who in enumerate(("alice", "alice", "bob")):
                    headers = {
                        **modern_headers("tools/call", "echo"),
                        "Authorization": f"Bearer {who}",
                    }
                    arguments = {"text": who}
                    body = modern_request(n, "tools/call", {"name": "echo", "arguments": arguments})
                    reply = await post(http, gw.url("/mcp"), body, headers)
                    assert reply.status == 200, reply.text
                    assert who in text_of(reply.result)
                    await demo.until(1 if who == "alice" else 2)  # a pool each
            await runner.cleanup()
    finally:
        await runner.cleanup()
