"""Logging is per request for stateless clients and per session on handshake-era
upstreams: the gateway sets the upstream session to the most verbose level a
call asked for, and never quieter."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.e2e.fake_client import modern_headers, modern_meta, post, text_of
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import gateway


async def _call(http: aiohttp.ClientSession, url: str, level: str | None) -> str:
    meta = modern_meta()
    if level is not None:
        meta["io.modelcontextprotocol/logLevel"] = level
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta},
    }
    reply = await post(http, url, body, modern_headers("tools/call", "echo"))
    return text_of(reply.result)


async def test_the_upstream_level_follows_the_most_verbose_request(tmp_path: Path) -> None:
    upstream = FakeUpstream("logs")
    url = await upstream.start()
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                assert await _call(http, gw.url("/mcp"), None) == "echo: hi"
                assert upstream.levels == []  # nobody asked for logs
                assert await _call(http, gw.url("/mcp"), "warning") == "echo: hi"
                assert await _call(http, gw.url("/mcp"), "error") == "echo: hi"
                assert await _call(http, gw.url("/mcp"), "debug") == "echo: hi"
                assert upstream.levels == ["warning", "debug"]  # never quieter again
            await upstream.stop()
    finally:
        await upstream.stop()
