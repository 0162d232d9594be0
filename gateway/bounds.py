"""The quotas and time bounds every route is built with, from the settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.bridge.backend import DEFAULT_MAX_PARKED_PER_PRINCIPAL, DEFAULT_PARK_TTL_OVER_QUOTA
from gateway.bridge.forwarder import DEFAULT_ASK_SETTLE
from gateway.settings import DEFAULT_FD_RESERVE, DEFAULT_HEADER_TIMEOUT
from gateway.transport.route import (
    DEFAULT_BODY_TIMEOUT,
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
    from gateway.settings import Settings


@dataclass(frozen=True)
class Limits:
    """Quotas and time bounds (see :class:`~gateway.settings.Settings` for each)."""

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
    fd_reserve: int = DEFAULT_FD_RESERVE
    scrape_hosts: tuple[str, ...] = ()
    # Rate limits of routes that set none of their own (see gateway/policy).
    rate: str | None = None
    burst: int | None = None
    tool_rate: str | None = None
    tool_burst: int | None = None
    rate_fallback: str = "open"

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {name: getattr(settings, name) for name in names}
        values["scrape_hosts"] = tuple(settings.scrape_hosts)
        return cls(**values)
