"""One spent-state marker on Redis, as :class:`~gateway.cluster.redis_markers.Markers`
needs it: written (``SET NX`` with a value of this call's own, then ``WAIT 1`` on the
same connection), taken back only if it is still this call's (a compare-and-delete:
a replay's marker from an earlier use is never removed), and the questions asked
when no replica confirmed it.  :class:`PrimaryMarker` for one primary (a plain
``redis://`` URL, or behind Sentinel); :class:`SlotMarker` on a Redis Cluster, where
the marker and its ``WAIT`` go to the primary of the marker's slot."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio.cluster import ClusterNode
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import AskError, ConnectionError, MovedError, TimeoutError

from gateway.cluster.redis_cluster import refresh_slots, set_and_wait, slot_primary
from gateway.cluster.redis_markers import CONFIRM_MS

# Deletes KEYS[1] only while it holds ARGV[1] (this call's own marker).
TAKE_BACK = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
    "else return 0 end"
)
# A reply that says the slot map the client holds is out of date.
_MAP_OUT_OF_DATE = (MovedError, AskError, ConnectionError, TimeoutError)


class _Marker:
    def __init__(self, redis: Any, name: str, px: int) -> None:
        self.redis, self.name, self.px = redis, name, px
        self.value = os.urandom(12).hex().encode()

    async def forget(self) -> None:
        await self.redis.eval(TAKE_BACK, 1, self.name, self.value)


class PrimaryMarker(_Marker):
    """A marker on the one primary a plain URL or the sentinels name."""

    def __init__(
        self, redis: Any, name: str, px: int, moved: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(redis, name, px)
        self._moved = moved

    async def write(self, confirm: bool) -> tuple[Any, Any]:
        if not confirm:
            return await self.redis.set(self.name, self.value, nx=True, px=self.px), None
        # One connection for both: WAIT counts the replicas holding its writes.
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.name, self.value, nx=True, px=self.px)
        pipe.execute_command("WAIT", 1, CONFIRM_MS)
        spent, held_by = await pipe.execute(raise_on_error=False)
        return spent, held_by

    async def replicas(self) -> int | None:
        """The primary's attached replicas; None when it is no longer the primary
        (the sentinels name another, or it says it is a replica)."""
        pool = self._sentinel_pool()
        if pool is not None and pool.master_address is not None:
            named = await pool.sentinel_manager.discover_master(pool.service_name)
            if tuple(named) != tuple(pool.master_address):
                return None
        info = await self.redis.info("replication")
        return int(info.get("connected_slaves", 0)) if info.get("role") == "master" else None

    async def alone(self) -> bool:
        """No failover can promote another server: the sentinels know no healthy
        replica (a plain URL: there is no failover)."""
        pool = self._sentinel_pool()
        if pool is None:
            return True
        return not await pool.sentinel_manager.discover_slaves(pool.service_name)

    async def moved(self) -> None:
        await self._moved()

    def _sentinel_pool(self) -> SentinelConnectionPool | None:
        pool = getattr(self.redis, "connection_pool", None)
        return pool if isinstance(pool, SentinelConnectionPool) else None


class SlotMarker(_Marker):
    """A marker on the primary of its slot in a Redis Cluster."""

    def __init__(self, redis: Any, name: str, px: int, node: ClusterNode) -> None:
        super().__init__(redis, name, px)
        self.node = node

    @classmethod
    async def at(cls, redis: Any, name: str, px: int) -> SlotMarker:
        return cls(redis, name, px, await slot_primary(redis, name))

    async def write(self, confirm: bool) -> tuple[Any, Any]:
        wait = CONFIRM_MS if confirm else None
        try:
            spent, held_by = await set_and_wait(self.node, self.name, self.value, self.px, wait)
        except _MAP_OUT_OF_DATE:
            await refresh_slots(self.redis)  # the next marker goes where the slot is now
            raise
        if isinstance(spent, _MAP_OUT_OF_DATE):
            await refresh_slots(self.redis)
        return spent, held_by

    async def replicas(self) -> int | None:
        await refresh_slots(self.redis)
        now = await slot_primary(self.redis, self.name)
        if now.name != self.node.name:
            return None
        info = await self.redis.info("replication", target_nodes=now)
        return int(info.get("connected_slaves", 0)) if info.get("role") == "master" else None

    async def alone(self) -> bool:
        """Another primary of the cluster (not this one, which may be a stale one that
        came back) says this node is a healthy primary with no healthy replica."""
        for other in self.redis.get_primaries():
            if other.name == self.node.name:
                continue
            try:
                nodes = await self.redis.execute_command("CLUSTER NODES", target_nodes=other)
            except Exception:
                continue  # that one does not answer: another may
            return alone_in(nodes, self.node.name)
        return False  # nobody else could say: not safe to go alone

    async def moved(self) -> None:
        await refresh_slots(self.redis)


def alone_in(nodes: Any, name: str) -> bool:
    """From a ``CLUSTER NODES`` reply (redis-py's parsed form: ``host:port`` to the
    node's fields), whether ``name`` is a healthy primary without a healthy replica."""
    if not isinstance(nodes, dict):
        return False
    me = nodes.get(name)
    if not isinstance(me, dict):
        return False
    flags = str(me.get("flags", ""))
    if "master" not in flags or "fail" in flags:
        return False
    node_id = me.get("node_id")
    return not any(
        isinstance(other, dict)
        and other.get("master_id") == node_id
        and "fail" not in str(other.get("flags", ""))
        for other in nodes.values()
    )
