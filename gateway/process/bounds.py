"""The quotas, time bounds and policy every route is built with, from the settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.bridge.backend import DEFAULT_MAX_PARKED_PER_PRINCIPAL, DEFAULT_PARK_TTL_OVER_QUOTA
from gateway.bridge.forwarder import DEFAULT_ASK_SETTLE
from gateway.config.settings import DEFAULT_FD_RESERVE, DEFAULT_HEADER_TIMEOUT, RATE_OFF, RouteSpec
from gateway.policy import (
    Exposure,
    Rate,
    RateLimiter,
    RoutePolicy,
    Rule,
    SharedBuckets,
    canonical_uri,
)
from gateway.transport.route import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_KEEPALIVE,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL,
    DEFAULT_MAX_NOTICES,
    DEFAULT_MAX_NOTICES_PER_PRINCIPAL,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
    DEFAULT_STREAM_IDLE_TIMEOUT,
)
from gateway.transport.sessions import DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL

if TYPE_CHECKING:
    from gateway.config.settings import Settings


@dataclass(frozen=True)
class Bounds:
    """Quotas and time bounds (see :class:`~gateway.config.settings.Settings` for each)."""

    max_parked_per_principal: int = DEFAULT_MAX_PARKED_PER_PRINCIPAL
    park_ttl_over_quota: float = DEFAULT_PARK_TTL_OVER_QUOTA
    ask_settle: float = DEFAULT_ASK_SETTLE
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_sessions_per_principal: int = DEFAULT_MAX_SESSIONS_PER_PRINCIPAL
    max_streams: int = DEFAULT_MAX_STREAMS
    max_streams_per_principal: int = DEFAULT_MAX_STREAMS_PER_PRINCIPAL
    max_notices: int = DEFAULT_MAX_NOTICES
    max_notices_per_principal: int = DEFAULT_MAX_NOTICES_PER_PRINCIPAL
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    max_inflight_per_principal: int = DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL
    max_batch: int = DEFAULT_MAX_BATCH
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    stream_idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT
    keepalive: float = DEFAULT_KEEPALIVE
    fd_reserve: int = DEFAULT_FD_RESERVE
    scrape_hosts: tuple[str, ...] = ()
    # Rate limits of routes that set none of their own (see gateway/policy).
    rate: str | None = None
    burst: int | None = None
    tool_rate: str | None = None
    tool_burst: int | None = None
    rate_fallback: str = "open"

    @classmethod
    def from_settings(cls, settings: Settings) -> Bounds:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {name: getattr(settings, name) for name in names}
        values["scrape_hosts"] = tuple(settings.scrape_hosts)
        return cls(**values)


def route_policy(
    spec: RouteSpec, limits: Bounds, shared: SharedBuckets | None
) -> RoutePolicy | None:
    """The route's exposure rules and rate limits (its own, else the gateway-wide
    limits), its buckets in ``shared`` when clustered; None when it has neither."""
    exposure = Exposure(
        Rule.parse(spec.tools) if spec.tools else None,
        Rule.parse(spec.prompts) if spec.prompts else None,
        Rule.parse(spec.resources, canonical_uri) if spec.resources else None,
    )
    rate = _rate(spec.rate, spec.burst, limits.rate, limits.burst)
    tool_rate = _rate(spec.tool_rate, spec.tool_burst, limits.tool_rate, limits.tool_burst)
    limiter = None
    if rate is not None or tool_rate is not None:
        fallback = spec.rate_fallback or limits.rate_fallback
        limiter = RateLimiter(
            spec.path,
            rate,
            tool_rate,
            fallback="closed" if fallback == "closed" else "open",
            shared=shared,
        )
    policy = RoutePolicy(spec.path, exposure, limiter)
    return policy if policy else None


def _rate(
    given: str | None, burst: int | None, default: str | None, default_burst: int | None
) -> Rate | None:
    """A route's rate: its own (``off``: none), else the gateway-wide one."""
    if given is None:
        given, burst = default, burst if burst is not None else default_burst
    if given is None or given.strip().lower() == RATE_OFF:
        return None
    return Rate.parse(given, burst)
