"""The route option `max_message`: the largest message an upstream may send.

Real gateway processes in front of a stateless-era HTTP upstream answering in
JSON or on an SSE stream, and a handshake-era stdio child: an answer over the
bound fails its call at once with an error naming the bound (never a wait for
the route's timeout), the calls beside it are untouched, and the same answer
under a raised bound goes through whole.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.e2e.fake_client import (
    call_tool_legacy,
    call_tool_modern,
    open_session,
    text_of,
)
from tests.e2e.gateway_proc import gateway
from tests.e2e.test_param_headers import serve

MODERN = "2026-07-28"
BIG = 200_000  # bytes of text in the large answer
SMALL_BOUND = 64 * 1024
# A bound-sized answer must come back well before the route's timeout: the call is
# failed when the oversized message arrives, not when its deadline passes.
WITHIN = 10.0


async def blob_upstream() -> tuple[web.AppRunner, str]:
    """`blob` answers a text of `bytes` bytes, in JSON or (with `sse`) on an SSE stream."""

    async def handle(request_: web.Request) -> web.StreamResponse:
        body = await request_.json()
        method, id_ = body.get("method"), body.get("id")
        params = body.get("params") or {}
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": [{"name": "blob", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            text = "x" * int(arguments.get("bytes", 0))
            result = {"content": [{"type": "text", "text": text}]}
        else:
            error = {"code": -32601, "message": "Method not found"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=404)
        result["resultType"] = "complete"
        answer = orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": result})
        if method == "tools/call" and (params.get("arguments") or {}).get("sse"):
            stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await stream.prepare(request_)
            await stream.write(b"event: message\ndata: " + answer + b"\n\n")
            await stream.write_eof()
            return stream
        return web.Response(body=answer, content_type="application/json")

    return await serve(handle)


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_an_http_answer_over_the_bound_fails_its_call_at_once(
    tmp_path: Path, sse: bool
) -> None:
    runner, url = await blob_upstream()
    try:
        routes = (f"/small={url},max_message={SMALL_BOUND}", f"/large={url},max_message=1048576")
        with gateway(*routes, tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                big = {"bytes": BIG, "sse": sse}
                refused = await call_tool_modern(http, gw.url("/small"), "blob", big, within=WITHIN)
                error = refused.message.get("error") or {}
                assert error, refused.text
                assert str(SMALL_BOUND) in error["message"], error
                # The route still answers what fits, and the same answer under a
                # larger bound goes through whole.
                fits = {"bytes": 1000, "sse": sse}
                small = await call_tool_modern(http, gw.url("/small"), "blob", fits)
                assert text_of(small.result) == "x" * 1000
                whole = await call_tool_modern(http, gw.url("/large"), "blob", big, within=WITHIN)
                assert text_of(whole.result) == "x" * BIG
    finally:
        await runner.cleanup()


async def test_a_stdio_line_over_the_bound_fails_its_call_at_once(tmp_path: Path) -> None:
    command = shlex.join([sys.executable, "-m", "bench.stdio_echo"])
    routes = (
        f"/small=stdio:{command},max_message={SMALL_BOUND},timeout=60",
        f"/large=stdio:{command},max_message=1048576,timeout=60",
    )
    expected = ("dropping a stdout line over the size limit",)
    with gateway(*routes, tmp_path=tmp_path, expected_errors=expected) as gw:
        async with aiohttp.ClientSession() as http:
            session = await open_session(http, gw.url("/small"))
            text = "y" * BIG
            refused = await call_tool_legacy(
                http, gw.url("/small"), session, "echo", {"text": text}, within=WITHIN
            )
            error = refused.message.get("error") or {}
            assert error, refused.text
            assert str(SMALL_BOUND) in error["message"], error
            # The child is still the session's, and answers what fits.
            fits = await call_tool_legacy(
                http, gw.url("/small"), session, "echo", {"text": "hello"}, id_=2
            )
            assert "hello" in text_of(fits.result)
            other = await open_session(http, gw.url("/large"))
            whole = await call_tool_legacy(
                http, gw.url("/large"), other, "echo", {"text": text}, within=WITHIN
            )
            assert text in text_of(whole.result)
