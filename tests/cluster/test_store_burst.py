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

from tests.cluster.client import greet, owner_of, post_json
from tests.cluster.conftest import Cluster
from tests.e2e.fake_client import modern_headers

pytestmark = pytest.mark.timeout(300)

# Concurrent requests in the burst: three times redis-py's default pool size.
BURST = 300
# Callers the burst comes from: under each one's parked-call quota (100 by default).
CALLERS = 6
# Parking the calls is not what is tested: at most this many first rounds at once.
PARKING = 32


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


async def _retry(
    http: aiohttp.ClientSession, url: str, i: int, key: str, state: str
) -> tuple[int, Any]:
    """The status and the JSON answer (the text of one that is not JSON: a 500's)."""
    answer = {key: {"action": "accept", "content": {"name": f"Ada{i}"}}}
    message = greet(2 * i + 1, state, answer)
    async with http.post(url, json=message, headers=_headers(i % CALLERS)) as response:
        text = await response.text()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


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
        if status != 200
        or not isinstance(body, dict)
        or body.get("id") != 2 * i + 1
        or body.get("result", {}).get("resultType") != "complete"
        or body["result"]["content"][0]["text"] != f"Hello, Ada{i}!"
    ]
    assert not wrong, f"{len(wrong)} of {BURST} wrong, e.g. {wrong[:3]}"
