"""Cancellation against real SDK servers: a client's cancellation reaches the
upstream tool as the abort of ITS request (the SDK aborts a handler's signal only
for a cancellation naming that handler's request id, or for its own closed stream).

The tool `wait_cancel(tag)` reports progress once running, then waits for its
abort signal and records its own request id and the abort's reason; `aborted(tag)`
(a later call) reports what was recorded.  Upstreams: the TypeScript SDK 1.32
server over HTTP (2025-11-25, stateful) and over stdio, and the TypeScript SDK 2.x
server (2026-07-28, stateless HTTP).  Clients: a 2026-07-28 client that drops its
stream, and a 2025-06-18 client that sends notifications/cancelled.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import (
    WAIT,
    SseReader,
    assert_clean_log,
    modern_headers,
    notification,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.sdk_peers import (
    SDK1,
    SDK2,
    ModernClient,
    complete_text,
    gateway_before,
    legacy_session,
    modern_call,
    sdk_peer,
    who,
)

UPSTREAMS = {
    "sdk1-http": (SDK1, "streamable-http"),
    "sdk1-stdio": (SDK1, "stdio"),
    "sdk2-stateless": (SDK2, "streamable-http"),
}
LEGACY = "2025-06-18"


@pytest.fixture(scope="module", params=sorted(UPSTREAMS))
def gw(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    name, transport = UPSTREAMS[request.param]
    tmp = tmp_path_factory.mktemp("gw-sdk-cancel")
    with gateway_before(sdk_peer(name), tmp, transport=transport) as running:
        yield running
        assert_clean_log(running.log())


@asynccontextmanager
async def running_call(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[aiohttp.ClientResponse]:
    """POST a wait_cancel call and return once the upstream tool reported progress
    (it is running and listening for its abort); the stream stays open."""
    async with http.post(url, json=body, headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/event-stream"
        reader = SseReader(response)
        while True:
            message = await reader.next_message()
            assert "result" not in message and "error" not in message, message
            if message.get("method") == "notifications/progress":
                assert message["params"]["progressToken"] == "p-1", message
                break
        yield response


async def seen_by_upstream(client: ModernClient, tag: str) -> dict[str, Any]:
    """What the upstream tool recorded when its signal was aborted."""
    reply = await client.call("aborted", {"tag": tag})
    seen = json.loads(complete_text(reply))
    assert isinstance(seen, dict), f"the upstream tool was never cancelled: {seen!r}"
    return seen


async def test_modern_client_drops_its_stream(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    url, tag = gw.url("/mcp"), uuid.uuid4().hex[:8]
    client = ModernClient(http, url, {}, who())
    body = modern_call(
        "wait_cancel", {"tag": tag}, {}, id_=f"c-{tag}", meta={"progressToken": "p-1"}
    )
    headers = {**modern_headers("tools/call", "wait_cancel"), "Authorization": client.auth}
    async with running_call(http, url, body, headers) as response:
        response.close()  # the client goes away mid-call
    seen = await asyncio.wait_for(seen_by_upstream(client, tag), WAIT * 2)
    # The upstream's own request id, not the client's.
    assert seen["requestId"] != f"c-{tag}", seen


async def test_legacy_client_sends_notifications_cancelled(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    url, tag = gw.url("/mcp"), uuid.uuid4().hex[:8]
    auth = {"Authorization": who()}
    session = await legacy_session(http, url, {}, auth, LEGACY)
    headers = {**session_headers(session, LEGACY), **auth}
    params = {"name": "wait_cancel", "arguments": {"tag": tag}, "_meta": {"progressToken": "p-1"}}
    body = request(9, "tools/call", params)
    async with running_call(http, url, body, headers):
        cancel = notification("notifications/cancelled", {"requestId": 9, "reason": "user"})
        accepted = await post(http, url, cancel, headers)
        assert accepted.status == 202, accepted.text
        # Asked in the same session: a stdio upstream runs one process per session.
        asked = request(10, "tools/call", {"name": "aborted", "arguments": {"tag": tag}})
        reply = await post(http, url, asked, headers, within=WAIT * 2)
    seen = json.loads(text_of(reply.result))
    assert isinstance(seen, dict), f"the upstream tool was never cancelled: {seen!r}"
    assert seen["requestId"] is not None, seen
