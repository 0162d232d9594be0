"""The store on a three-master Redis Cluster (issue 41, item 1): real `redis-server`
processes in cluster mode, joined by `redis-cli --cluster create`.

- The store's operations hold on the cluster: registrations read together (one hash
  slot), states spent once, verdicts and shared results, and rate-limit takes of
  several routes in one batch (each route's buckets in one slot, one script per route);
  without the hash tags the same batch is refused by the cluster (CROSSSLOT).
- Three `gateway serve --cluster redis+cluster://...` replicas behind nginx
  round-robin: input_required rounds and sessions land on any replica and hold; one
  rate limit holds across the replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import redis
from redis.asyncio.cluster import RedisCluster

from gateway.cluster.redis_buckets import RedisBuckets
from gateway.cluster.redis_store import RedisStore
from gateway.cluster.store import Replica
from gateway.policy.buckets import Rate
from tests.cluster.client import LegacyClient, greet_first, greet_retry, owner_of, post_json
from tests.cluster.conftest import Cluster, _process, program, replicas_behind_nginx, wait_port
from tests.e2e.fake_client import modern_headers, modern_request
from tests.e2e.gateway_proc import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """Three masters (no replicas), every slot covered: their ports."""
    server, cli = program("redis-server"), program("redis-cli")
    tmp = tmp_path_factory.mktemp("redis-cluster")
    ports = [free_port() for _ in range(3)]
    with contextlib.ExitStack() as stack:
        for port in ports:
            home = tmp / str(port)
            home.mkdir()
            argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(home)]
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            # The bus port is its own free port (port + 10000 may be past 65535).
            argv += ["--cluster-port", str(free_port())]
            argv += ["--save", "", "--appendonly", "no"]
            process = stack.enter_context(_process(argv, home / "redis.log"))
            wait_port(port, 10.0, process)
        nodes = [f"127.0.0.1:{port}" for port in ports]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        _wait_ok(ports)
        yield ports


def _wait_ok(ports: list[int]) -> None:
    """Every node says the cluster is ok (bounded: the nodes meet by gossip)."""
    deadline = time.monotonic() + 30
    for port in ports:
        client = redis.Redis(port=port)
        try:
            while client.cluster("info").get("cluster_state") != "ok":
                assert time.monotonic() < deadline, "the cluster never became ok"
                time.sleep(0.1)
        finally:
            client.close()


def url_of(ports: list[int]) -> str:
    return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in ports[:2])


async def test_the_stores_operations_hold_on_a_cluster(redis_cluster: list[int]) -> None:
    store = RedisStore(url_of(redis_cluster))
    try:
        for n in range(5):
            await store.register(Replica(f"r{n}", f"http://127.0.0.1:{n + 1}"), 30)
        assert {r.id for r in await store.replicas()} == {f"r{n}" for n in range(5)}
        await store.deregister("r0")
        assert await store.replica("r0") is None
        assert await store.use_once("state-1", 30)
        assert not await store.use_once("state-1", 30)
        await store.put_verdict("/mcp http://u", {"revision": "r"}, 30)
        assert await store.verdict("/mcp http://u") == {"revision": "r"}
        await store.put_result("k", b"listed", 30)
        assert await store.result("k") == b"listed"
        rate = Rate(1.0, 1.0, 2)
        takes = [[(f"route{r}:p:caller{c}", rate)] for r in range(4) for c in range(3)]
        taken = await asyncio.gather(*(store.take_tokens(t) for t in takes * 3))
        assert [t[1] for t in taken] == [-1] * 24 + [0] * 12  # the burst of 2, then none
    finally:
        await store.close()


async def test_without_hash_tags_a_batch_of_routes_is_refused(redis_cluster: list[int]) -> None:
    """Why the tags: the same batch, keys spread over slots, is not one script's."""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0])
    try:
        plain = RedisBuckets(client, "gw:untagged:")
        takes = [[(f"route{r}:p:c", Rate(1.0, 1.0, 2))] for r in range(8)]
        with pytest.raises(redis.exceptions.RedisError):
            await asyncio.gather(*(plain.take(t) for t in takes))
    finally:
        await client.aclose()


@pytest.fixture(scope="module")
def replicas(
    redis_cluster: list[int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    nginx = program("nginx")
    tmp = tmp_path_factory.mktemp("on-redis-cluster")
    demo_port, lb_port = free_port(), free_port()
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with _process(demo_argv, tmp / "demo.log") as demo:
        wait_port(demo_port, 10.0, demo)
        upstream = f"http://127.0.0.1:{demo_port}/mcp"
        found = Cluster(tmp, url_of(redis_cluster), upstream, lb_port)
        found.routes = [
            f"/mcp={upstream}",
            f"/limited={upstream},rate=2/s,burst=3",
            f"/shared={upstream},ttl_ms=600000,cache_scope=public",
        ]
        with replicas_behind_nginx(found, nginx):
            yield found


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # A fresh connection per request: nginx picks the next replica for each one.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


async def test_rounds_sessions_and_limits_hold_across_replicas(
    replicas: Cluster, http: aiohttp.ClientSession
) -> None:
    owners = set()
    for i in range(12):
        key, state = await greet_first(http, replicas.url, 2 * i)
        owners.add(owner_of(state))
        status, body = await greet_retry(http, replicas.url, 2 * i + 1, key, state, f"Ada{i}")
        assert status == 200 and body["result"]["content"][0]["text"] == f"Hello, Ada{i}!", body
    assert len(owners) == 3  # parked on every replica, retried through any
    clients = [LegacyClient(http, replicas.url) for _ in range(3)]
    for client in clients:
        await client.open()
    for client in clients:
        for n in range(3):
            status, body = await client.echo(f"hi {n}")
            assert status == 200 and body["result"]["content"][0]["text"] == f"hi {n}", body
    limited = replicas.url.replace("/mcp", "/limited")
    answered = 0
    for i in range(12):  # well within a second: the burst of 3 and a refill at most
        body = modern_request(i, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        headers = modern_headers("tools/call", "add")
        status, _, _ = await post_json(http, limited, body, headers)
        answered += status == 200
    assert 3 <= answered <= 6, answered

    shared = replicas.url.replace("/mcp", "/shared")
    lists = []
    for i in range(3):  # through each replica in turn: one fetched, shared with the rest
        body = modern_request(i, "tools/list")
        status, listed, _ = await post_json(http, shared, body, modern_headers("tools/list"))
        assert status == 200, listed
        lists.append(listed["result"]["tools"])
    assert lists[0] == lists[1] == lists[2]
    store = RedisCluster(host="127.0.0.1", port=replicas_ports(replicas))
    try:
        assert [key async for key in store.scan_iter(match="gw:result:*")], "nothing shared"
    finally:
        await store.aclose()


def replicas_ports(replicas: Cluster) -> int:
    """A node of the cluster the replicas use (the first of their URL's)."""
    return int(replicas.redis_url.removeprefix("redis+cluster://").split(",")[0].split(":")[1])
