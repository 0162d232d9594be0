"""A Sentinel primary SIGKILLed under the failover suite's load (issue 48, item 4).

Real processes: as tests/cluster/test_sentinel.py (a primary, its replica, one
sentinel, the demo upstream, two gateway replicas), a module of its own.  The load of
tests/cluster/faults.py runs before, during and after the kill: every answer a
success or a 503 to send again, no live owner declared gone, and every round that
finished left its spent marker on the primary the sentinel promoted.  The promoted
primary has no replica of its own (its old primary is dead): markers go on there,
unconfirmed, rather than every round being refused until a replica attaches.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import redis

from tests.cluster.faults import Load, marker_of
from tests.cluster.test_sentinel import Sentinelled, primary_named, sentinel_lab

pytestmark = pytest.mark.timeout(240)
LOAD_AFTER = 4.0  # seconds of load once the new primary is named


@pytest.fixture(scope="module")
def sentinelled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sentinelled]:
    with sentinel_lab(tmp_path_factory.mktemp("killed")) as lab:
        yield lab


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_a_killed_primary_loses_no_round_no_session_and_no_spent_state(
    sentinelled: Sentinelled, http: aiohttp.ClientSession
) -> None:
    lab, old = sentinelled, sentinelled.primary_port
    load = Load(http, lab.a, lab.b)
    await load.open_session()
    promoted: list[float] = []

    async def kill() -> None:
        await asyncio.sleep(1.0)  # some rounds finish before the fault
        lab.primary.kill()  # SIGKILL: no goodbye to the sentinel or the replica
        deadline = time.monotonic() + 90
        while primary_named(lab.sentinel_port) == old:
            assert time.monotonic() < deadline, "no failover"
            await asyncio.sleep(0.2)  # the sentinel's pace, not a synchronisation
        promoted.append(time.monotonic())

    await asyncio.gather(
        kill(), load.run(lambda: bool(promoted) and time.monotonic() - promoted[0] > LOAD_AFTER)
    )
    told = load.told
    print(f"sentinel primary killed: {told.figures()}")
    assert told.wrong == [], told.wrong[:5]
    assert told.finished and told.sessions_used
    client = redis.Redis(port=primary_named(lab.sentinel_port))
    try:
        lost = [state for state in told.finished if not client.exists(marker_of(state))]
    finally:
        client.close()
    # A marker the old primary took in its last moment, before its replica had it, is
    # what asynchronous replication can lose; confirmed markers never are.
    assert lost == [], f"{len(lost)} of {len(told.finished)} finished rounds left no marker"
