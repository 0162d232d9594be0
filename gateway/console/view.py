"""What the routes page shows, read from the gateway's own state (each route's
backend, sessions and policy) and its metrics registry (calls, failures, refusals)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from gateway.config.settings import RouteSpec
from gateway.observability import Metrics
from gateway.transport.route import Route
from gateway.upstream.diagnosis import explained

__all__ = ["RoutesView"]

# How often a route's health is checked again for the page (seconds), and how long
# one check may take (the check /readyz makes: the era known, the upstream reachable).
HEALTH_EVERY = 5.0
HEALTH_WITHIN = 2.0


class RoutesView:
    def __init__(
        self,
        routes: Callable[[], Sequence[Route]],
        specs: Callable[[], Sequence[RouteSpec]],
        metrics: Metrics,
    ) -> None:
        self.routes = routes
        self.specs = specs
        self.metrics = metrics
        # Each route's last health check: (when, loop time; the check's verdict).
        self._health: dict[str, tuple[float, dict[str, Any]]] = {}
        self._checking = asyncio.Lock()

    async def check_health(self) -> None:
        """Check again the routes whose health is older than HEALTH_EVERY (at once, one
        page refresh at a time: a page left open costs a check every few seconds)."""
        async with self._checking:
            now = asyncio.get_running_loop().time()
            stale = [
                r
                for r in self.routes()
                if now - self._health.get(r.path, (-1e9, {}))[0] > HEALTH_EVERY
            ]
            found = await asyncio.gather(*(_checked(r) for r in stale))
            for route, verdict in zip(stale, found, strict=True):
                self._health[route.path] = (now, verdict)

    def snapshot(self) -> list[dict[str, Any]]:
        specs = {spec.path: spec for spec in self.specs()}
        counts = self._counts()
        return [self._route(route, specs.get(route.path), counts) for route in self.routes()]

    def _route(
        self, route: Route, spec: RouteSpec | None, counts: dict[tuple[str, str], float]
    ) -> dict[str, Any]:
        backend = route.backend
        revision = backend.upstream_revision
        return {
            "path": route.path,
            "upstream": _upstream(spec),
            "transport": backend.upstream_transport,
            "revision": revision,
            "found_at": backend.found_at,
            "policy": _policy(route, spec),
            "calls": int(counts.get((route.path, "gateway_requests_total"), 0)),
            "failures": int(counts.get((route.path, "gateway_request_errors_total"), 0)),
            "refusals": int(counts.get((route.path, "gateway_policy_refusals_total"), 0)),
            "parked": backend.forwarder.parked_count,
            "sessions": route.sessions.by_revision(),
            "health": self._health.get(route.path, (0.0, None))[1],
        }

    def _counts(self) -> dict[tuple[str, str], float]:
        """Each route's counters, summed over their other labels."""
        wanted = {
            "gateway_requests_total",
            "gateway_request_errors_total",
            "gateway_policy_refusals_total",
        }
        totals: dict[tuple[str, str], float] = {}
        for family in self.metrics.registry.collect():
            for sample in family.samples:
                if sample.name in wanted:
                    key = (sample.labels.get("route", ""), sample.name)
                    totals[key] = totals.get(key, 0.0) + sample.value
        return totals


async def _checked(route: Route) -> dict[str, Any]:
    """The route's health check, each failure said as the start-up line says it: a
    reason and a hint, not the error's raw text (which stays in the log)."""
    backend = route.backend
    targets = backend.targets
    found = await backend.ready(HEALTH_WITHIN)
    settings = [link.settings for link in targets.links] if targets is not None else None
    return await explained(found, backend.link.settings, settings)


def _upstream(spec: RouteSpec | None) -> str:
    """The upstream's URL without any userinfo or query (which may hold a secret), or
    the stdio command's program alone (its arguments may too)."""
    if spec is None:
        return "?"
    if spec.command is not None:
        return f"stdio: {spec.command[0]}"
    from urllib.parse import urlsplit

    parts = urlsplit(spec.upstream)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _policy(route: Route, spec: RouteSpec | None) -> list[str]:
    if route.policy is None or spec is None:
        return []
    said = [
        f"{name}: {value}"
        for name in ("tools", "prompts", "resources")
        if (value := getattr(spec, name)) is not None
    ]
    said += [
        f"{name}: {value}"
        for name in ("rate", "tool_rate")
        if (value := getattr(spec, name)) is not None
    ]
    return said or ["gateway-wide rate limits"]
