"""2025-03-26 JSON-RPC batches through the gateway to real SDK servers.

The client side is raw HTTP (no SDK client batches); the upstreams are the
TypeScript SDK 1.32 server (2025-11-25, stateful), the TypeScript SDK 2.x server
(2026-07-28, stateless) and the Python SDK 1.9.4 server (2025-03-26, the one
revision with batches).  Every item of a batch is answered, in the order asked;
a batch over the bound gets one clear error.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest
from peers.registry import peer, require_installed, route_options, running_server

from tests.e2e.fake_client import (
    assert_clean_log,
    notification,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.e2e.sdk_peers import SDK1, SDK2, legacy_session, who

VERSION = "2025-03-26"
UPSTREAMS = (SDK1, SDK2, "python-1.9.4-server")


@pytest.fixture(scope="module", params=UPSTREAMS)
def gw(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    server = peer(request.param)
    require_installed(server)
    tmp = tmp_path_factory.mktemp("gw-sdk-batch")
    with (
        running_server(server, "streamable-http") as upstream,
        gateway(f"/mcp={upstream}{route_options(server)}", tmp_path=tmp) as running,
    ):
        yield running
        assert_clean_log(running.log())


async def test_every_item_answered_in_order(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    url, auth = gw.url("/mcp"), {"Authorization": who()}
    session = await legacy_session(http, url, {}, auth, VERSION)
    headers = {**session_headers(session, VERSION), **auth}
    batch = [
        request("e1", "tools/call", {"name": "echo", "arguments": {"text": "one"}}),
        request(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
        notification("notifications/progress", {"progressToken": "none", "progress": 1}),
        request("l", "tools/list"),
        request(4, "no/such_method"),
        request("e5", "tools/call", {"name": "echo", "arguments": {"text": "five"}}),
        request(6, "resources/read", {"uri": "demo://text"}),
    ]
    reply = await post(http, url, batch, headers, within=30.0)
    assert reply.status == 200, reply.text
    answers = reply.messages[0]
    assert isinstance(answers, list), reply.text
    # One answer per request (none for the notification), in the order asked.
    assert [a["id"] for a in answers] == ["e1", 2, "l", 4, "e5", 6], answers
    assert text_of(answers[0]["result"]) == "echo: one"
    assert text_of(answers[1]["result"]) == "5"
    assert "echo" in {t["name"] for t in answers[2]["result"]["tools"]}
    # Forwarded as the upstream answered it (python mcp 1.9.4 says -32602 there).
    assert answers[3]["error"]["code"] in (-32601, -32602), answers[3]
    assert text_of(answers[4]["result"]) == "echo: five"
    assert answers[5]["result"]["contents"][0]["text"] == "hello resource"


async def test_an_oversize_batch_gets_one_error(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    url, auth = gw.url("/mcp"), {"Authorization": who()}
    session = await legacy_session(http, url, {}, auth, VERSION)
    headers = {**session_headers(session, VERSION), **auth}
    item = {"name": "echo", "arguments": {"text": "x"}}
    reply = await post(http, url, [request(n, "tools/call", item) for n in range(65)], headers)
    assert reply.status == 400, reply.text
    assert isinstance(reply.message, dict), "one error, not one per item"
    assert reply.error["code"] == -32600, reply.error
    assert "at most 64" in reply.error["message"], reply.error
    # The session is still good: the largest batch allowed is answered in full.
    full = await post(
        http, url, [request(n, "tools/call", item) for n in range(64)], headers, within=60.0
    )
    assert full.status == 200, full.text
    assert [a["id"] for a in full.messages[0]] == list(range(64))
    assert all(text_of(a["result"]) == "echo: x" for a in full.messages[0])
