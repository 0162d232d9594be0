"""A route: one path of the gateway, the upstream behind it, and its policies."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.auth.front import RouteAuth
from gateway.bridge.forwarder import Forwarder, park_ttl
from gateway.bridge.parking import ParkingTable
from gateway.bridge.state import StateSealer
from gateway.core import ServerProfile
from gateway.protocol import AdapterSet
from gateway.transport.common import CallObserver
from gateway.transport.guard import OriginGuard
from gateway.transport.sessions import SessionStore
from gateway.upstream.link import UpstreamLink, Verdict


@dataclass
class Route:
    """One path of the gateway and the upstream behind it."""

    path: str
    link: UpstreamLink
    adapters: AdapterSet
    guard: OriginGuard
    forward_headers: tuple[str, ...] = ("authorization", "traceparent", "tracestate", "baggage")
    max_body: int = 4 * 1024 * 1024
    cache_ttl_ms: int = 0
    cache_scope: str = "private"
    ask_timeout: float = 300.0
    sessions: SessionStore = field(default_factory=SessionStore)
    observers: list[CallObserver] = field(default_factory=list)
    sealer: StateSealer | None = None
    max_parked: int = 1000
    # The route's OAuth side (None: no credentials are checked or passed on specially).
    auth: RouteAuth | None = None

    def __post_init__(self) -> None:
        self._profile: ServerProfile | None = None
        self._profile_of: Verdict | None = None
        sealer = self.sealer or StateSealer(ttl=park_ttl())
        self.forwarder = Forwarder(
            self.link,
            stateless_versions=[a.version for a in self.adapters.stateless],
            sealer=sealer,
            parking=ParkingTable(max_entries=self.max_parked, ttl=sealer.ttl),
        )

    async def profile(self, principal: str, headers: dict[str, str]) -> ServerProfile:
        """What the upstream offers, with the route's caching hints (raises Failure).

        Cached for as long as the upstream's verdict holds: a re-probe (the
        upstream changed) gives a fresh profile.
        """
        verdict = await self.link.ensure(principal, headers)
        if self._profile is None or self._profile_of is not verdict:
            self._profile = verdict.profile.model_copy(
                update={"cache_ttl_ms": self.cache_ttl_ms, "cache_scope": self.cache_scope}
            )
            self._profile_of = verdict
        return self._profile

    def parked_count(self) -> int:
        return self.forwarder.parked_count
