"""The ops endpoints: /healthz, /readyz and /metrics, and the Host check that keeps
them from a DNS-rebinding page (loopback names, or the scrapers' hosts)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from gateway.observability import Metrics
from gateway.transport.guard import OriginGuard
from gateway.transport.http import Endpoint
from gateway.transport.route import Route
from gateway.upstream.diagnosis import explained

__all__ = ["OPS_PATHS", "READY_TIMEOUT", "Ops"]

# Ops endpoints: answered even when the descriptor budget refuses new work.
OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# How long /readyz waits for one upstream before calling it unreachable.
READY_TIMEOUT = 5.0


class Ops:
    """The ops endpoints of one gateway: its routes' readiness, its metrics."""

    def __init__(
        self, endpoints: Sequence[Endpoint], metrics: Metrics, draining: Callable[[], bool]
    ) -> None:
        # The gateway's own list: routes built later are seen too.
        self.endpoints = endpoints
        self.metrics = metrics
        self.draining = draining
        self.guard = OriginGuard(loopback_only=True)

    def register(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.render_metrics)

    def refused(self, request: web.Request) -> web.StreamResponse | None:
        """403 for an ops request whose Host is not one the endpoints answer."""
        refused = self.guard.check({k.lower(): v for k, v in request.headers.items()})
        if refused is not None:
            return web.json_response({"error": refused.message}, status=403)
        return None

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        if self.draining():
            return web.json_response({"ready": False, "draining": True, "routes": {}}, status=503)
        checks = await asyncio.gather(*(route_ready(e.route) for e in self.endpoints))
        routes = {
            endpoint.route.path: check
            for endpoint, check in zip(self.endpoints, checks, strict=True)
        }
        ready = all(check["ready"] for check in checks)
        return web.json_response({"ready": ready, "routes": routes}, status=200 if ready else 503)

    async def render_metrics(self, request: web.Request) -> web.Response:
        body, content_type = self.metrics.negotiate(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})


async def route_ready(route: Route) -> dict[str, Any]:
    """Ready: the upstream's era is known and its port still takes connections; when
    not, why (the error) and what to do (a reason and a hint, as `gateway check`)."""
    backend = route.backend
    check = await backend.ready(READY_TIMEOUT)
    if check["ready"]:
        check["sessions"] = len(route.sessions)
    targets = backend.targets
    settings = [link.settings for link in targets.links] if targets is not None else None
    return await explained(check, backend.link.settings, settings)
