"""A Redis store behind Sentinel: ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``.

The sentinels say which server is the primary of SERVICE; redis-py's Sentinel-managed
connections ask them again whenever a connection to the primary fails, so a
failover (the primary lost, a replica promoted) is followed without a restart.
Commands in the failover window fail like any store outage: the requests that need
them get a 503 to send again, and the replica's own work goes on.  The pool is a
waiting one, as for a plain ``redis://`` store.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from gateway.core.store_urls import SentinelUrl


class WaitingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel-managed connections, in a pool where a command past its size waits
    its turn (``timeout``) instead of failing at once."""


def sentinel_client(url: str, pool_size: int, pool_timeout: float, timeout: float) -> Any:
    """A redis-py client of the primary the sentinels name."""
    parsed = SentinelUrl.parse(url)
    sentinel = Sentinel(
        list(parsed.sentinels),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    return sentinel.master_for(
        parsed.service,
        connection_pool_class=WaitingSentinelPool,
        max_connections=pool_size,
        timeout=pool_timeout,
        db=parsed.db,
        password=parsed.password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
