"""A Redis Cluster's faults under load (issue 48, item 4): a master SIGKILLed (its
replica promoted), then a replica stalled for 3 s (SIGSTOP, SIGCONT).

Real processes: six `redis-server` nodes in cluster mode (three masters, a replica
each, a node judged failed after 1 s), the demo upstream, two `gateway serve
--cluster redis+cluster://...` replicas.  The load (tests/cluster/faults.py) starts
rounds at one replica and answers them at the other, and uses a session through the
replica that does not own it.  Each fault must leave: no answer but a success or a
503 to send again, no live owner declared gone, and every finished round's spent
marker in the store (0 spent states lost: each marker was confirmed by the
replica of its shard before its round finished).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
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
from redis.cluster import RedisCluster

from tests.cluster.conftest import Cluster, Replica, _process, program, stop, wait_port
from tests.cluster.faults import Load, Told, marker_of
from tests.e2e.gateway_proc import free_port

pytestmark = pytest.mark.timeout(300)
LOAD_AFTER = 4.0  # seconds of load once the fault is over
STALL_FOR = 3.0
REPLICA_EACH = ("--cluster-replicas", "1", "--cluster-yes")


@dataclass
class Node:
    port: int
    home: Path
    process: Any = None

    def start(self) -> None:
        argv = [program("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--dir", str(self.home), "--cluster-enabled", "yes"]
        argv += ["--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"]
        argv += ["--cluster-port", str(free_port()), "--save", "", "--appendonly", "no"]
        with open(self.home / "redis.log", "ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_port(self.port, 10.0, self.process)

    def info(self) -> dict[str, Any]:
        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            return dict(client.info("replication"))
        finally:
            client.close()


@dataclass
class Lab:
    nodes: list[Node]
    cluster: Cluster

    @property
    def a(self) -> str:
        return self.cluster.replicas[0].base + "/mcp"

    @property
    def b(self) -> str:
        return self.cluster.replicas[1].base + "/mcp"

    def client(self) -> RedisCluster:
        alive = next(n for n in self.nodes if n.process.poll() is None)
        return RedisCluster(host="127.0.0.1", port=alive.port, socket_timeout=5)

    def master_of(self, key: str) -> Node:
        client = self.client()
        try:
            node = client.get_node_from_key(key)
            return next(n for n in self.nodes if n.port == node.port)
        finally:
            client.close()


def _cluster_ok(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=2)
    try:
        return client.cluster("info").get("cluster_state") == "ok"
    except redis.RedisError:
        return False
    finally:
        client.close()


def _until(check: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@contextlib.contextmanager
def six_nodes(tmp: Path) -> Iterator[list[Node]]:
    nodes = [Node(free_port(), tmp / f"node{i}") for i in range(6)]
    try:
        for node in nodes:
            node.home.mkdir()
            node.start()
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        subprocess.run(
            [
                program("redis-cli"),
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for node in nodes:
            _until(lambda n=node: _cluster_ok(n.port), 30, "the cluster never became ok")
        for node in nodes:  # every replica synced: a failover has one to promote
            _until(
                lambda n=node: (
                    n.info().get("role") == "master" or n.info().get("master_link_status") == "up"
                ),
                30,
                "a replica never synced",
            )
        yield nodes
    finally:
        for node in nodes:
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(signal.SIGCONT)
                stop(node.process)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("cluster-failover")
    demo_port = free_port()
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with six_nodes(tmp) as nodes, _process(demo_argv, tmp / "demo.log") as demo:
        wait_port(demo_port, 10.0, demo)
        url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes)
        cluster = Cluster(tmp, url, f"http://127.0.0.1:{demo_port}/mcp", free_port())
        cluster.replicas = [Replica(free_port(), tmp / "unused.log") for _ in range(2)]
        try:
            for replica in cluster.replicas:
                cluster.start(replica)
            yield Lab(nodes, cluster)
        finally:
            for replica in cluster.replicas:
                if replica.process is not None:
                    stop(replica.process)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def lost_markers(lab: Lab, told: Told) -> list[str]:
    client = lab.client()
    try:
        return [state for state in told.finished if not client.exists(marker_of(state))]
    finally:
        client.close()


async def _loaded(lab: Lab, http: aiohttp.ClientSession, fault: Any) -> Told:
    """The load before, during and for a while after ``fault`` (a coroutine that
    returns once the fault is over)."""
    load = Load(http, lab.a, lab.b)
    await load.open_session()
    over: list[float] = []

    async def faulted() -> None:
        await fault()
        over.append(time.monotonic())

    await asyncio.gather(
        faulted(), load.run(lambda: bool(over) and time.monotonic() - over[0] > LOAD_AFTER)
    )
    return load.told


async def test_a_master_killed_loses_no_round_no_session_and_no_spent_state(
    lab: Lab, http: aiohttp.ClientSession
) -> None:
    # The master holding the replicas' registrations: the hardest one to lose.
    victim = lab.master_of("gw:{replicas}:x")

    async def kill() -> None:
        await asyncio.sleep(1.0)  # some rounds finish before the fault
        victim.process.kill()
        others = [n for n in lab.nodes if n is not victim]
        await asyncio.to_thread(
            _until, lambda: all(_cluster_ok(n.port) for n in others), 60, "no failover"
        )

    told = await _loaded(lab, http, kill)
    print(f"master killed: {told.figures()}")
    assert told.wrong == [], told.wrong[:5]
    assert told.finished and told.sessions_used
    lost = lost_markers(lab, told)
    assert lost == [], f"{len(lost)} of {len(told.finished)} finished rounds left no marker"


async def test_a_stalled_replica_holds_rounds_back_and_loses_nothing(
    lab: Lab, http: aiohttp.ClientSession
) -> None:
    replica = next(n for n in lab.nodes if n.process.poll() is None and n.info()["role"] == "slave")

    async def stall() -> None:
        await asyncio.sleep(1.0)
        replica.process.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(STALL_FOR)
        finally:
            replica.process.send_signal(signal.SIGCONT)

    told = await _loaded(lab, http, stall)
    print(f"replica stalled: {told.figures()}")
    assert told.wrong == [], told.wrong[:5]
    lost = lost_markers(lab, told)
    assert lost == [], f"{len(lost)} of {len(told.finished)} finished rounds left no marker"


async def test_a_master_stalled_then_back_keeps_no_spent_state(
    lab: Lab, http: aiohttp.ClientSession
) -> None:
    """Stalled past the node timeout, its replica promoted, then back: until the
    cluster tells it, it is a master that takes writes its resync wipes."""
    victim = lab.master_of("gw:used:" + "0" * 64)
    if victim.process.poll() is not None or victim.info().get("connected_slaves", 0) == 0:
        victim = next(
            n for n in lab.nodes if n.process.poll() is None and n.info().get("connected_slaves")
        )

    heir = next(
        n
        for n in lab.nodes
        if n.process.poll() is None and n.info().get("master_port") == victim.port
    )

    async def stall() -> None:
        await asyncio.sleep(1.0)
        victim.process.send_signal(signal.SIGSTOP)
        try:
            await asyncio.to_thread(
                _until, lambda: heir.info().get("role") == "master", 60, "no failover"
            )
        finally:
            victim.process.send_signal(signal.SIGCONT)
        await asyncio.to_thread(
            _until, lambda: victim.info().get("role") == "slave", 30, "never demoted"
        )

    told = await _loaded(lab, http, stall)
    print(f"master stalled: {told.figures()}")
    assert told.wrong == [], told.wrong[:5]
    lost = lost_markers(lab, told)
    assert lost == [], f"{len(lost)} of {len(told.finished)} finished rounds left no marker"
