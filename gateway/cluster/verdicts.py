"""Era verdicts shared by the replicas: a replica that joins skips the probe.

What rebuilds a Verdict: the revision (its adapter), the transport and the
upstream's profile as JSON.  Published as soon as a replica's own probe
reaches it (and on each heartbeat if that failed), adopted at start; a verdict
that stops holding is probed again locally, as without a cluster, and the new
one published in turn.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import ValidationError

from gateway.cluster.store import ClusterStore
from gateway.core import ServerProfile
from gateway.protocol import AdapterSet
from gateway.upstream.link import UpstreamLink, Verdict

log = structlog.get_logger(__name__)

# A shared verdict outlives its last publisher by this much (seconds).
VERDICT_TTL = 3600.0


@dataclass
class _Shared:
    key: str
    link: UpstreamLink
    adapters: AdapterSet
    published: Verdict | None = None


def dump(verdict: Verdict) -> dict[str, Any]:
    return {
        "revision": verdict.adapter.version,
        "transport": verdict.transport,
        "profile": verdict.profile.model_dump(mode="json"),
        "found_at": verdict.found_at,
    }


def load(data: dict[str, Any], adapters: AdapterSet) -> Verdict | None:
    adapter = adapters.by_version.get(str(data.get("revision")))
    transport = data.get("transport")
    if adapter is None or transport not in ("http", "sse"):
        return None
    try:
        profile = ServerProfile.model_validate(data.get("profile"))
    except ValidationError:
        return None
    found_at = data.get("found_at")
    if isinstance(found_at, int | float) and not isinstance(found_at, bool):
        return Verdict(adapter, str(transport), profile, float(found_at))
    return Verdict(adapter, str(transport), profile)


class VerdictShare:
    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self._routes: list[_Shared] = []
        # Set when a local probe reached a verdict not yet published.
        self.fresh = asyncio.Event()

    def add(self, key: str, link: UpstreamLink, adapters: AdapterSet) -> None:
        """Share ``link``'s verdict under ``key`` (the route and its upstream URL)."""
        self._routes.append(_Shared(key, link, adapters))
        link.on_verdict = lambda _verdict: self.fresh.set()

    async def adopt(self) -> None:
        for shared in self._routes:
            if shared.link.verdict is not None:
                continue
            data = await self.store.verdict(shared.key)
            verdict = None if data is None else load(data, shared.adapters)
            if verdict is not None:
                shared.link.adopt(verdict)
                shared.published = verdict
                log.info("upstream era adopted from the cluster", route=shared.key)

    async def publish(self) -> None:
        self.fresh.clear()
        for shared in self._routes:
            verdict = shared.link.verdict
            if verdict is not None and verdict is not shared.published:
                await self.store.put_verdict(shared.key, dump(verdict), VERDICT_TTL)
                shared.published = verdict


class RouteResults:
    """One route's share of the store's public results (the bridge's SharedResults)."""

    def __init__(self, store: ClusterStore, route_key: str) -> None:
        self.store = store
        self._prefix = hashlib.sha256(route_key.encode()).hexdigest()[:24] + ":"

    async def get(self, key: str) -> bytes | None:
        return await self.store.result(self._prefix + key)

    async def put(self, key: str, raw: bytes, ttl_ms: int) -> None:
        await self.store.put_result(self._prefix + key, raw, ttl_ms / 1000)
