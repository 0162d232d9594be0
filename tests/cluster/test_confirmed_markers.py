"""A spent requestState's marker is confirmed by a replica of the store (issue 48,
item 2): a stale primary that took markers its resync then wiped left finished rounds
replayable. Now a round is finished only once a replica of the store holds its
marker (WAIT); unconfirmed, it is a 503 to send again, and sent again once the
replica answers, it finishes, and its replay is refused.

Real processes: a Redis primary and a replica of it (`--replicaof`), the demo
upstream, one `gateway serve --cluster` replica; the store's replica is stalled with
SIGSTOP (it holds its connection, acknowledges nothing).
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

from tests.cluster.client import greet, greet_first, post_json
from tests.cluster.conftest import STATE_KEY, program, stop, wait_port
from tests.e2e.fake_client import modern_headers
from tests.e2e.gateway_proc import RunningGateway, free_port, gateway

pytestmark = pytest.mark.timeout(120)
ADA = {"action": "accept", "content": {"name": "Ada"}}


@dataclass
class Lab:
    gateway: RunningGateway
    replica: subprocess.Popen[bytes]
    primary_port: int


def _redis(port: int, tmp: Path, *more: str) -> subprocess.Popen[bytes]:
    argv = [program("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp), *more]
    with open(tmp / f"redis-{port}.log", "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    wait_port(port, 10.0, process)
    return process


def _wait_replica_attached(port: int) -> None:
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 20
    try:
        # Attached and synced: a replica still loading the first sync acknowledges nothing.
        while client.info("replication").get("slave0", {}).get("state") != "online":
            assert time.monotonic() < deadline, "the store's replica never attached"
            time.sleep(0.05)
    finally:
        client.close()


@contextlib.contextmanager
def _lab(tmp: Path, *primary_settings: str) -> Iterator[Lab]:
    primary_port, replica_port, demo_port = free_port(), free_port(), free_port()
    primary = _redis(primary_port, tmp, *primary_settings)
    replica = _redis(replica_port, tmp, "--replicaof", "127.0.0.1", str(primary_port))
    demo = subprocess.Popen(
        [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(demo_port, 10.0, demo)
        _wait_replica_attached(primary_port)
        cluster = ("--cluster", f"redis://127.0.0.1:{primary_port}/0")
        env = {"GATEWAY_STATE_KEY": STATE_KEY}
        route = f"/mcp=http://127.0.0.1:{demo_port}/mcp"
        with gateway(route, extra=cluster, tmp_path=tmp, env=env, check=False) as running:
            yield Lab(running, replica, primary_port)
    finally:
        demo.kill()
        demo.wait(5)
        for process in (replica, primary):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)  # a stalled one can stop
            stop(process)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with _lab(tmp_path_factory.mktemp("confirmed")) as found:
        yield found


# Redis's own guard against a stale primary (documented in docs/using/replicas.md):
# without a replica acknowledging within 2 s, the primary refuses every write.
STRICT = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2")


@pytest.fixture(scope="module")
def strict_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with _lab(tmp_path_factory.mktemp("strict"), *STRICT) as found:
        yield found


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _answer(
    http: aiohttp.ClientSession, lab: Lab, key: str, state: str
) -> tuple[int, Any, dict[str, str]]:
    body = greet(2, state, {key: ADA})
    return await post_json(http, lab.gateway.url(), body, modern_headers("tools/call", "greet_me"))


async def test_a_round_finishes_only_on_a_marker_a_replica_holds(
    lab: Lab, http: aiohttp.ClientSession
) -> None:
    key, state = await greet_first(http, lab.gateway.url(), 1)
    status, body, _ = await _answer(http, lab, key, state)
    assert status == 200 and body["result"]["content"][0]["text"] == "Hello, Ada!", body

    key, state = await greet_first(http, lab.gateway.url(), 1)
    lab.replica.send_signal(signal.SIGSTOP)  # the store's replica acknowledges nothing
    try:
        status, body, headers = await _answer(http, lab, key, state)
    finally:
        lab.replica.send_signal(signal.SIGCONT)
    assert status == 503, body  # not finished on a marker a failover could lose
    assert body["error"]["code"] == -32000 and "send the same request again" in str(body)
    assert headers.get("Retry-After")
    status, body, _ = await _answer(http, lab, key, state)  # sent again: it finishes
    assert status == 200 and body["result"]["content"][0]["text"] == "Hello, Ada!", body
    status, body, _ = await _answer(http, lab, key, state)  # and is spent
    assert "error" in body or body["result"].get("resultType") != "complete", body


def _refusing_writes(port: int) -> bool:
    """Whether the primary refuses writes now (no replica acknowledged within the lag)."""
    client = redis.Redis(port=port)
    try:
        client.set("probe", b"1")
    except redis.ResponseError as exc:
        return "NOREPLICAS" in str(exc)
    finally:
        client.close()
    return False


async def test_with_min_replicas_to_write_a_refusing_primary_is_a_send_again(
    strict_lab: Lab, http: aiohttp.ClientSession
) -> None:
    """With the primary set to refuse writes while no replica acknowledges, what it
    refuses (a spent marker, a parked call's registration) is a 503 to send again,
    never a 500; sent again once the replica is back, the round finishes once."""
    lab = strict_lab
    key, state = await greet_first(http, lab.gateway.url(), 1)
    lab.replica.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 20
        while not _refusing_writes(lab.primary_port):  # its lag passes 2 s
            assert time.monotonic() < deadline, "the primary never refused a write"
            await asyncio.sleep(0.2)  # polling Redis, bounded by the deadline
        status, body, headers = await _answer(http, lab, key, state)
    finally:
        lab.replica.send_signal(signal.SIGCONT)
    assert status == 503, body
    assert "send the same request again" in str(body) and headers.get("Retry-After")
    deadline = time.monotonic() + 20
    while _refusing_writes(lab.primary_port):  # the replica acknowledges again
        assert time.monotonic() < deadline, "the primary kept refusing writes"
        await asyncio.sleep(0.2)
    status, body, _ = await _answer(http, lab, key, state)
    assert status == 200 and body["result"]["content"][0]["text"] == "Hello, Ada!", body
    status, body, _ = await _answer(http, lab, key, state)  # spent
    assert "error" in body or body["result"].get("resultType") != "complete", body
