"""How a Sentinel and a Redis Cluster store URL are read: one reading for the settings'
check (gateway/config/store_url.py) and the store that connects
(gateway/cluster/redis_sentinel.py, redis_cluster.py), so ``check`` refuses exactly
what the store could not use.  The user info ends at the last '@'; an error never
repeats it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

SENTINEL_SCHEMES = ("redis+sentinel://", "valkey+sentinel://")
CLUSTER_SCHEMES = ("redis+cluster://", "valkey+cluster://")
HOSTS_EXPECTED = "each host is HOST:PORT, the port a number"
SENTINEL_FORM = "redis+sentinel://HOST:PORT/SERVICE"


@dataclass(frozen=True)
class SentinelUrl:
    """``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl:
        userinfo, hosts, path = _split(url, SENTINEL_SCHEMES, "a Sentinel URL")
        parts = [p for p in path.split("/") if p]
        if not parts:
            raise ValueError(f"a Sentinel URL names its service: {SENTINEL_FORM}")
        if len(parts) > 1 and not parts[1].isdigit():
            raise ValueError(f"a Sentinel URL's DB is a number: {SENTINEL_FORM}/DB")
        db = int(parts[1]) if len(parts) > 1 else 0
        password = unquote(userinfo.partition(":")[2]) or None if userinfo else None
        return cls(host_ports(hosts), unquote(parts[0]), db, password)


@dataclass(frozen=True)
class ClusterUrl:
    """``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]``."""

    nodes: tuple[tuple[str, int], ...]
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> ClusterUrl:
        userinfo, hosts, _ = _split(url, CLUSTER_SCHEMES, "a Redis Cluster URL")
        # (a user info without ':' is the password itself here, as redis-py reads it)
        password = unquote(userinfo.split(":", 1)[-1]) or None if userinfo else None
        return cls(host_ports(hosts), password)


def _split(url: str, schemes: tuple[str, ...], what: str) -> tuple[str, str, str]:
    """User info (to the last '@'), hosts and path of ``url`` (ValueError: not ``what``)."""
    scheme = next((s for s in schemes if url.startswith(s)), None)
    if scheme is None:
        raise ValueError(f"not {what}")
    userinfo, _, rest = url[len(scheme) :].rpartition("@")
    hosts, _, path = rest.partition("/")
    return userinfo, hosts, path


def host_ports(hosts: str) -> tuple[tuple[str, int], ...]:
    """``HOST:PORT[,HOST:PORT...]``, at least one (ValueError otherwise)."""
    found = []
    for text in (h for h in hosts.split(",") if h):
        host, _, port = text.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{HOSTS_EXPECTED}, not {text!r}")
        found.append((host.strip("[]"), int(port)))
    if not found:
        raise ValueError("it names no HOST:PORT")
    return tuple(found)
