"""A request that belongs to another replica, when the store cannot say where that
replica is (paused past its socket timeout, or stopped): a 503 to send again, in
the client's revision (-32000, ``retryAfterSeconds``, ``Retry-After``), never
"session not found" or "start the call again": the owner may well be alive.
Sent again once the store answers, the same request is relayed to its owner, its
session or parked call intact.

Real processes: a redis-server of this module's own (it is paused and stopped
here), the demo upstream, two `gateway serve --cluster` replicas: A holds the
session and the parked call, the requests go straight to B."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
import redis.asyncio as aioredis

from tests.cluster.client import LegacyClient, greet, greet_first, owner_of, post_json
from tests.cluster.conftest import (
    Cluster,
    _process,
    program,
    replicas_behind_nginx,
    stop,
    wait_port,
)
from tests.e2e.fake_client import (
    EVENT_STREAM,
    JSON,
    SseReader,
    initialize,
    modern_headers,
    request,
)
from tests.e2e.gateway_proc import free_port

pytestmark = pytest.mark.timeout(180)

# How long Redis holds every command: past the store's socket timeout (5 s), so an
# owner look-up sent during it fails; and short enough that a command sent as that
# look-up fails (a retry's use-once check) is answered: a replica that took the
# failed look-up for a gone owner spent the retry's requestState, and the call was lost.
PAUSE_MS = 6500
UNREACHABLE = "cluster store unreachable"


@dataclass
class Redis:
    port: int
    tmp: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [program("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self.tmp)]
        with open(self.tmp / "redis.log", "ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_port(self.port, 10.0, self.process)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


@dataclass
class Pair:
    cluster: Cluster
    store: Redis

    @property
    def a(self) -> str:
        return self.cluster.replicas[0].base + "/mcp"

    @property
    def b(self) -> str:
        return self.cluster.replicas[1].base + "/mcp"

    def b_log(self) -> str:
        return self.cluster.replicas[1].log()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with two_replicas(tmp_path_factory.mktemp("owner")) as found:
        yield found


@contextlib.contextmanager
def two_replicas(tmp: Path) -> Iterator[Pair]:
    """A Redis of its own, the demo upstream, two replicas behind nginx."""
    store = Redis(free_port(), tmp)
    store.start()
    demo_port = free_port()
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    try:
        with _process(demo_argv, tmp / "demo.log") as demo:
            wait_port(demo_port, 10.0, demo)
            cluster = Cluster(tmp, store.url, f"http://127.0.0.1:{demo_port}/mcp", free_port())
            with replicas_behind_nginx(cluster, program("nginx"), count=2):
                yield Pair(cluster, store)
    finally:
        store.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


def wait_registered(store: Redis, replica_id: str) -> None:
    """Until ``replica_id`` is in the registry (bounded): a restarted store is empty
    until the replica's next heartbeat."""
    client = redis.Redis.from_url(store.url)
    deadline = time.monotonic() + 20
    try:
        while client.get(f"gw:replica:{replica_id}") is None:
            assert time.monotonic() < deadline, f"{replica_id} never registered again"
            time.sleep(0.05)
    finally:
        client.close()


def assert_send_again(status: int, body: Any, headers: dict[str, str], id_: Any) -> None:
    """A 503 to send the same request again, as JSON-RPC: -32000 with the wait."""
    assert status == 503, (status, body)
    assert body["id"] == id_, body
    assert body["error"]["code"] == -32000, body
    assert body["error"]["data"]["retryAfterSeconds"] == 1, body
    assert "send the same request again" in body["error"]["message"], body
    assert headers.get("Retry-After") == "1", headers


def greet_answer(id_: int, key: str, state: str) -> dict[str, Any]:
    return greet(id_, state, {key: {"action": "accept", "content": {"name": "Ada"}}})


async def session_on_a(pair: Pair, http: aiohttp.ClientSession) -> LegacyClient:
    client = LegacyClient(http, pair.a)
    await client.open()
    return client


def owner_of_session(client: LegacyClient) -> str:
    return client.session_id.split(".")[0]


async def echo_at_b(
    pair: Pair, http: aiohttp.ClientSession, client: LegacyClient, id_: int, text: str
) -> tuple[int, Any, dict[str, str]]:
    message = request(id_, "tools/call", {"name": "echo", "arguments": {"text": text}})
    return await post_json(http, pair.b, message, client.headers())


async def greet_at_b(
    pair: Pair, http: aiohttp.ClientSession, id_: int, key: str, state: str
) -> tuple[int, Any, dict[str, str]]:
    headers = modern_headers("tools/call", "greet_me")
    return await post_json(http, pair.b, greet_answer(id_, key, state), headers)


def assert_relayed(echo: tuple[int, Any, dict[str, str]], greeting: tuple[int, Any, Any]) -> None:
    status, body, _ = echo
    assert status == 200, body
    assert body["result"]["content"][0]["text"] == "again", body
    status, body, _ = greeting
    assert status == 200, body
    assert body["result"]["resultType"] == "complete", body
    assert body["result"]["content"][0]["text"] == "Hello, Ada!", body


async def test_a_paused_store_is_a_503_to_send_again_not_a_lost_session(
    pair: Pair, http: aiohttp.ClientSession
) -> None:
    client = await session_on_a(pair, http)
    a_id = owner_of_session(client)
    key, state = await greet_first(http, pair.a, 1)
    assert owner_of(state) == a_id
    admin = aioredis.Redis.from_url(pair.store.url)
    try:
        await admin.client_pause(PAUSE_MS, all=True)  # every command waits, reads too
        echo, greeting = await asyncio.gather(
            echo_at_b(pair, http, client, 7, "again"), greet_at_b(pair, http, 8, key, state)
        )
        assert_send_again(*echo, 7)
        assert_send_again(*greeting, 8)
        await admin.client_unpause()  # answered once the pause is over
    finally:
        await admin.aclose()
    await asyncio.to_thread(wait_registered, pair.store, a_id)
    # The same requests again: relayed to A, where the session and the call still are.
    assert_relayed(
        await echo_at_b(pair, http, client, 7, "again"), await greet_at_b(pair, http, 8, key, state)
    )
    status, body = await client.echo("on A")
    assert status == 200, body


async def test_a_stopped_store_is_a_503_on_every_path_logged_once(
    pair: Pair, http: aiohttp.ClientSession
) -> None:
    """POST (Streamable HTTP and HTTP+SSE), GET stream and DELETE of a session of A,
    and a parked call's retry, each sent to B twice while Redis is stopped."""
    client = await session_on_a(pair, http)
    a_id = owner_of_session(client)
    key, state = await greet_first(http, pair.a, 1)
    before = pair.b_log().count(UNREACHABLE)
    async with http.get(pair.a, headers={"Accept": EVENT_STREAM}) as stream:
        reader = SseReader(stream)
        endpoint = (await reader.next()).data  # /mcp?sessionId=<A's id>.<random>
        assert endpoint.startswith(f"/mcp?sessionId={a_id}."), endpoint
        sse_at_b = pair.b.removesuffix("/mcp") + endpoint
        pair.store.stop()
        try:
            for _ in range(2):
                assert_send_again(*await echo_at_b(pair, http, client, 7, "again"), 7)
                assert_send_again(*await greet_at_b(pair, http, 8, key, state), 8)
                sse = await post_json(http, sse_at_b, initialize(9, "2024-11-05"), {})
                assert_send_again(*sse, 9)
                for method in ("GET", "DELETE"):
                    await assert_stream_or_end_refused(http, method, pair.b, client)
        finally:
            pair.store.start()
        said = pair.b_log().count(UNREACHABLE) - before
        assert said == 1, pair.b_log()[-3000:]
        await asyncio.to_thread(wait_registered, pair.store, a_id)
        assert_relayed(
            await echo_at_b(pair, http, client, 7, "again"),
            await greet_at_b(pair, http, 8, key, state),
        )
        # The HTTP+SSE session on A is intact: B relays the POST, A answers on its stream.
        async with http.post(
            sse_at_b, data=json.dumps(initialize(9, "2024-11-05")), headers={"Content-Type": JSON}
        ) as response:
            assert response.status == 202, await response.text()
        answer = await reader.response_to(9)
        assert answer["result"]["protocolVersion"] == "2024-11-05", answer
    assert "cluster store answers again" in pair.b_log()


async def assert_stream_or_end_refused(
    http: aiohttp.ClientSession, method: str, url: str, client: LegacyClient
) -> None:
    """A GET stream or DELETE of A's session, at B: the 503 (its JSON-RPC error has
    no id to answer)."""
    headers = {**client.headers(), "Accept": EVENT_STREAM}
    async with http.request(method, url, headers=headers) as response:
        text = await response.text()
        assert response.status == 503, (method, response.status, text)
        assert response.headers.get("Retry-After") == "1", (method, dict(response.headers))
        body = json.loads(text)
        assert body["error"]["code"] == -32000, (method, body)
