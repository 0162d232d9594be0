"""The reference proxy: plain aiohttp forwarding bytes, nothing parsed.

    python -m bench.refproxy PORT TARGET_URL [--route PATH=URL ...] [--reuse-port] [--uvloop]

Every request to 127.0.0.1:PORT (any path, any method) goes to TARGET_URL with
its headers (hop-by-hop ones dropped) and its body streamed through; the
answer's status, headers and body are streamed back, chunk by chunk as they
arrive (so an SSE answer flows too).  One client session with an unbounded
keep-alive pool, aiohttp's defaults otherwise (like the gateway's): what the
gateway is measured against is the cost of being an HTTP hop at all, in the
same language, on the same library.

``--route PATH=URL`` sends requests to PATH to URL instead (bench.scale: one
upstream per route); ``--reuse-port`` lets several proxies share PORT, as
`gateway serve --workers N` does; ``--uvloop`` runs it on uvloop.
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
    def __init__(self, target: str, routes: dict[str, str] | None = None) -> None:
        self.target = target
        self.routes = routes or {}
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
            self.routes.get(request.path, self.target),
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


async def main(
    port: int, target: str, routes: dict[str, str] | None = None, reuse_port: bool = False
) -> None:
    proxy = Proxy(target, routes)
    app = web.Application()
    app.on_startup.append(proxy.start)
    app.on_cleanup.append(proxy.stop)
    app.router.add_route("*", "/{tail:.*}", proxy.forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, reuse_port=reuse_port or None).start()
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _cli(argv: list[str]) -> None:
    flags = {"--reuse-port", "--uvloop"}
    routes: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--route":
            path, _, url = next(args, "").partition("=")
            routes[path] = url
        elif arg not in flags:
            rest.append(arg)
    if len(rest) != 2:
        sys.exit(
            "usage: python -m bench.refproxy PORT TARGET_URL [--route PATH=URL ...] "
            "[--reuse-port] [--uvloop]"
        )
    run = main(int(rest[0]), rest[1], routes, "--reuse-port" in argv)
    if "--uvloop" in argv:
        import uvloop

        uvloop.run(run)
    else:
        asyncio.run(run)


if __name__ == "__main__":
    _cli(sys.argv[1:])
