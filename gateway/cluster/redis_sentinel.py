"""A Redis store behind Sentinel: ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``.

The sentinels say which server is the primary of SERVICE; redis-py's Sentinel-managed
connections ask them again whenever a connection to the primary fails, so a
failover (the primary lost, a replica promoted) is followed without a restart.
Commands in the failover window fail like any store outage: the requests that need
them get a 503 to send again, and the replica's own work goes on.  The pool is a
waiting one, as for a plain ``redis://`` store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

SCHEMES = ("redis+sentinel://", "valkey+sentinel://")


class WaitingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel-managed connections, in a pool where a command past its size waits
    its turn (``timeout``) instead of failing at once."""


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl:
        scheme = next((s for s in SCHEMES if url.startswith(s)), None)
        if scheme is None:
            raise ValueError(f"not a Sentinel URL: {url!r}")
        rest = url[len(scheme) :]
        userinfo, _, rest = rest.rpartition("@")
        hosts, _, path = rest.partition("/")
        parts = [p for p in path.split("/") if p]
        if not parts:
            raise ValueError("a Sentinel URL names its service: redis+sentinel://HOST:PORT/SERVICE")
        sentinels = tuple(_host_port(h) for h in hosts.split(",") if h)
        if not sentinels:
            raise ValueError("a Sentinel URL names at least one sentinel HOST:PORT")
        password = unquote(userinfo.partition(":")[2]) or None if userinfo else None
        db = int(parts[1]) if len(parts) > 1 else 0
        return cls(sentinels, unquote(parts[0]), db, password)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


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
