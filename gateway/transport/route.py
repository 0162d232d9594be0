"""A route: one path of the gateway, the upstream behind it, and its policies."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.bridge.forwarder import Forwarder, park_ttl
from gateway.bridge.parking import ParkingTable
from gateway.bridge.state import StateSealer
from gateway.protocol import AdapterSet
from gateway.transport.common import CallObserver
from gateway.transport.guard import OriginGuard
from gateway.transport.sessions import SessionStore
from gateway.upstream.link import UpstreamLink


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

    def __post_init__(self) -> None:
        sealer = self.sealer or StateSealer(ttl=park_ttl())
        self.forwarder = Forwarder(
            self.link,
            stateless_versions=[a.version for a in self.adapters.stateless],
            sealer=sealer,
            parking=ParkingTable(max_entries=self.max_parked, ttl=sealer.ttl),
        )

    def parked_count(self) -> int:
        return self.forwarder.parked_count
