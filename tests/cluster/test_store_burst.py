"""A burst of store operations on one replica: more at once than the Redis client's
connection pool holds (redis-py's default is 100 connections).  Every request of
the burst must get exactly one correct answer: the burst waits its turn for a
connection instead of failing.

Real processes: redis-server, three `gateway serve --cluster` replicas (nginx in
front, unused here: the requests go straight to the replica under test)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from tests.cluster.client import greet, owner_of, post_json
from tests.cluster.conftest import Cluster, Replica, stop
from tests.e2e.fake_client import modern_headers
from tests.e2e.gateway_proc import bad_log_lines, free_port

pytestmark = pytest.mark.timeout(300)

# Concurrent requests in the burst: three times redis-py's default pool size.
BURST = 300
# Callers the burst comes from: under each one's parked-call quota (100 by default).
CALLERS = 6
# Parking the calls is not what is tested: at most this many first rounds at once.
PARKING = 32
# The slow-store test: retries at once, and how long Redis holds writes (ms).
SLOW_BURST = 8
PAUSE_MS = 3000


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # No bound on connections: the burst reaches the replica all at once.
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


def _headers(caller: int) -> dict[str, str]:
    return {**modern_headers("tools/call", "greet_me"), "Authorization": f"Bearer burst-{caller}"}


async def _park(http: aiohttp.ClientSession, url: str, i: int, gate: asyncio.Semaphore) -> Any:
    async with gate:
        status, body, _ = await post_json(http, url, greet(2 * i), _headers(i % CALLERS))
    assert status == 200, body
    result = body["result"]
    assert result["resultType"] == "input_required", body
    (key,) = result["inputRequests"]
    return key, result["requestState"]


async def _answer(
    http: aiohttp.ClientSession, url: str, i: int, key: str, state: str
) -> tuple[int, Any, dict[str, str]]:
    """The status, the JSON answer (the text of one that is not JSON: a 500's) and
    the headers."""
    answer = {key: {"action": "accept", "content": {"name": f"Ada{i}"}}}
    message = greet(2 * i + 1, state, answer)
    async with http.post(url, json=message, headers=_headers(i % CALLERS)) as response:
        text = await response.text()
    try:
        body = json.loads(text)
    except ValueError:
        body = text
    return response.status, body, dict(response.headers)


async def _retry(
    http: aiohttp.ClientSession, url: str, i: int, key: str, state: str
) -> tuple[int, Any]:
    status, body, _ = await _answer(http, url, i, key, state)
    return status, body


def _resumed(i: int, status: int, body: Any) -> bool:
    """Whether the retry of call ``i`` got its greeting."""
    return (
        status == 200
        and isinstance(body, dict)
        and body.get("id") == 2 * i + 1
        and body.get("result", {}).get("resultType") == "complete"
        and body["result"]["content"][0]["text"] == f"Hello, Ada{i}!"
    )


@pytest.mark.parametrize("entry", ["owner", "other"])
async def test_a_burst_of_resumed_calls_is_answered_in_full(
    cluster: Cluster, http: aiohttp.ClientSession, entry: str
) -> None:
    """``BURST`` parked calls on one replica, all resumed at once: each resumption
    spends its requestState in Redis on the owner (``use_once``); sent to another
    replica, each is first looked up there too (the owner's registry entry), then
    relayed."""
    owner, other = cluster.replicas[0], cluster.replicas[1]
    gate = asyncio.Semaphore(PARKING)
    parked = await asyncio.gather(
        *(_park(http, owner.base + "/mcp", i, gate) for i in range(BURST))
    )
    assert len({owner_of(state) for _, state in parked}) == 1
    target = (owner if entry == "owner" else other).base + "/mcp"
    answers = await asyncio.gather(
        *(_retry(http, target, i, key, state) for i, (key, state) in enumerate(parked))
    )
    wrong = [
        (i, status, body)
        for i, (status, body) in enumerate(answers)
        if not _resumed(i, status, body)
    ]
    assert not wrong, f"{len(wrong)} of {BURST} wrong, e.g. {wrong[:3]}"


async def test_a_store_slow_past_the_pool_timeout_is_a_503_to_send_again(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    """A replica with 2 connections to Redis and 0.3 s to wait for one; Redis holds
    writes for 3 s.  The retries that get no connection in time are refused at once
    with a 503 in the client's revision (Retry-After), not spent: sent again once
    Redis answers, each gets its greeting; the others wait for Redis and succeed."""
    small = Replica(free_port(), cluster.tmp / "unused.log")
    cluster.start(small, ["--cluster-pool", "2"], {"GATEWAY_CLUSTER_POOL_TIMEOUT": "0.3"})
    try:
        url = small.base + "/mcp"
        gate = asyncio.Semaphore(PARKING)
        parked = await asyncio.gather(*(_park(http, url, i, gate) for i in range(SLOW_BURST)))
        admin = aioredis.Redis.from_url(cluster.redis_url)
        try:
            await admin.client_pause(PAUSE_MS, all=False)  # writes wait; reads go on
            arrived: list[int] = []  # the calls, in the order their answers came
            pending = []
            for i, (key, state) in enumerate(parked):
                future = asyncio.ensure_future(_answer(http, url, i, key, state))
                future.add_done_callback(lambda _, i=i: arrived.append(i))
                pending.append(future)
            async with asyncio.timeout(30):
                await asyncio.gather(*pending)
        finally:
            await admin.aclose()
        answers = [future.result() for future in pending]
        refused = [i for i, (status, _, _) in enumerate(answers) if status == 503]
        for i in refused:
            _, body, headers = answers[i]
            assert body["id"] == 2 * i + 1 and body["error"]["code"] == -32000, body
            assert "send the same request again" in body["error"]["message"], body
            assert headers.get("Retry-After") == "1", headers
        resumed = [i for i, (status, body, _) in enumerate(answers) if _resumed(i, status, body)]
        assert sorted(refused + resumed) == list(range(SLOW_BURST)), answers
        assert refused and resumed, answers
        # Refused while Redis still held the writes: none waited for it.
        assert set(arrived[: len(refused)]) == set(refused), arrived
        again = await asyncio.gather(*(_retry(http, url, i, *parked[i]) for i in refused))
        assert all(_resumed(i, *answer) for i, answer in zip(refused, again, strict=True)), again
    finally:
        stop(small.process)
    assert not bad_log_lines(small.log()), small.log()
