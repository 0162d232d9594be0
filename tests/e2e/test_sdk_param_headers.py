"""`Mcp-Param-*` headers (SEP-2243) against a real SDK server that checks them: the
TypeScript SDK 2.x server (2026-07-28 only, legacy traffic rejected), whose tool
`where` declares `x-mcp-header: Region` on its `region` argument.  The SDK refuses
a call whose header is missing or disagrees with the argument (-32020), so a call
that completes proves the header reached it, right.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest

from tests.e2e.fake_client import (
    NEWEST_HANDSHAKE,
    assert_clean_log,
    modern_headers,
    modern_request,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.sdk_peers import SDK2, gateway_before, legacy_session, modern_call, sdk_peer, who

ARGS = {"region": "eu-west", "what": "rain"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    server = sdk_peer(SDK2, "--legacy", "reject")
    with gateway_before(server, tmp_path_factory.mktemp("gw-sdk-param")) as running:
        yield running
        assert_clean_log(running.log())


def where_headers(region: str | None) -> dict[str, str]:
    headers = {**modern_headers("tools/call", "where"), "Authorization": who()}
    if region is not None:
        headers["Mcp-Param-Region"] = region
    return headers


async def test_the_declaration_is_listed(http: aiohttp.ClientSession, gw: RunningGateway) -> None:
    reply = await post(
        http, gw.url("/mcp"), modern_request(1, "tools/list"), modern_headers("tools/list")
    )
    tools = {t["name"]: t for t in reply.result["tools"]}
    assert tools["where"]["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"


async def test_a_modern_clients_header_reaches_the_sdk(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    body = modern_call("where", ARGS, {})
    reply = await post(http, gw.url("/mcp"), body, where_headers("eu-west"))
    assert reply.status == 200, reply.text
    assert text_of(reply.result) == "rain in eu-west"


@pytest.mark.parametrize("region", [None, "us-east"], ids=["missing", "disagreeing"])
async def test_a_wrong_header_is_refused_with_32020(
    http: aiohttp.ClientSession, gw: RunningGateway, region: str | None
) -> None:
    reply = await post(http, gw.url("/mcp"), modern_call("where", ARGS, {}), where_headers(region))
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32020, reply.error


async def test_a_legacy_clients_call_gets_the_header_minted(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    # A 2025-11-25 client knows nothing of Mcp-Param-*: the gateway must send the
    # header the SDK requires, from the call's arguments.
    url, auth = gw.url("/mcp"), {"Authorization": who()}
    session = await legacy_session(http, url, {}, auth)
    headers = {**session_headers(session, NEWEST_HANDSHAKE), **auth}
    body = request(3, "tools/call", {"name": "where", "arguments": ARGS})
    reply = await post(http, url, body, headers)
    assert reply.status == 200, reply.text
    assert "isError" not in reply.result or not reply.result["isError"], reply.result
    assert text_of(reply.result) == "rain in eu-west"
