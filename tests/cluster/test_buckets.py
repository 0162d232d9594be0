"""Rate limits' token buckets in the cluster stores: Redis (a real redis-server, the
Lua script) and the directory store of --workers, each taking all or nothing and
atomically when many take at once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from gateway.cluster.filestore import FileStore, _safe
from gateway.cluster.redis_store import RedisStore
from gateway.policy import Rate
from tests.cluster.test_shared_cache import _redis

pytestmark = pytest.mark.timeout(60)

# No refill worth counting while a test runs: what is admitted is the burst.
SLOW = Rate.parse("1/h", 10)


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    with _redis(tmp_path) as url:
        yield url


async def test_redis_buckets_take_a_burst_then_wait(redis_url: str) -> None:
    store = RedisStore(redis_url)
    try:
        rate = Rate.parse("1/m", 3)
        taken = [await store.take_tokens([("p:alice", rate)]) for _ in range(4)]
        assert [which for _, which in taken] == [-1, -1, -1, 0]
        assert 59.0 < taken[3][0] <= 60.0
        assert (await store.take_tokens([("p:bob", rate)]))[1] == -1
    finally:
        await store.close()


async def test_redis_buckets_are_all_or_nothing_and_expire_once_full(redis_url: str) -> None:
    store = RedisStore(redis_url)
    client = redis.Redis.from_url(redis_url)
    try:
        caller, tool = ("p:alice", Rate.parse("1/m", 5)), ("t:alice:search", Rate.parse("1/m", 1))
        assert await store.take_tokens([caller, tool]) == (0.0, -1)
        wait, which = await store.take_tokens([caller, tool])
        assert which == 1 and 59.0 < wait <= 60.0
        # The refused take cost the caller nothing: 4 of its 5 tokens are left.
        assert [(await store.take_tokens([caller]))[1] for _ in range(5)] == [-1] * 4 + [0]
        ttl = client.pttl("gw:rate:p:alice")
        assert 0 < ttl <= 5 * 60_000 + 1000  # gone once it would be full again
        assert 0 < client.pttl("gw:rate:t:alice:search") <= 60_000 + 1000
    finally:
        client.close()
        await store.close()


async def test_replicas_taking_at_once_share_one_bucket(redis_url: str) -> None:
    """Three stores (three replicas' clients), 60 takes at once: the burst, no more."""
    stores = [RedisStore(redis_url) for _ in range(3)]
    try:
        takes = [stores[n % 3].take_tokens([("p:mallory", SLOW)]) for n in range(60)]
        taken = await asyncio.gather(*takes)
        assert sum(which < 0 for _, which in taken) == SLOW.burst
    finally:
        for store in stores:
            await store.close()


async def test_a_flood_of_takes_is_sent_in_batches(redis_url: str) -> None:
    """1,000 takes at once from one replica: one connection, a few script runs (redis-py
    refuses a 101st connection of its pool: taken one by one they would fail), the
    burst and no more admitted, and a caller that gives up does not hold the others."""
    store = RedisStore(redis_url)
    client = redis.Redis.from_url(redis_url)
    try:
        runs = int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
        gave_up = asyncio.ensure_future(store.take_tokens([("p:quitter", SLOW)]))
        gave_up.cancel()
        takes = [store.take_tokens([("p:flood", SLOW)]) for _ in range(1000)]
        taken = await asyncio.gather(*takes)
        refused = [(wait, which) for wait, which in taken if which >= 0]
        assert len(refused) == len(taken) - SLOW.burst
        assert all(which == 0 and wait > 0 for wait, which in refused)
        stats = client.info("commandstats")
        sent = int(stats["cmdstat_evalsha"]["calls"]) - runs
        assert 1 <= sent <= 20, sent
        assert client.info("clients")["connected_clients"] <= 3  # this test's two, at most
    finally:
        client.close()
        await store.close()


async def test_directory_buckets_are_shared_by_the_workers_of_one_machine(tmp_path: Path) -> None:
    """Eight workers' stores on one directory, each in a thread of its own, 20 takes
    each: flock keeps each read-and-rewrite whole, so exactly the burst goes."""
    admitted: list[int] = []

    def worker() -> None:
        store = FileStore(tmp_path)

        async def takes() -> int:
            results = [await store.take_tokens([("p:mallory", SLOW)]) for _ in range(20)]
            return sum(which < 0 for _, which in results)

        admitted.append(asyncio.run(takes()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(admitted) == SLOW.burst
    store = FileStore(tmp_path)
    assert (await store.take_tokens([("p:other", SLOW)]))[1] == -1


async def test_directory_buckets_full_again_are_swept(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    fast = Rate.parse("1000/s", 1)
    slow = Rate.parse("1/h", 1)
    for n in range(300):  # 300 invented callers, each bucket full again within 1 ms
        await store.take_tokens([(f"p:{n}", fast)])
    await store.take_tokens([("p:steady", slow)])
    store._sweep_buckets(now=time.time() + 1)  # a second later (the store's wall clock)
    assert [path.name for path in (tmp_path / "buckets").iterdir()] == [_safe("p:steady")]
