"""A 2026-07-28 MCP server for `bench.faults` whose failures the bench switches on.

    python -m bench.faultserver PORT RUNS_FILE

Plain aiohttp, no gateway code.  Tools: ``read_it`` (readOnlyHint), ``same_again``
(idempotentHint), ``plain`` (no hint); a resource ``file:///doc``.  Every tool run is
appended to RUNS_FILE (``<op>\\n``, flushed before the answer), so the bench can count
what ran twice even across a SIGKILL.  ``POST /control`` with a body ``ok``, ``500``,
``reset``, ``slow`` or ``hang`` sets how every later call goes: answered; HTTP 500
after the tool ran; the connection reset after it ran; answered after 2 s; no answer
until the mode changes (a ``ping`` is still answered at once, as a server whose tools
hang answers its pings).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
from typing import Any

import orjson
from aiohttp import web

MODERN = "2026-07-28"
TOOLS = [
    {"name": "read_it", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {
        "name": "same_again",
        "inputSchema": {"type": "object"},
        "annotations": {"idempotentHint": True},
    },
    {"name": "plain", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}},
]
SLOW = 2.0


class FaultServer:
    def __init__(self, runs_file: str) -> None:
        self.mode = "ok"
        self.moved = asyncio.Event()
        self.runs = open(runs_file, "a", buffering=1)  # noqa: SIM115 (lives with the process)

    async def control(self, request: web.Request) -> web.Response:
        self.mode = (await request.text()).strip()
        self.moved.set()  # a hanging call looks at the mode again
        self.moved = asyncio.Event()
        return web.Response(text=self.mode)

    async def mcp(self, request: web.Request) -> web.StreamResponse:
        message = orjson.loads(await request.read())
        id_, method = message.get("id"), message.get("method")
        params: dict[str, Any] = message.get("params") or {}
        if id_ is None:
            return web.Response(status=202)
        if method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}, "resources": {}},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS, "ttlMs": 0, "cacheScope": "private"}
        elif method == "resources/read":
            result = {
                "contents": [{"uri": "file:///doc", "text": "a document"}],
                "ttlMs": 0,
                "cacheScope": "private",
            }
        elif method == "tools/call":
            op = str((params.get("arguments") or {}).get("op", ""))
            self.runs.write(f"{op}\n")
            self.runs.flush()
            result = {"content": [{"type": "text", "text": f"ran {op}"}]}
        elif method == "ping":  # answered whatever the mode
            body = {"jsonrpc": "2.0", "id": id_, "result": {}}
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        else:
            error = {"code": -32601, "message": "Method not found"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error})
        return await self._answer(
            request, {"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", **result}}
        )

    async def _answer(self, request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if self.mode == "500":
            return web.Response(status=500, text="internal error")
        if self.mode == "reset":
            reset_connection(request)
            return web.Response(status=500)
        if self.mode == "slow":
            await asyncio.sleep(SLOW)
        while self.mode == "hang":
            await self.moved.wait()
        return web.Response(body=orjson.dumps(message), content_type="application/json")


def reset_connection(request: web.Request) -> None:
    """Drop the request's connection with a TCP RST (SO_LINGER 0), mid-answer (the
    e2e fakes use it too)."""
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def main(port: int, runs_file: str) -> None:
    server = FaultServer(runs_file)
    app = web.Application()
    app.router.add_post("/mcp", server.mcp)
    app.router.add_post("/control", server.control)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, reuse_address=True).start()
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
