"""A handshake-era server's own refusal of a capability the client did not declare
reaches a 2026-07-28 client as that revision says it (issue 36, item 6).

The conformance suite's `test_missing_capability` on a TypeScript-SDK 1.x server checks
the session's client capabilities itself and answers `-32021` with
`requiredCapabilities`, never asking: the gateway sees no question to refuse.  Passed
through, the code means MissingRequiredClientCapabilityError to the client, and on HTTP
that error's status MUST be 400 (it was 200).  A code of the server's own that the
client's revision does not define stays 200.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.fake_client import modern_headers, post
from tests.e2e.gateway_proc import gateway
from tests.e2e.sdk_peers import modern_call
from tests.e2e.test_roots_asked_only import RootsServer, serving

REFUSALS = {
    "test_missing_capability": {
        "code": -32021,
        "message": "Client does not support sampling",
        "data": {"requiredCapabilities": {"sampling": {}}},
    },
    "own_error": {"code": -32099, "message": "the server's own error"},
}


class Refuser(RootsServer):
    """Answers its refusing tools with their JSON-RPC errors (on any session)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST":
            message = await request.json()
            params = message.get("params") or {}
            if message.get("method") == "tools/call" and params.get("name") in REFUSALS:
                error = REFUSALS[params["name"]]
                return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return await super().handle(request)


async def _call(http: aiohttp.ClientSession, url: str, name: str) -> tuple[int, dict[str, Any]]:
    headers = {**modern_headers("tools/call", name), "Authorization": "Bearer alice"}
    reply = await post(http, url, modern_call(name, {}, {}), headers)
    return reply.status, reply.message


async def test_a_handshake_servers_missing_capability_refusal_is_http_400(
    tmp_path: Path,
) -> None:
    server = Refuser()
    async with serving(server) as (url, runner):
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            try:
                async with aiohttp.ClientSession() as http:
                    refused = await _call(http, gw.url(), "test_missing_capability")
                    own = await _call(http, gw.url(), "own_error")
            finally:
                await runner.cleanup()
    status, message = refused
    assert status == 400, message
    assert message["error"]["code"] == -32021, message
    assert message["error"]["data"]["requiredCapabilities"] == {"sampling": {}}, message
    status, message = own
    assert status == 200 and message["error"]["code"] == -32099, message
