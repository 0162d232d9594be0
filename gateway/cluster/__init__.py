"""Several replicas as one gateway: a shared store, ownership, relaying, drain.

Imported only when a cluster is configured (``--cluster`` or ``--workers``).
"""

from __future__ import annotations

from gateway.cluster.store import POOL_SIZE, POOL_TIMEOUT, ClusterStore, MemoryStore, Replica

__all__ = ["REDIS_SCHEMES", "ClusterStore", "MemoryStore", "Replica", "open_store"]
# Redis (or Valkey) stores: one server, a primary found through Sentinel, a cluster.
REDIS_SCHEMES = (
    "redis://",
    "rediss://",
    "unix://",
    "valkey://",
    "redis+sentinel://",
    "valkey+sentinel://",
    "redis+cluster://",
    "valkey+cluster://",
)


def open_store(
    url: str,
    pool_size: int = POOL_SIZE,
    pool_timeout: float = POOL_TIMEOUT,
    confirm: bool = True,
) -> ClusterStore:
    """``redis://HOST:PORT/DB`` (or ``rediss://``, ``unix://``, through Sentinel:
    ``redis+sentinel://HOST:PORT[,HOST:PORT]/SERVICE[/DB]``, or a Redis Cluster:
    ``redis+cluster://HOST:PORT[,HOST:PORT]``), ``file:///DIR`` (one
    machine's workers) or ``memory:`` (this process only).  ``pool_size`` and
    ``pool_timeout``: a Redis store's connections; ``confirm``: spent-state markers
    confirmed by a replica of the store (see :mod:`.redis_store`)."""
    if url.startswith(REDIS_SCHEMES):
        from gateway.cluster.redis_store import RedisStore  # the optional extra

        url = url.replace("valkey://", "redis://", 1)
        return RedisStore(url, pool_size, pool_timeout, confirm)
    if url.startswith("file://"):
        from gateway.cluster.filestore import FileStore

        return FileStore(url[len("file://") :])
    if url == "memory:":
        return MemoryStore()
    raise ValueError(f"unknown cluster store {url!r} (redis://HOST:PORT/DB or file:///DIR)")
