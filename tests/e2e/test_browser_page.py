"""A browser opening the gateway (issue 39): a GET asking for HTML with no MCP header,
on a route or on `/`, gets a short page in bounded time, never an SSE stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import gateway

# What a browser sends when its user opens a URL.
BROWSER = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "User-Agent": "Mozilla/5.0",
}


async def _get(http: aiohttp.ClientSession, url: str) -> tuple[int, str, str]:
    async def run() -> tuple[int, str, str]:
        async with http.get(url, headers=BROWSER) as response:
            return response.status, response.content_type, await response.text()

    return await asyncio.wait_for(run(), 10)


async def test_a_browser_gets_a_page(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    async with FakeUpstream("ok") as fake:
        with gateway(f"/tools={fake.url}", f"/<b>x={fake.url}", tmp_path=tmp_path) as gw:
            for path in ("/tools", "/"):
                status, content_type, text = await _get(http, gw.url(path))
                assert (status, content_type) == (200, "text/html"), text
                assert "MCP gateway" in text and f"{gw.base}/tools" in text
            _, _, front = await _get(http, gw.url("/"))
            assert "/&lt;b&gt;x" in front and "<b>x" not in front  # escaped
            # An MCP client's GET is still a stream (here: the legacy SSE transport).
            sse = {"Accept": "text/event-stream"}
            async with http.get(gw.url("/tools"), headers=sse) as response:
                assert response.content_type == "text/event-stream"
