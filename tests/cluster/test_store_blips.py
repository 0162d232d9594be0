"""What a client still holds survives a store that restarts empty and an owner that
refuses connections for a moment (issue 41, items 2 and 3).

- Redis restarted empty knows no replica until each one's next heartbeat.  A request
  for a live owner's session or parked call that lands in that window used to be
  answered as for a gone owner (404, "start the call again").  Now the replica that
  sees its own registration gone too announces itself at once and answers 503 to
  send again (the owner re-announces within a heartbeat); sent again, the request is
  relayed, session and call intact.
- A registered owner that refuses a connection is not taken for dead: the relay is
  tried again for a short while, and the request reaches it when it listens again.

Real processes: redis-server, the demo upstream, two `gateway serve --cluster`
replicas (A holds the session and the call, requests go to B), and for the blip a
listener that starts late on the port a registered owner names.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from tests.cluster.client import greet_first, owner_of
from tests.cluster.test_owner_unknown import (
    Pair,
    echo_at_b,
    greet_at_b,
    owner_of_session,
    session_on_a,
    two_replicas,
    wait_registered,
)
from tests.e2e.gateway_proc import free_port

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with two_replicas(tmp_path_factory.mktemp("blips")) as found:
        yield found


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


def relayed_or_send_again(answer: tuple[int, Any, dict[str, str]]) -> bool:
    """True: relayed (200); False: a 503 to send again.  Anything else fails."""
    status, body, headers = answer
    if status == 200:
        return True
    assert status == 503, (status, body)
    assert body["error"]["code"] == -32000, body
    assert "send the same request again" in body["error"]["message"], body
    assert int(headers["Retry-After"]) == body["error"]["data"]["retryAfterSeconds"] >= 1
    return False


async def test_a_store_restarted_empty_loses_no_live_owner(
    pair: Pair, http: aiohttp.ClientSession
) -> None:
    client = await session_on_a(pair, http)
    a_id = owner_of_session(client)
    key, state = await greet_first(http, pair.a, 1)
    assert owner_of(state) == a_id
    pair.store.stop()
    pair.store.start()  # empty: no replica is registered until it announces again
    echo = await echo_at_b(pair, http, client, 7, "again")
    greeting = await greet_at_b(pair, http, 8, key, state)
    relayed = relayed_or_send_again(echo), relayed_or_send_again(greeting)
    await asyncio.to_thread(wait_registered, pair.store, a_id)
    if not relayed[0]:
        echo = await echo_at_b(pair, http, client, 7, "again")
    if not relayed[1]:
        greeting = await greet_at_b(pair, http, 8, key, state)
    assert echo[0] == 200 and echo[1]["result"]["content"][0]["text"] == "again", echo
    assert greeting[0] == 200, greeting
    assert greeting[1]["result"]["content"][0]["text"] == "Hello, Ada!", greeting
    assert "cluster store lost the registry" in pair.b_log()


async def test_an_owner_that_refuses_for_a_moment_is_relayed_to_when_it_listens(
    pair: Pair, http: aiohttp.ClientSession
) -> None:
    """An owner registered at a port nobody listens on yet: B's relay is refused, tries
    again, and reaches the listener that starts there half a second later."""
    port = free_port()
    heard: list[str] = []

    async def owner(request: web.Request) -> web.Response:
        heard.append(request.headers.get("Mcp-Session-Id", ""))
        body = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "x"}]}}
        return web.json_response(body)

    admin = aioredis.Redis.from_url(pair.store.url)
    registered = {"id": "blip", "url": f"http://127.0.0.1:{port}", "draining": False}
    await admin.set("gw:replica:blip", json.dumps(registered), px=30_000)
    app = web.Application()
    app.router.add_post("/mcp", owner)
    runner = web.AppRunner(app)
    await runner.setup()

    async def listen_late() -> None:
        await asyncio.sleep(0.5)  # the blip: refused until then
        await web.TCPSite(runner, "127.0.0.1", port).start()

    try:
        late = asyncio.create_task(listen_late())
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": "blip.0123456789abcdef",
            "MCP-Protocol-Version": "2025-11-25",
        }
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}
        async with http.post(pair.b, json=message, headers=headers) as response:
            status, body = response.status, await response.json()
        await late
    finally:
        await runner.cleanup()
        await admin.delete("gw:replica:blip")
        await admin.aclose()
    assert status == 200 and body["result"]["content"][0]["text"] == "x", body
    assert heard == ["blip.0123456789abcdef"]


def _replica_id(log: str) -> str:
    match = re.search(r'"replica": "([0-9a-f]+)"[^\n]*"event": "joined the cluster"', log)
    assert match is not None, log[-2000:]
    return match.group(1)


async def test_a_replica_that_announced_itself_first_still_knows_the_store_forgot(
    pair: Pair, http: aiohttp.ClientSession
) -> None:
    """Issue 48, item 1: the replica a request lands on re-announced itself to the
    emptied store before the owner did; finding its own key there, it took the store
    for whole and the owner for gone (404 "Session not found", "the replica that held
    this call is gone"). Its heartbeat's write now says the key was missing: the owner
    not found is a 503 to send again until it has announced itself, then relayed."""
    client = await session_on_a(pair, http)
    a_id = owner_of_session(client)
    key, state = await greet_first(http, pair.a, 1)
    b_id = _replica_id(pair.b_log())
    owner = pair.cluster.replicas[0].process
    assert owner is not None
    owner.send_signal(signal.SIGSTOP)  # the owner cannot announce itself meanwhile
    try:
        pair.store.stop()
        pair.store.start()
        await asyncio.to_thread(wait_registered, pair.store, b_id)  # B announced first
        echo = await echo_at_b(pair, http, client, 7, "again")
        greeting = await greet_at_b(pair, http, 8, key, state)
        assert not relayed_or_send_again(echo) and not relayed_or_send_again(greeting)
    finally:
        owner.send_signal(signal.SIGCONT)
    await asyncio.to_thread(wait_registered, pair.store, a_id)
    echo = await echo_at_b(pair, http, client, 7, "again")
    greeting = await greet_at_b(pair, http, 8, key, state)
    assert echo[0] == 200 and echo[1]["result"]["content"][0]["text"] == "again", echo
    assert greeting[0] == 200, greeting
    assert greeting[1]["result"]["content"][0]["text"] == "Hello, Ada!", greeting
