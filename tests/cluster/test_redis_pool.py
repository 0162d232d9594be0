"""The Redis store's connection pool against a real redis-server: more operations at
once than it has connections wait their turn; past its timeout one fails (a
ConnectionError the node turns into a 503), never hangs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from gateway.cluster.redis_store import RedisStore
from tests.cluster.test_shared_cache import _redis

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    with _redis(tmp_path) as url:
        yield url


async def test_more_operations_than_connections_wait_their_turn(redis_url: str) -> None:
    store = RedisStore(redis_url, pool_size=4, pool_timeout=10)
    admin = aioredis.Redis.from_url(redis_url)
    try:
        spent = await asyncio.gather(*(store.use_once(f"k{i % 250}", 30) for i in range(500)))
        # Each key spent exactly once, though 500 went at once through 4 connections.
        assert sum(spent) == 250
        clients = await admin.client_list()
        assert sum(1 for c in clients if c["cmd"] != "client|list") <= 4
    finally:
        await admin.aclose()
        await store.close()


async def test_a_store_busy_past_the_pool_timeout_fails_in_bounded_time(redis_url: str) -> None:
    store = RedisStore(redis_url, pool_size=1, pool_timeout=0.2)
    admin = aioredis.Redis.from_url(redis_url)
    try:
        assert await store.use_once("warm", 30)  # the one connection, made
        # Writes wait on Redis for 3 s: one SET holds the one connection meanwhile.
        await admin.client_pause(3000, all=False)
        both = {asyncio.ensure_future(store.use_once(key, 30)): key for key in ("a", "b")}
        done, pending = await asyncio.wait(both, timeout=2, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and len(pending) == 1, "the other one did not fail in time"
        (failed,), (held,) = done, pending
        with pytest.raises(redis.ConnectionError, match="No connection available"):
            failed.result()
        await admin.client_unpause()
        assert await held
        # The refused one never reached Redis: it is not spent, and goes now.
        assert await store.use_once(both[failed], 30)
    finally:
        await admin.aclose()
        await store.close()
