"""A store on a Redis Cluster (or Valkey's): ``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]``.

The nodes given are where the client starts: it learns the cluster's slots from any
of them and follows MOVED/ASK redirections and failovers itself (redis-py's
``RedisCluster``).  Keys that one command needs together share a hash slot (a hash
tag, the part in ``{}``): every replica's registration (one SCAN and MGET reads them
all), and every rate-limit bucket of one route (one Lua script takes a call's tokens
from all its buckets at once).  The other keys stand alone and spread over the
cluster's slots.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ResponseError

from gateway.core.store_urls import ClusterUrl


def cluster_client(url: str, pool_size: int, socket_timeout: float) -> Any:
    """The client of the cluster ``url`` names (no I/O until the first command);
    ``pool_size`` connections to each node at most."""
    parsed = ClusterUrl.parse(url)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in parsed.nodes],
        password=parsed.password,
        max_connections=pool_size,
        socket_connect_timeout=socket_timeout,
        socket_timeout=socket_timeout,
    )


async def slot_primary(client: RedisCluster, key: str) -> ClusterNode:
    """The primary of ``key``'s slot, as the client's map of slots says."""
    if not client.nodes_manager.slots_cache:  # no command sent yet: read the map first
        await client.initialize()
    node = client.get_node_from_key(key)
    if node is None:
        raise ConnectionError(f"no node of the Redis Cluster serves the slot of {key!r}")
    return node


async def refresh_slots(client: RedisCluster) -> None:
    """Read the cluster's map of slots again (a primary changed)."""
    await client.nodes_manager.initialize()


async def set_and_wait(
    node: ClusterNode, key: str, value: bytes, px: int, wait_ms: int | None
) -> tuple[Any, Any]:
    """``SET key value NX PX px`` then, when ``wait_ms`` is given, ``WAIT 1 wait_ms`` on
    one connection to ``node`` (WAIT counts the replicas holding that connection's
    writes); the two replies, an error reply as its exception."""
    commands: list[tuple[Any, ...]] = [("SET", key, value, "NX", "PX", px)]
    if wait_ms is not None:
        commands.append(("WAIT", 1, wait_ms))
    connection = node.acquire_connection()
    try:
        await node.disconnect_if_needed(connection)
        await connection.send_packed_command(connection.pack_commands(commands))
        replies = [await _reply(connection) for _ in commands]
    except BaseException:
        await connection.disconnect()  # its replies are out of step now
        raise
    finally:
        node.release(connection)
    spent = replies[0] if isinstance(replies[0], Exception) else replies[0] is not None
    return spent, replies[1] if wait_ms is not None else None


async def _reply(connection: Any) -> Any:
    try:
        return await connection.read_response()
    except ResponseError as exc:  # MOVED, READONLY, ...: this reply only
        return exc
