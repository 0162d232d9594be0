"""The pass-through lane (issue 50) end to end: 2026-07-28 and 2025-11-25 clients
before a 2026-07-28 upstream, through a gateway with the lane on and one with it off.
Each answer the client hears is the same both ways, whatever the upstream answers (a
plain result, an error with its internals, a question, notifications first, a
result the projection reworks); the lane is seen in the metrics and the log; each
call reaches the upstream once; and a route with a policy never takes it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.fake_client import (
    Reply,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.e2e.test_param_headers import serve

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
# Tools whose upstream fails one way or another after the call was sent.
FAULTS = ("hang", "drop", "broken", "garbage")
# The call log's warnings for the tools that fail.
FAILED = tuple(f'"tool": "{name}"' for name in ("fail", *FAULTS))
TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in ("echo", "named", "fail", "ask", "progress", "vendor", "slow", *FAULTS)
]


def _result(name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """What each tool answers (None: an SSE answer or an error, see ``handle``)."""
    text = str(arguments.get("text", ""))
    if name == "echo":
        return {"content": [{"type": "text", "text": text}]}
    if name == "named":
        meta = {SERVER_INFO: {"name": "upstream-itself", "version": "9"}}
        return {
            "content": [{"type": "text", "text": text}],
            "resultType": "complete",
            "_meta": meta,
        }
    if name == "ask":
        question = {
            "method": "elicitation/create",
            "params": {"message": "who?", "requestedSchema": {"type": "object", "properties": {}}},
        }
        return {
            "resultType": "input_required",
            "inputRequests": {"q": question},
            "requestState": "up-state",
        }
    if name == "vendor":
        return {"content": [{"type": "text", "text": text}], "vendorField": {"x": 1}}
    return None


class Upstream:
    """A 2026-07-28 server counting each tool's calls."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        method, id_ = body.get("method"), body.get("id")
        params = body.get("params") or {}
        if method == "server/discover":
            result: dict[str, Any] | None = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name = params.get("name")
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == "fail":
                error = {"code": -32603, "message": "Traceback: /srv/internal/db.py line 7"}
                return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error})
            if name == "progress":
                return await self._stream(request, id_, params)
            if name in FAULTS:
                return await self._fault(request, name)
            if name == "slow":
                await asyncio.sleep(0.3)
            result = _result(name, params.get("arguments") or {})
            if result is None:
                result = {"content": [{"type": "text", "text": "slow"}]}
        else:
            error = {"code": -32601, "message": "Method not found"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error})
        result = {"resultType": "complete", **result}
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})

    async def _fault(self, request: web.Request, name: str) -> web.Response:
        """No answer in time, the connection dropped, a 500, or JSON that is no answer."""
        if name == "hang":
            await asyncio.sleep(5)
        elif name == "drop":
            assert request.transport is not None
            request.transport.close()
        elif name == "broken":
            return web.Response(status=500, text="Internal Server Error at /srv/app.py")
        return web.json_response({"not": "json-rpc"})

    async def _stream(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        """A progress notification (with the token the request carried), then the result."""
        token = (params.get("_meta") or {}).get("progressToken")
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1},
        }
        done = {
            "jsonrpc": "2.0",
            "id": id_,
            "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]},
        }
        for message in (note, done):
            await stream.write(f"data: {json.dumps(message)}\n\n".encode())
        await stream.write_eof()
        return stream


@contextlib.asynccontextmanager
async def _serving() -> AsyncIterator[tuple[Upstream, str]]:
    """The upstream below, serving on a free loopback port until the test ends."""
    upstream = Upstream()
    runner, url = await serve(upstream.handle)
    try:
        yield upstream, url
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def _both(route: str, tmp_path: Path) -> Iterator[tuple[RunningGateway, RunningGateway]]:
    """Two gateways on ``route``: the lane on, and off (``--no-pass-through``)."""
    off = ("--no-pass-through",)
    with (
        gateway(route, tmp_path=tmp_path, expected_errors=FAILED) as on,
        gateway(route, extra=off, tmp_path=tmp_path, expected_errors=FAILED) as full,
    ):
        yield on, full


def _call(id_: int, name: str, token: int | None = None) -> dict[str, Any]:
    message = modern_request(id_, "tools/call", {"name": name, "arguments": {"text": f"t{id_}"}})
    if token is not None:
        message["params"]["_meta"]["progressToken"] = token
    return message


async def _ask(
    http: aiohttp.ClientSession, gw: RunningGateway, name: str, id_: int, token: int | None = None
) -> Reply:
    return await post(
        http, gw.url("/mcp"), _call(id_, name, token), modern_headers("tools/call", name)
    )


def _heard(reply: Reply) -> tuple[int, list[Any]]:
    """What a client hears: the status and every JSON-RPC message, in order."""
    return reply.status, reply.messages


def _passed(metrics: str) -> float:
    found = re.search(r'^gateway_pass_through_total\{route="/mcp"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


async def test_the_lane_answers_as_the_full_path_does(tmp_path: Path) -> None:
    async with _serving() as (upstream, url):
        with _both(f"/mcp={url}", tmp_path) as (on, off):
            async with aiohttp.ClientSession() as http:
                for gw in (on, off):  # the lists read: every tool known to both
                    listing = modern_request(1, "tools/list")
                    await post(http, gw.url("/mcp"), listing, modern_headers("tools/list"))
                for name in ("echo", "named", "fail", "ask", "progress", "vendor"):
                    token = 77 if name == "progress" else None
                    heard_on = _heard(await _ask(http, on, name, 5, token))
                    heard_off = _heard(await _ask(http, off, name, 5, token))
                    assert heard_on == heard_off, name
                    assert upstream.calls[name] == 2, name  # once through each gateway
                async with http.get(on.url("/metrics")) as response:
                    on_metrics = await response.text()
                async with http.get(off.url("/metrics")) as response:
                    off_metrics = await response.text()
            # echo, named (plain results) took the lane; the rest read on in the full path.
            assert _passed(on_metrics) == 2
            assert _passed(off_metrics) == 0
            assert '"pass_through": true' in on.log() or "pass_through=True" in on.log()


async def test_a_route_with_a_policy_takes_the_full_path(tmp_path: Path) -> None:
    async with _serving() as (_upstream, url):
        with gateway(f"/mcp={url},rate=1000/s", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                for id_ in range(3):
                    reply = await _ask(http, gw, "echo", id_)
                    assert reply.result["content"][0]["text"] == f"t{id_}"
                async with http.get(gw.url("/metrics")) as response:
                    assert _passed(await response.text()) == 0


async def test_calls_in_flight_at_once_each_get_their_own_answer(tmp_path: Path) -> None:
    """Concurrent calls through the lane, slow ones among them: no answer crosses."""
    async with _serving() as (_upstream, url):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                await _ask(http, gw, "echo", 0)  # the tools learnt
                replies = await asyncio.gather(
                    *(_ask(http, gw, "slow" if i % 4 == 0 else "echo", i) for i in range(1, 41))
                )
                for i, reply in enumerate(replies, start=1):
                    assert reply.message["id"] == i
                    text = reply.result["content"][0]["text"]
                    assert text == ("slow" if i % 4 == 0 else f"t{i}")
                async with http.get(gw.url("/metrics")) as response:
                    assert _passed(await response.text()) == 40


def _same(reply: Reply) -> tuple[int, str]:
    """What a client hears, but the request id a gateway names in its own errors (each
    gateway numbers its requests its own way)."""
    return reply.status, re.sub(r"request id [0-9a-f]+", "request id N", json.dumps(reply.messages))


async def test_what_the_client_is_told_when_the_upstream_fails_after_the_lane_sent(
    tmp_path: Path,
) -> None:
    """A call the lane sent whose answer never comes, is lost, or cannot be used: the
    client is told what the full path tells it, and the call reached the upstream once."""
    async with _serving() as (upstream, url):
        with _both(f"/mcp={url},timeout=1", tmp_path) as (on, off):
            async with aiohttp.ClientSession() as http:
                for gw in (on, off):
                    listing = modern_request(1, "tools/list")
                    await post(http, gw.url("/mcp"), listing, modern_headers("tools/list"))
                for name in FAULTS:
                    heard_on = await _ask(http, on, name, 9)
                    heard_off = await _ask(http, off, name, 9)
                    assert _same(heard_on) == _same(heard_off), name
                    assert "error" in heard_on.message, (name, heard_on.message)
                    assert upstream.calls[name] == 2, name
                    assert "/srv/app.py" not in heard_on.text
                async with http.get(on.url("/metrics")) as response:
                    assert _passed(await response.text()) == 0


async def _ask_in_session(
    http: aiohttp.ClientSession, gw: RunningGateway, session_id: str, name: str, id_: int
) -> Reply:
    """A 2025-11-25 client's call in its session (a progress token for ``progress``)."""
    params: dict[str, Any] = {"name": name, "arguments": {"text": f"t{id_}"}}
    if name == "progress":
        params["_meta"] = {"progressToken": 77}
    message = request(id_, "tools/call", params)
    return await post(http, gw.url("/mcp"), message, session_headers(session_id, HANDSHAKE))


async def test_a_handshake_era_client_is_answered_as_the_full_path_answers_it(
    tmp_path: Path,
) -> None:
    """A 2025-11-25 client's calls to the stateless upstream: the lane sends them in the
    upstream's revision and the adapters translate a plain result, as the full path
    does; every other answer, faults included, is read on by the full path."""
    async with _serving() as (upstream, url):
        with _both(f"/mcp={url},timeout=1", tmp_path) as (on, off):
            async with aiohttp.ClientSession() as http:
                session_on = await open_session(http, on.url("/mcp"), HANDSHAKE)
                session_off = await open_session(http, off.url("/mcp"), HANDSHAKE)
                await _ask_in_session(http, on, session_on, "echo", 1)  # the tools learnt
                await _ask_in_session(http, off, session_off, "echo", 1)
                for name in ("echo", "named", "fail", "ask", "progress", "vendor", *FAULTS):
                    before = upstream.calls.get(name, 0)
                    heard_on = await _ask_in_session(http, on, session_on, name, 5)
                    heard_off = await _ask_in_session(http, off, session_off, name, 5)
                    assert _same(heard_on) == _same(heard_off), name
                    assert upstream.calls[name] == before + 2, name  # once through each
                    assert "/srv/app.py" not in heard_on.text, name  # a 500 body is no answer
                async with http.get(on.url("/metrics")) as response:
                    on_metrics = await response.text()
                async with http.get(off.url("/metrics")) as response:
                    off_metrics = await response.text()
            # echo, named and vendor: results the adapters translate (the first echo
            # learnt the tools on the full path); the rest read on in the full path.
            assert _passed(on_metrics) == 3
            assert _passed(off_metrics) == 0
