"""A 2026-07-28 client whose call needs a capability it did not declare, in front of
a real handshake-era server (the pinned Python `mcp` 1.22.0 peer, Streamable HTTP):
HTTP 400 with `MissingRequiredClientCapabilityError` (-32021) naming the capability
(spec 2026-07-28, basic/index.mdx: "On HTTP, the response status MUST be 400").

The peer's `test_missing_capability` is the conformance suite's diagnostic
(server-stateless, `sep-2575-missing-capability-http-400`): it samples mid-call.  A
handshake-era server asks whatever its session's client declared or not (this one
does not check), so the gateway, which knows the caller's per-request capabilities,
is the one that refuses; declared, the ask reaches the client as `input_required`.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest
from peers.registry import peer, require_installed

from tests.e2e.fake_client import assert_clean_log
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.sdk_peers import ModernClient, gateway_before, input_required, who

LEGACY = "python-1.22.0-server"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    server = peer(LEGACY)
    require_installed(server)
    with gateway_before(server, tmp_path_factory.mktemp("gw-missing-cap")) as running:
        yield running
        assert_clean_log(running.log())


@pytest.mark.parametrize(
    ("tool", "needed"),
    [
        ("test_missing_capability", {"sampling": {}}),
        ("summarize", {"sampling": {}}),
        ("ask_name", {"elicitation": {"form": {}}}),
    ],
)
async def test_an_undeclared_capability_is_http_400_and_32021(
    http: aiohttp.ClientSession, gw: RunningGateway, tool: str, needed: dict[str, object]
) -> None:
    caller = ModernClient(http, gw.url("/mcp"), {}, who())
    reply = await caller.call(tool, {"text": "x"} if tool == "summarize" else {}, id_=401)
    assert reply.status == 400, reply.text
    assert reply.message["id"] == 401, reply.text
    assert reply.error["code"] == -32021, reply.text
    assert reply.error["data"]["requiredCapabilities"] == needed, reply.text


async def test_declared_the_same_ask_reaches_the_client(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    caller = ModernClient(http, gw.url("/mcp"), {"sampling": {}}, who())
    requests, _ = input_required(await caller.call("test_missing_capability"))
    assert [r["method"] for r in requests.values()] == ["sampling/createMessage"], requests
