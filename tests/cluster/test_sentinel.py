"""A cluster store behind Redis Sentinel follows a failover without a restart
(issue 41, item 1, test (a)).

Real processes: a Redis primary and its replica, one redis-sentinel watching them
(quorum 1, the primary judged down after 1 s), the demo upstream, and two
`gateway serve --cluster redis+sentinel://...` replicas (A holds a session and a
parked call; requests go to B, which relays them).  The primary is SIGKILLed under
a steady stream of session calls and new input_required rounds: every answer in the
failover window is a success or a 503 to send again (never a 500, never "gone");
once the sentinel has promoted the replica, the session and the parked call from
before the kill are relayed to A and finish, and the finished round's requestState
is refused a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis

from tests.cluster.client import LegacyClient, greet, greet_first, owner_of, post_json
from tests.cluster.conftest import Cluster, _process, program, replicas_behind_nginx, wait_port
from tests.cluster.test_owner_unknown import (
    echo_at_b,
    greet_at_b,
    owner_of_session,
    session_on_a,
)
from tests.e2e.fake_client import modern_headers
from tests.e2e.gateway_proc import free_port

pytestmark = pytest.mark.timeout(240)

SERVICE = "gw"
SENTINEL_CONF = """port {port}
bind 127.0.0.1
dir {tmp}
sentinel monitor {service} 127.0.0.1 {primary} 1
sentinel down-after-milliseconds {service} 1000
sentinel failover-timeout {service} 4000
sentinel parallel-syncs {service} 1
"""


@dataclass
class Sentinelled:
    cluster: Cluster
    primary: Any  # the primary's process
    primary_port: int
    sentinel_port: int

    @property
    def a(self) -> str:
        return self.cluster.replicas[0].base + "/mcp"

    @property
    def b(self) -> str:
        return self.cluster.replicas[1].base + "/mcp"


def redis_argv(port: int, tmp: Path, *more: str) -> list[str]:
    argv = [program("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    return [*argv, "--save", "", "--appendonly", "no", "--dir", str(tmp), *more]


def until(check: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)  # polling, bounded by the deadline


def linked(port: int) -> bool:
    client = redis.Redis(port=port)
    try:
        return client.info("replication").get("master_link_status") == "up"
    finally:
        client.close()


def replica_known(sentinel_port: int) -> bool:
    """Whether the sentinel has found the replica it could promote (it learns replicas
    from the primary's INFO, every 10 s): killing the primary before would leave it
    nothing to fail over to."""
    client = redis.Redis(port=sentinel_port, decode_responses=True)
    try:
        replicas = client.sentinel_slaves(SERVICE)
        return any("disconnected" not in str(r.get("flags", "")) for r in replicas)
    finally:
        client.close()


def primary_named(sentinel_port: int) -> int:
    client = redis.Redis(port=sentinel_port)
    try:
        return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])
    finally:
        client.close()


@pytest.fixture(scope="module")
def sentinelled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sentinelled]:
    with sentinel_lab(tmp_path_factory.mktemp("sentinel")) as lab:
        yield lab


@contextlib.contextmanager
def sentinel_lab(tmp: Path) -> Iterator[Sentinelled]:
    """A primary, its replica, a sentinel, the demo upstream, two replicas behind nginx."""
    primary_port, replica_port, sentinel_port, demo_port = (free_port() for _ in range(4))
    conf = tmp / "sentinel.conf"
    conf.write_text(
        SENTINEL_CONF.format(port=sentinel_port, tmp=tmp, service=SERVICE, primary=primary_port)
    )
    replica_of = ("--replicaof", "127.0.0.1", str(primary_port))
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with (
        _process(redis_argv(primary_port, tmp), tmp / "primary.log") as primary,
        _process(redis_argv(replica_port, tmp, *replica_of), tmp / "replica.log") as replica,
        _process([program("redis-sentinel"), str(conf)], tmp / "sentinel.log") as sentinel,
        _process(demo_argv, tmp / "demo.log") as demo,
    ):
        for port, process in ((primary_port, primary), (replica_port, replica)):
            wait_port(port, 10.0, process)
        wait_port(sentinel_port, 10.0, sentinel)
        wait_port(demo_port, 10.0, demo)
        until(lambda: linked(replica_port), 20.0, "the replica never synced")
        until(lambda: replica_known(sentinel_port), 30.0, "the sentinel never found the replica")
        url = f"redis+sentinel://127.0.0.1:{sentinel_port}/{SERVICE}"
        cluster = Cluster(tmp, url, f"http://127.0.0.1:{demo_port}/mcp", free_port())
        with replicas_behind_nginx(cluster, program("nginx"), count=2):
            yield Sentinelled(cluster, primary, primary_port, sentinel_port)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


def success_or_send_again(answer: tuple[int, Any, dict[str, str]]) -> bool:
    status, body, headers = answer
    if status == 200:
        assert "error" not in body, body
        return True
    assert status == 503, (status, body)
    assert "send the same request again" in body["error"]["message"], body
    assert "Retry-After" in headers, headers
    return False


async def test_a_sentinel_failover_loses_no_round_and_no_session(
    sentinelled: Sentinelled, http: aiohttp.ClientSession
) -> None:
    pair: Any = sentinelled  # a, b: what the shared helpers need of a pair
    client: LegacyClient = await session_on_a(pair, http)
    a_id = owner_of_session(client)
    key, state = await greet_first(http, sentinelled.a, 1)
    assert owner_of(state) == a_id
    sentinelled.primary.kill()  # SIGKILL: no goodbye to the sentinel or the replica
    answered = refused = 0
    deadline = time.monotonic() + 90
    promoted = False
    while answered < 6 or not promoted:
        assert time.monotonic() < deadline, f"no failover: {answered} answered, {refused} refused"
        for reply in await asyncio.gather(
            echo_at_b(pair, http, client, 7, "again"),
            greet_first_or_refused(http, sentinelled.b),
        ):
            if success_or_send_again(reply):
                answered += 1
            else:
                refused += 1
        promoted = primary_named(sentinelled.sentinel_port) != sentinelled.primary_port
        await asyncio.sleep(0.2)  # a steady load, not a synchronisation
    finish = await greet_at_b(pair, http, 8, key, state)
    while not success_or_send_again(finish):
        assert time.monotonic() < deadline, finish
        await asyncio.sleep(0.5)
        finish = await greet_at_b(pair, http, 8, key, state)
    assert finish[1]["result"]["content"][0]["text"] == "Hello, Ada!", finish
    again = await greet_at_b(pair, http, 9, key, state)
    assert again[0] in (400, 200) and "error" in again[1], again  # spent: refused
    status, body = await client.echo("after the failover")
    assert status == 200, body


async def greet_first_or_refused(
    http: aiohttp.ClientSession, url: str
) -> tuple[int, Any, dict[str, str]]:
    """A new round's first request: input_required (200) or a 503 to send again."""
    return await post_json(http, url, greet(1), modern_headers("tools/call", "greet_me"))
