"""The benchmark's upstreams, each run as its own process, counting the TCP connections
they accept.

    python -m bench.upstreams legacy PORT STATS_PORT   # the gateway's demo server (2025-11-25)
    python -m bench.upstreams modern PORT STATS_PORT   # a tiny 2026-07-28 echo server
    python -m bench.upstreams modern PORT STATS_PORT --reuse-port  # one of several on PORT

Both serve MCP at ``/mcp`` on 127.0.0.1:PORT and print their URL once listening.
On STATS_PORT a raw TCP listener (not HTTP, so asking does not count as a
connection) writes ``{"connections": N, "requests": M}`` and closes: N is
the number of connections aiohttp accepted so far, M the HTTP requests served.
That is how the benchmark counts the connections a proxy opens upstream.

The modern server is plain aiohttp and orjson, no gateway code: it answers
``server/discover``, ``tools/list`` and ``tools/call echo`` in the 2026-07-28
shape (``resultType``, per-request ``_meta``, no session), and refuses a request
without ``MCP-Protocol-Version: 2026-07-28`` the way a modern server refuses a
legacy one (400 with -32022 UnsupportedProtocolVersion).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web, web_protocol

MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
ECHO_TOOL = {
    "name": "echo",
    "description": "Echo text back",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}

_counts = {"connections": 0, "requests": 0}


def _count_connections() -> None:
    """Count every connection aiohttp's server accepts (this process only)."""
    original = web_protocol.RequestHandler.connection_made

    def connection_made(self: Any, transport: Any) -> None:
        _counts["connections"] += 1
        original(self, transport)

    web_protocol.RequestHandler.connection_made = connection_made  # type: ignore[method-assign]


@web.middleware
async def _count_requests(request: web.Request, handler: Any) -> web.StreamResponse:
    _counts["requests"] += 1
    response: web.StreamResponse = await handler(request)
    return response


def _json(message: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(message), status=status, content_type="application/json")


def _error(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": error}


async def _modern(request: web.Request) -> web.Response:
    try:
        message = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return _json(_error(None, -32700, "Parse error"), 400)
    if not isinstance(message, dict):
        return _json(_error(None, -32600, "Invalid Request"), 400)
    id_ = message.get("id")
    if request.headers.get("MCP-Protocol-Version") != MODERN:
        data = {"supported": [MODERN], "requested": request.headers.get("MCP-Protocol-Version")}
        return _json(_error(id_, -32022, "Unsupported protocol version", data), 400)
    if id_ is None:
        return web.Response(status=202)  # a notification
    method = message.get("method")
    params = message.get("params") or {}
    result: dict[str, Any]
    if method == "server/discover":
        result = {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}},
            "_meta": {SERVER_INFO: {"name": "bench-modern-echo", "version": "0"}},
        }
    elif method == "tools/list":
        result = {"tools": [ECHO_TOOL]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return _json(_error(id_, -32601, f"Method not found: {method}"))
    return _json({"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", **result}})


def _app(kind: str) -> web.Application:
    if kind == "legacy":
        from gateway.demo import DemoServer

        demo = DemoServer()
        app = demo.app()
        app.middlewares.append(_count_requests)
        _live["sessions"] = lambda: len(demo.sessions)  # upstream sessions open now
        return app
    app = web.Application(middlewares=[_count_requests])
    app.router.add_post("/mcp", _modern)
    return app


_live: dict[str, Callable[[], int]] = {}


async def _stats(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(orjson.dumps({**_counts, **{k: f() for k, f in _live.items()}}))
    await writer.drain()
    writer.close()


async def main(kind: str, port: int, stats_port: int, reuse_port: bool = False) -> None:
    _count_connections()
    runner = web.AppRunner(_app(kind), access_log=None)
    await runner.setup()
    # With reuse_port, several processes listen on PORT and the kernel spreads the
    # connections over them (bench.scale: the upstream must not be what limits).
    await web.TCPSite(runner, "127.0.0.1", port, reuse_port=reuse_port or None).start()
    stats = await asyncio.start_server(_stats, "127.0.0.1", stats_port)
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        stats.close()
        await runner.cleanup()


if __name__ == "__main__":
    args = sys.argv[1:]
    reuse = "--reuse-port" in args
    args = [a for a in args if a != "--reuse-port"]
    if len(args) != 3 or args[0] not in ("legacy", "modern"):
        sys.exit("usage: python -m bench.upstreams legacy|modern PORT STATS_PORT [--reuse-port]")
    asyncio.run(main(args[0], int(args[1]), int(args[2]), reuse))
