"""A primary that stalls and comes back keeps no spent state (issue 48, items 2 and 3).

The primary is SIGSTOPped under a load of input_required rounds, the sentinel
promotes its replica, and the old primary is SIGCONTed: it is a writable primary
again until the sentinel demotes it, and its resync then wipes what it took.  Before,
the replicas' idle connections stayed on it and rounds finished there: 118 to 282
spent-state markers a run were missing on the new primary.  Now each heartbeat asks
the sentinels which server is the primary and drops connections to any other, and a
marker needs a replica's acknowledgement (a stale primary has none): every round
that finished left its marker on the new primary.

Real processes: as tests/cluster/test_sentinel.py (its set-up, a module of its own).
With one sentinel polling every second, the old primary here is demoted within about
a second of coming back, and this run did not lose markers at 4c32d9d either (204
rounds, 204 markers): it guards the outcome under a stall and a failover; the
mechanism that keeps a stale primary from holding a marker is shown directly by
tests/cluster/test_confirmed_markers.py (a replica that acknowledges nothing).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import redis

from tests.cluster.client import greet, greet_first, post_json
from tests.cluster.test_owner_unknown import greet_answer
from tests.cluster.test_sentinel import (
    Sentinelled,
    primary_named,
    sentinel_lab,
    success_or_send_again,
)
from tests.e2e.fake_client import modern_headers

pytestmark = pytest.mark.timeout(240)
STALE_FOR = 6.0  # seconds of load after the old primary is back


@pytest.fixture(scope="module")
def sentinelled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sentinelled]:
    with sentinel_lab(tmp_path_factory.mktemp("stale")) as lab:
        yield lab


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


def used_markers(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        return sum(1 for _ in client.scan_iter(match="gw:used:*", count=1000))
    finally:
        client.close()


def demoted(port: int) -> bool:
    client = redis.Redis(port=port)
    try:
        info = client.info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"
    finally:
        client.close()


async def one_round(http: aiohttp.ClientSession, url: str) -> bool:
    """A round, first request and answer: True when it finished (each request a
    success or a 503 to send again, never anything else)."""
    headers = modern_headers("tools/call", "greet_me")
    first = await post_json(http, url, greet(1), headers)
    if not success_or_send_again(first):
        return False
    result = first[1]["result"]
    (key,) = result["inputRequests"]
    answer = await post_json(http, url, greet_answer(2, key, result["requestState"]), headers)
    if not success_or_send_again(answer):
        return False
    assert answer[1]["result"]["content"][0]["text"] == "Hello, Ada!", answer
    return True


async def load(http: aiohttp.ClientSession, lab: Sentinelled, until: Any) -> int:
    finished = 0
    while not until():
        done = await asyncio.gather(one_round(http, lab.a), one_round(http, lab.b))
        finished += sum(done)
    return finished


async def test_a_stale_primary_keeps_no_spent_state(
    sentinelled: Sentinelled, http: aiohttp.ClientSession
) -> None:
    lab, old = sentinelled, sentinelled.primary_port
    await greet_first(http, lab.a, 1)  # warm: both replicas' connections are open
    await one_round(http, lab.b)
    before = used_markers(old)
    deadline = time.monotonic() + 120
    lab.primary.send_signal(signal.SIGSTOP)
    try:
        finished = await load(
            http,
            lab,
            lambda: primary_named(lab.sentinel_port) != old or time.monotonic() > deadline,
        )
        new = primary_named(lab.sentinel_port)
        assert new != old, "no failover"
    finally:
        lab.primary.send_signal(signal.SIGCONT)
    back = time.monotonic()
    finished += await load(http, lab, lambda: time.monotonic() - back > STALE_FOR)
    while not demoted(old):
        assert time.monotonic() < deadline, "the old primary was never demoted"
        await asyncio.sleep(0.2)  # the sentinel's pace, not a synchronisation
    assert finished > 0
    lost = finished - (used_markers(new) - before)
    assert lost <= 0, f"{lost} of {finished} finished rounds left no marker on the new primary"
