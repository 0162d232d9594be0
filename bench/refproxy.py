"""The reference proxy: plain aiohttp forwarding bytes, nothing parsed.

    python -m bench.refproxy PORT TARGET_URL

Every request to 127.0.0.1:PORT (any path, any method) goes to TARGET_URL with
its headers (hop-by-hop ones dropped) and its body streamed through; the
answer's status, headers and body are streamed back, chunk by chunk as they
arrive (so an SSE answer flows too).  One client session with an unbounded
keep-alive pool, aiohttp's defaults otherwise (like the gateway's): what the
gateway is measured against is the cost of being an HTTP hop at all, in the
same language, on the same library.
"""

from __future__ import annotations

import asyncio
import sys

import aiohttp
from aiohttp import web

# RFC 9110 section 7.6.1, plus the framing headers aiohttp sets itself.
HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


class Proxy:
    def __init__(self, target: str) -> None:
        self.target = target
        self.http: aiohttp.ClientSession | None = None

    async def start(self, app: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0)  # aiohttp's default keep-alive, as the gateway
        self.http = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
        )

    async def stop(self, app: web.Application) -> None:
        if self.http is not None:
            await self.http.close()

    async def forward(self, request: web.Request) -> web.StreamResponse:
        assert self.http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        length = request.content_length
        if length is not None:
            headers["Content-Length"] = str(length)
        async with self.http.request(
            request.method,
            self.target,
            headers=headers,
            data=request.content if request.body_exists else None,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                reason=upstream.reason,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP},
            )
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


async def main(port: int, target: str) -> None:
    proxy = Proxy(target)
    app = web.Application()
    app.on_startup.append(proxy.start)
    app.on_cleanup.append(proxy.stop)
    app.router.add_route("*", "/{tail:.*}", proxy.forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.refproxy PORT TARGET_URL")
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
