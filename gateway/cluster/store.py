"""What replicas share, behind one small interface, and the in-process store.

Ownership is not a table here: a session id and a sealed ``requestState``
carry their owner replica (see :mod:`gateway.cluster.owner`), so the store
only has to say which replicas are alive and where they are.  What it holds:

- the replica registry: id, internal URL, draining flag, with a heartbeat
  expiry (a replica that stops beating drops out by itself);
- single use of ``requestState`` rounds: a digest taken once, cluster-wide;
- era verdicts per route (revision, transport, profile JSON), so a new replica
  skips the probe;
- public list results (``cacheScope: public``) within their ``ttlMs``, per
  route: see :mod:`gateway.bridge.sharedcache`.  Bounded: at most
  ``MAX_RESULTS`` entries in a process or directory store; in Redis each
  entry expires with its ttl and is at most 256 KiB;
- rate limits' token buckets (:mod:`gateway.policy`), so every replica takes
  from the same bucket.  Bounded: a bucket expires once it would be full again,
  and a process or directory store keeps at most ``MAX_BUCKETS``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import orjson
import structlog

from gateway.policy import Limit, LocalBuckets, Taken

# Shared results a memory or directory store keeps at most (oldest dropped first).
MAX_RESULTS = 1024
# A Redis store's connections at most, and how long a command waits for one of them
# to come free (seconds): the defaults of the cluster_pool and cluster_pool_timeout
# settings.
POOL_SIZE = 100
POOL_TIMEOUT = 2.0


@dataclass(frozen=True)
class Replica:
    id: str
    url: str  # where the other replicas reach it (relays)
    draining: bool = False

    def dump(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def load(cls, raw: bytes | str) -> Replica | None:
        try:
            data = orjson.loads(raw)
            return cls(str(data["id"]), str(data["url"]), bool(data.get("draining", False)))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


class ClusterStore(Protocol):
    """The shared state of a cluster (Redis, a directory, or this process)."""

    async def register(self, replica: Replica, ttl: float) -> bool:
        """Announce (or keep announcing: the heartbeat) a replica for ``ttl`` seconds;
        whether it was still registered (False to a heartbeat: the store forgot it)."""

    async def deregister(self, replica_id: str) -> None: ...

    async def follow_primary(self) -> bool:
        """Drop connections to a server that is no longer the primary (a failover
        happened while they stayed up): asked once a heartbeat.  Whether they moved."""

    async def replica(self, replica_id: str) -> Replica | None:
        """The live replica with this id, or None (never registered, gone or expired)."""

    async def replicas(self) -> list[Replica]: ...

    async def use_once(self, key: str, ttl: float) -> bool:
        """True the first time ``key`` is used within ``ttl`` seconds, cluster-wide."""

    async def verdict(self, route: str) -> dict[str, Any] | None: ...

    async def put_verdict(self, route: str, verdict: dict[str, Any], ttl: float) -> None: ...

    async def result(self, key: str) -> bytes | None:
        """A shared public result, while its ttl lasts."""

    async def put_result(self, key: str, raw: bytes, ttl: float) -> None: ...

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        """Rate limits' token buckets, shared: one token from every bucket of
        ``limits``, or none (see :class:`gateway.policy.LocalBuckets`)."""

    async def close(self) -> None: ...


log = structlog.get_logger(__name__)

# The memory store's ledger of spent states: swept of expired keys past SWEEP_AT,
# never holding more than MAX_SPENT.
SWEEP_AT = 10_000
MAX_SPENT = 100_000


class MemoryStore:
    """One process's store: for tests, and a single replica that needs no other."""

    def __init__(self) -> None:
        self._replicas: dict[str, tuple[Replica, float]] = {}
        self._used: dict[str, float] = {}
        self._verdicts: dict[str, tuple[dict[str, Any], float]] = {}
        self._results: dict[str, tuple[bytes, float]] = {}
        self._buckets = LocalBuckets()

    async def register(self, replica: Replica, ttl: float) -> bool:
        now = time.monotonic()
        before = self._replicas.get(replica.id)
        self._replicas[replica.id] = (replica, now + ttl)
        return before is not None and before[1] >= now

    async def deregister(self, replica_id: str) -> None:
        self._replicas.pop(replica_id, None)

    async def follow_primary(self) -> bool:
        return False  # one process: no primary to follow

    async def replica(self, replica_id: str) -> Replica | None:
        found = self._replicas.get(replica_id)
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]

    async def replicas(self) -> list[Replica]:
        now = time.monotonic()
        return [replica for replica, expiry in self._replicas.values() if expiry >= now]

    async def use_once(self, key: str, ttl: float) -> bool:
        """Spent keys are remembered for their ttl, at most ``MAX_SPENT`` at once: past
        that a new key is refused (as if spent), never an old one forgotten early,
        which would let its token be replayed."""
        now = time.monotonic()
        if len(self._used) >= SWEEP_AT:
            self._used = {k: x for k, x in self._used.items() if x >= now}
        if self._used.get(key, 0.0) >= now:
            return False
        if len(self._used) >= MAX_SPENT:
            log.warning("spent-state ledger full: refusing a retry", limit=MAX_SPENT)
            return False
        self._used[key] = now + ttl
        return True

    async def verdict(self, route: str) -> dict[str, Any] | None:
        found = self._verdicts.get(route)
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]

    async def put_verdict(self, route: str, verdict: dict[str, Any], ttl: float) -> None:
        self._verdicts[route] = (verdict, time.monotonic() + ttl)

    async def result(self, key: str) -> bytes | None:
        found = self._results.get(key)
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]

    async def put_result(self, key: str, raw: bytes, ttl: float) -> None:
        now = time.monotonic()
        if len(self._results) >= MAX_RESULTS:
            self._results = {k: v for k, v in self._results.items() if v[1] >= now}
            while len(self._results) >= MAX_RESULTS:  # oldest inserted first
                self._results.pop(next(iter(self._results)))
        self._results[key] = (raw, now + ttl)

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        return self._buckets.take(limits)

    async def close(self) -> None:
        return None
