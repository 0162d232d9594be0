"""A 2026-07-28 (stateless) upstream that asks too much and looks like the gateway.

Run as a program (``python -m tests.policy.stateless_upstream``): it serves Streamable
HTTP on a free loopback port, prints ``ready <url>``, then one line per request it
handles (``call <tool>``, ``read <uri>``), so a test can tell what reached it.

  flood     ``tools/call`` answers ``input_required`` with FLOOD elicitation questions,
            again on every retry (an upstream that floods its client)
  gwstate   ``tools/call`` answers ``input_required`` with one question and a
            ``requestState`` of its own that begins ``gw1.`` (as the gateway's do);
            the retry that brings it back unchanged, with an answer, completes
  resources/read  ``test://here`` is served; any other URI is this revision's
            "Resource not found": -32602 with the URI in ``data``
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import web

MODERN = "2026-07-28"
FLOOD = 5000
OWN_STATE = "gw1.the-upstreams-own-state"
QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Again?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
}
TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("flood", "gwstate")]


def _result(id_: Any, result: dict[str, Any]) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})


def _error(id_: Any, code: int, message: str, data: Any = None, status: int = 200) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=status)


def _say(line: str) -> None:
    print(line, flush=True)


def _call(id_: Any, params: dict[str, Any]) -> web.Response:
    name = params.get("name")
    _say(f"call {name}")
    if name == "flood":
        asks = {f"q{n}": QUESTION for n in range(FLOOD)}
        return _result(
            id_, {"resultType": "input_required", "inputRequests": asks, "requestState": "s"}
        )
    if name == "gwstate":
        if params.get("requestState") == OWN_STATE and params.get("inputResponses"):
            text = {"type": "text", "text": "state ok"}
            return _result(id_, {"resultType": "complete", "content": [text]})
        result = {
            "resultType": "input_required",
            "inputRequests": {"q": QUESTION},
            "requestState": OWN_STATE,
        }
        return _result(id_, result)
    return _error(id_, -32602, f"Unknown tool: {name}", status=400)


def _read(id_: Any, params: dict[str, Any]) -> web.Response:
    uri = params.get("uri")
    _say(f"read {uri}")
    if uri == "test://here":
        contents = [{"uri": uri, "text": "here", "mimeType": "text/plain"}]
        return _result(id_, {"resultType": "complete", "contents": contents})
    return _error(id_, -32602, "Resource not found", {"uri": uri}, status=400)


async def handle(request: web.Request) -> web.StreamResponse:
    if request.method != "POST":
        return web.Response(status=405, headers={"Allow": "POST"})
    message = json.loads(await request.read())
    method, id_, params = message.get("method"), message.get("id"), message.get("params") or {}
    if id_ is None:
        return web.Response(status=202)
    if method == "server/discover":
        capabilities = {"tools": {}, "resources": {}}
        info = {"name": "stateless-upstream", "version": "0"}
        return _result(
            id_,
            {"supportedVersions": [MODERN], "capabilities": capabilities, "serverInfo": info},
        )
    if method == "tools/list":
        return _result(id_, {"resultType": "complete", "tools": TOOLS})
    if method == "tools/call":
        return _call(id_, params)
    if method == "resources/read":
        return _read(id_, params)
    return _error(id_, -32601, f"Method not found: {method}", status=404)


async def main() -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/mcp", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    _say(f"ready http://127.0.0.1:{port}/mcp")
    await asyncio.Event().wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
