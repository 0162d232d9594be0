"""The store on Redis (or Valkey): what replicas on several machines share.

Imported only in cluster mode with a ``redis://`` URL: without ``--cluster``
the ``redis`` client is never imported (it is the optional ``cluster`` extra).

The connections are a waiting pool: past ``pool_size`` commands at once, a command
waits its turn up to ``pool_timeout`` seconds for a connection,
then raises redis-py's ``ConnectionError``.  (redis-py's default pool refuses a
command past its size at once, ``MaxConnectionsError``: a burst of requests that
each need the store failed beyond it.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
import structlog
from redis.asyncio.sentinel import SentinelConnectionPool

from gateway.cluster.redis_buckets import RedisBuckets
from gateway.cluster.redis_cluster import cluster_client
from gateway.cluster.redis_marker_stores import PrimaryMarker, SlotMarker
from gateway.cluster.redis_markers import Markers
from gateway.cluster.redis_sentinel import sentinel_client
from gateway.cluster.store import POOL_SIZE, POOL_TIMEOUT, Replica
from gateway.core.jsonrpc import load_object
from gateway.core.store_urls import CLUSTER_SCHEMES, SENTINEL_SCHEMES
from gateway.policy import Limit, Taken

log = structlog.get_logger(__name__)

PREFIX = "gw:"
# How long connecting and each command may take (seconds).
SOCKET_TIMEOUT = 5.0


class RedisStore:
    """Keys: ``gw:replica:<id>`` (expiring: the heartbeat; on a Redis Cluster
    ``gw:{replicas}:<id>``, one slot for all), ``gw:used:<digest>``
    (SET NX with the state's lifetime), ``gw:verdict:<route>``,
    ``gw:result:<route digest>:<call digest>`` (expiring with the result's ttlMs),
    ``gw:rate:<route digest>:<p|t>:<caller digest>`` (a token bucket: a hash of its
    tokens and when they were counted, expiring once full again)."""

    def __init__(
        self,
        url: str,
        pool_size: int = POOL_SIZE,
        pool_timeout: float = POOL_TIMEOUT,
        confirm: bool = True,
    ) -> None:
        self.url = url
        # Spent-state markers confirmed by a replica (see :mod:`.redis_markers`).
        self._markers = Markers(confirm)
        # On a Redis Cluster the registrations share one hash slot (read together).
        slotted = self._slotted = url.startswith(CLUSTER_SCHEMES)
        self._replicas = f"{PREFIX}{{replicas}}:" if slotted else f"{PREFIX}replica:"
        if slotted:
            self._redis: Any = cluster_client(url, pool_size, SOCKET_TIMEOUT)
        elif url.startswith(SENTINEL_SCHEMES):
            self._redis = sentinel_client(url, pool_size, pool_timeout, SOCKET_TIMEOUT)
        else:
            pool = aioredis.BlockingConnectionPool.from_url(
                url,
                max_connections=pool_size,
                timeout=pool_timeout,
                socket_connect_timeout=SOCKET_TIMEOUT,
                socket_timeout=SOCKET_TIMEOUT,
            )
            self._redis = aioredis.Redis.from_pool(pool)
        self._buckets = RedisBuckets(self._redis, f"{PREFIX}rate:", slotted=slotted)

    async def ping(self) -> None:
        await self._redis.ping()

    async def register(self, replica: Replica, ttl: float) -> bool:
        # SET ... GET: the write says what it replaced, so a heartbeat that finds its
        # own key gone learns the store forgot (restarted empty, or failed over to a
        # replica that never had it), in the same round trip.
        key = self._replicas + replica.id
        return await self._redis.set(key, replica.dump(), px=_ms(ttl), get=True) is not None

    async def follow_primary(self) -> bool:
        """Behind Sentinel: the primary the sentinels name now; when it is not the one
        the pool's connections were made to (a stalled primary that came back still
        a primary, until the sentinels demote it), every connection is dropped, so
        no heartbeat or marker goes on to it past this heartbeat.  Whether it moved."""
        pool = getattr(self._redis, "connection_pool", None)  # none on a Redis Cluster
        if not isinstance(pool, SentinelConnectionPool):
            return False
        known = pool.master_address
        named = await pool.sentinel_manager.discover_master(pool.service_name)
        if known is None or tuple(named) == tuple(known):
            return False
        pool.master_address = named
        await pool.disconnect(inuse_connections=True)
        self._markers.moved()
        log.warning("the cluster store's primary changed: connections moved to it")
        return True

    async def deregister(self, replica_id: str) -> None:
        await self._redis.delete(self._replicas + replica_id)

    async def replica(self, replica_id: str) -> Replica | None:
        raw = await self._redis.get(self._replicas + replica_id)
        return None if raw is None else Replica.load(raw)

    async def replicas(self) -> list[Replica]:
        keys = [key async for key in self._redis.scan_iter(match=self._replicas + "*")]
        if not keys:
            return []
        found = [Replica.load(raw) for raw in await self._redis.mget(keys) if raw is not None]
        return [replica for replica in found if replica is not None]

    async def use_once(self, key: str, ttl: float) -> bool:
        name = f"{PREFIX}used:{key}"
        if self._slotted:
            slot = await SlotMarker.at(self._redis, name, _ms(ttl))
            return await self._markers.spend(slot.node.name, slot)
        return await self._markers.spend("", PrimaryMarker(self._redis, name, _ms(ttl), self._move))

    async def _move(self) -> None:
        if not await self.follow_primary():
            pool = getattr(self._redis, "connection_pool", None)
            if pool is not None:
                await pool.disconnect(inuse_connections=True)

    async def verdict(self, route: str) -> dict[str, Any] | None:
        return load_object(await self._redis.get(f"{PREFIX}verdict:{route}"))

    async def put_verdict(self, route: str, verdict: dict[str, Any], ttl: float) -> None:
        await self._redis.set(f"{PREFIX}verdict:{route}", orjson.dumps(verdict), px=_ms(ttl))

    async def result(self, key: str) -> bytes | None:
        raw = await self._redis.get(f"{PREFIX}result:{key}")
        return bytes(raw) if raw is not None else None

    async def put_result(self, key: str, raw: bytes, ttl: float) -> None:
        await self._redis.set(f"{PREFIX}result:{key}", raw, px=_ms(ttl))

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        """One token from every bucket of ``limits``, or none, atomically for the whole
        cluster (see :mod:`gateway.cluster.redis_buckets`)."""
        return await self._buckets.take(limits)

    async def close(self) -> None:
        await self._redis.aclose()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
