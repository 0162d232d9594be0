"""Several replicas as one gateway: a shared store, ownership, relaying, drain.

Imported only when a cluster is configured (``--cluster`` or ``--workers``).
"""

from __future__ import annotations

from gateway.cluster.store import ClusterStore, MemoryStore, Replica

__all__ = ["ClusterStore", "MemoryStore", "Replica", "open_store"]


def open_store(url: str) -> ClusterStore:
    """``redis://HOST:PORT/DB`` (or ``rediss://``, ``unix://``), ``file:///DIR`` (one
    machine's workers) or ``memory:`` (this process only)."""
    if url.startswith(("redis://", "rediss://", "unix://", "valkey://")):
        from gateway.cluster.redis_store import RedisStore  # the optional extra

        return RedisStore(url.replace("valkey://", "redis://", 1))
    if url.startswith("file://"):
        from gateway.cluster.filestore import FileStore

        return FileStore(url[len("file://") :])
    if url == "memory:":
        return MemoryStore()
    raise ValueError(f"unknown cluster store {url!r} (redis://HOST:PORT/DB or file:///DIR)")
