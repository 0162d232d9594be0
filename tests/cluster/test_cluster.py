"""Three replicas behind nginx round-robin, sharing Redis: any request may land on
any replica (issue #12).  Every wait is bounded; nothing sleeps to synchronise."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis

from gateway.cluster.node import ClusterNode
from gateway.cluster.store import MemoryStore
from gateway.protocol import AdapterSet
from gateway.upstream.link import UpstreamLink, UpstreamSettings
from tests.cluster.client import (
    LegacyClient,
    greet_first,
    greet_retry,
    owner_of,
)
from tests.cluster.conftest import Cluster
from tests.e2e.fake_client import EVENT_STREAM

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # A fresh connection per request: nginx picks the next replica for each one.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


def registered(cluster: Cluster) -> set[str]:
    client = redis.Redis.from_url(cluster.redis_url)
    try:
        return {key.decode().rsplit(":", 1)[1] for key in client.scan_iter("gw:replica:*")}
    finally:
        client.close()


async def test_input_required_round_trips_succeed_100_of_100(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    owners: set[str] = set()
    for i in range(100):
        key, state = await greet_first(http, cluster.url, 2 * i)
        owners.add(owner_of(state))
        status, body = await greet_retry(http, cluster.url, 2 * i + 1, key, state, f"Ada{i}")
        assert status == 200, body
        result = body["result"]
        assert result["resultType"] == "complete", body
        assert result["content"][0]["text"] == f"Hello, Ada{i}!"
    # The calls were parked on every replica, so most retries landed elsewhere.
    assert owners == registered(cluster)


async def test_a_replayed_request_state_is_refused_by_every_replica(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    key, state = await greet_first(http, cluster.url, 1)
    status, body = await greet_retry(http, cluster.url, 2, key, state, "Ada")
    assert status == 200 and body["result"]["resultType"] == "complete", body
    for replica in cluster.replicas:  # straight to each replica, not through nginx
        status, body = await greet_retry(http, replica.base + "/mcp", 3, key, state, "Eve")
        assert "error" in body, body
        assert "already used" in body["error"]["message"], body


async def test_sessions_and_get_streams_work_across_replicas(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    clients = [LegacyClient(http, cluster.url) for _ in range(3)]
    for client in clients:
        await client.open()
    owners = {client.session_id.split(".")[0] for client in clients}
    assert owners == registered(cluster)  # round robin: one session on each replica
    for client in clients:
        async with http.get(
            cluster.url, headers={**client.headers(), "Accept": EVENT_STREAM}
        ) as stream:
            assert stream.status == 200
            assert stream.content_type == EVENT_STREAM
            # The stream is open on the owner: a second one, from any replica, conflicts.
            for _ in range(3):
                async with http.get(
                    cluster.url, headers={**client.headers(), "Accept": EVENT_STREAM}
                ) as second:
                    assert second.status == 409
            for n in range(6):
                status, body = await client.echo(f"hi {n}")
                assert status == 200, body
                assert body["result"]["content"][0]["text"] == f"hi {n}"
    for client in clients:
        async with http.delete(cluster.url, headers=client.headers()) as response:
            assert response.status == 200
        status, _ = await client.echo("gone")
        assert status == 404


async def test_killing_a_replica_then_restarting_it(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    clients = [LegacyClient(http, cluster.url) for _ in range(3)]
    for client in clients:
        await client.open()
    parked = [await greet_first(http, cluster.url, i) for i in range(3)]
    victim = cluster.replicas[0]
    victim_id = replica_at(cluster, victim.port)
    cluster.kill(victim)
    try:
        for client in clients:
            for n in range(3):
                status, body = await asyncio.wait_for(client.echo(f"after {n}"), 15)
                if client.session_id.startswith(victim_id + "."):
                    assert status == 404, body  # its sessions are gone: start a new one
                else:
                    assert status == 200, body
        for i, (key, state) in enumerate(parked):
            status, body = await asyncio.wait_for(
                greet_retry(http, cluster.url, 10 + i, key, state, "Ada"), 15
            )
            if owner_of(state) == victim_id:
                assert "start the call again" in body["error"]["message"], body
            else:
                assert body["result"]["content"][0]["text"] == "Hello, Ada!", body
        # New sessions and calls keep working with a replica down.
        again = LegacyClient(http, cluster.url)
        await again.open()
        assert (await again.echo("x"))[0] == 200
    finally:
        cluster.start(victim)
    # It rejoined under a new id (its old sessions stay gone; the old entry expires).
    assert replicas_at(cluster, victim.port) - {victim_id}
    # It took the route's era verdict from Redis instead of probing the upstream again.
    assert "upstream era adopted from the cluster" in victim.log()
    # The restarted replica takes its share again: sessions owned by it work from anywhere.
    direct = LegacyClient(http, victim.base + "/mcp")
    await direct.open()
    through = LegacyClient(http, cluster.url)
    through.session_id = direct.session_id
    for n in range(3):
        status, body = await through.echo(f"back {n}")
        assert status == 200, body


def replicas_at(cluster: Cluster, port: int) -> set[str]:
    """The ids registered at ``port`` (a killed replica's stays until it expires)."""
    client = redis.Redis.from_url(cluster.redis_url)
    found = set()
    try:
        for key in client.scan_iter("gw:replica:*"):
            raw = client.get(key)
            if raw is not None and json.loads(raw)["url"].endswith(f":{port}"):
                found.add(str(json.loads(raw)["id"]))
    finally:
        client.close()
    return found


def replica_at(cluster: Cluster, port: int) -> str:
    (found,) = replicas_at(cluster, port)
    return found


def test_cluster_mode_refuses_to_start_without_a_state_key(cluster: Cluster) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_STATE_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--cluster", cluster.redis_url],
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert b"GATEWAY_STATE_KEY" in done.stderr


def wait_draining(base: str) -> None:
    """Until the replica's /readyz says it is draining (bounded)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2):
                pass
        except urllib.error.HTTPError as exc:
            if exc.code == 503 and b"draining" in exc.read():
                return
        time.sleep(0.05)
    raise AssertionError(f"{base} did not start draining")


async def test_sigterm_drains_what_the_replica_owns(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    leaving, other = cluster.replicas[1], cluster.replicas[2]
    key, state = await greet_first(http, leaving.base + "/mcp", 1)
    assert leaving.process is not None
    leaving.process.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(wait_draining, leaving.base)
        # New work that reaches it is relayed to a replica that is not leaving.
        fresh = LegacyClient(http, leaving.base + "/mcp")
        await fresh.open()
        assert fresh.session_id.split(".")[0] not in replicas_at(cluster, leaving.port)
        # Its parked call still finishes: the retry, sent elsewhere, is relayed to it.
        _, body = await greet_retry(http, other.base + "/mcp", 2, key, state, "Ada")
        assert body["result"]["content"][0]["text"] == "Hello, Ada!", body
        # With nothing left to finish, it leaves well before the drain timeout.
        code = await asyncio.to_thread(leaving.process.wait, 10)
        assert code == 0, leaving.log()[-3000:]
    finally:
        cluster.start(leaving)


async def test_a_probed_verdict_is_published_at_once_not_on_the_next_heartbeat(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    """A replica restarted just after the others probed adopts their verdict."""
    adapters = AdapterSet.default()
    store = MemoryStore()
    # A heartbeat far beyond the test's bounds: only the prompt publish can be seen.
    node = ClusterNode(store, b"k" * 32, heartbeat_ttl=3600.0)
    link = UpstreamLink(UpstreamSettings(cluster.upstream), adapters, http)
    node.verdicts.add("/mcp " + cluster.upstream, link, adapters)
    await node.start("http://127.0.0.1:1")
    try:
        verdict = await link.ensure("principal", {})
        async with asyncio.timeout(10):
            # Polled: the store has no change notification.
            while (data := await store.verdict("/mcp " + cluster.upstream)) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert data["revision"] == verdict.adapter.version == "2025-11-25"
        later = UpstreamLink(UpstreamSettings(cluster.upstream), adapters, http)
        joining = ClusterNode(store, b"k" * 32, heartbeat_ttl=3600.0)
        joining.verdicts.add("/mcp " + cluster.upstream, later, adapters)
        await joining.start("http://127.0.0.1:2")
        assert later.verdict is not None and later.verdict.profile == verdict.profile
        await joining.leave()
    finally:
        await node.leave()
