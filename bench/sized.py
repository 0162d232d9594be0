"""An upstream whose answers are as large as asked, in both eras, for `bench.size`.

    python -m bench.sized PORT

Plain aiohttp and orjson, no gateway code.  Two families of paths on 127.0.0.1:PORT:

  /modern/N   a 2026-07-28 server (stateless, ``resultType``), JSON answers
  /legacy/N   a 2025-11-25 server (``initialize`` mints a session; GET 405,
              DELETE 200), ``tools/call`` answered on an SSE stream as the
              handshake era's servers commonly do

N is how many tools ``tools/list`` lists (one page; each tool has a small input
schema, about 300 bytes of JSON).  ``tools/call``:

  echo   {"text": T}           T back
  blob   {"bytes": B, "sse": S} one text item of B bytes (the modern server answers
                                on an SSE stream when S is true)
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from functools import cache
from typing import Any

import orjson
from aiohttp import web

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
INFO = {"name": "bench-sized", "version": "0"}


@cache
def tools(count: int) -> list[dict[str, Any]]:
    listed = [
        {
            "name": f"tool_{n:05d}",
            "description": f"Tool number {n}: takes a text and a count, returns them.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Any text"},
                    "count": {"type": "integer", "minimum": 0},
                },
                "required": ["text"],
            },
        }
        for n in range(max(0, count - 2))
    ]
    echo = {
        "name": "echo",
        "description": "Echo text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    blob = {
        "name": "blob",
        "description": "A text of the given size",
        "inputSchema": {
            "type": "object",
            "properties": {"bytes": {"type": "integer"}, "sse": {"type": "boolean"}},
        },
    }
    return [echo, blob, *listed][: max(count, 2)]


def _call(params: dict[str, Any]) -> dict[str, Any] | None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "echo":
        return {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]}
    if name == "blob":
        size = int(arguments.get("bytes", 0))
        return {"content": [{"type": "text", "text": "x" * size}]}
    return None


def _json(message: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(message), status=status, content_type="application/json", headers=headers
    )


async def _sse(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    await stream.write(b"event: message\ndata: " + orjson.dumps(message) + b"\n\n")
    await stream.write_eof()
    return stream


def _error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _result(
    era: str, count: int, method: str, params: dict[str, Any]
) -> dict[str, Any] | str | None:
    """The result of one request (a string: a JSON-RPC error's message)."""
    if method == "tools/list":
        return {"tools": tools(count)}
    if method == "tools/call":
        result = _call(params)
        return result if result is not None else f"unknown tool {params.get('name')!r}"
    if method == "ping":
        return {}
    if method == "server/discover" and era == MODERN:
        return {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}},
            "_meta": {SERVER_INFO: INFO},
        }
    if method == "initialize" and era == LEGACY:
        return {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": INFO}
    return None


async def handle(request: web.Request) -> web.StreamResponse:
    era = MODERN if request.match_info["era"] == "modern" else LEGACY
    count = int(request.match_info["count"])
    if request.method == "GET":
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})
    if request.method == "DELETE":
        return web.Response(status=200)
    message = orjson.loads(await request.read())
    if not isinstance(message, dict):
        return _json(_error(None, -32600, "batches are not served here"), 400)
    id_, method = message.get("id"), str(message.get("method"))
    if id_ is None:
        return web.Response(status=202)
    params = message.get("params") or {}
    result = _result(era, count, method, params)
    if result is None:
        return _json(_error(id_, -32601, f"Method not found: {method}"))
    if isinstance(result, str):
        return _json(_error(id_, -32602, result))
    if era == MODERN:
        answer = {"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", **result}}
        sse = method == "tools/call" and (params.get("arguments") or {}).get("sse")
        return await _sse(request, answer) if sse else _json(answer)
    answer = {"jsonrpc": "2.0", "id": id_, "result": result}
    if method == "initialize":
        return _json(answer, headers={"Mcp-Session-Id": secrets.token_urlsafe(16)})
    return await _sse(request, answer) if method == "tools/call" else _json(answer)


async def main(port: int) -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{era:modern|legacy}/{count:[0-9]+}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"http://127.0.0.1:{port}/", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.sized PORT")
    asyncio.run(main(int(sys.argv[1])))
