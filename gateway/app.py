"""Wiring: builds the running gateway (routes, upstream links, endpoints) and runs it."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from gateway.demo import start_demo
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.http import Endpoint, Route
from gateway.upstream.link import UpstreamLink, UpstreamSettings

log = structlog.get_logger(__name__)

ROUTE_OPTIONS = {"version", "transport", "timeout", "connect_timeout", "ttl_ms", "cache_scope"}


@dataclass
class RouteSpec:
    """One `--route PATH=UPSTREAM[,key=value...]`."""

    path: str
    upstream: str
    version: str | None = None
    transport: str = "auto"
    timeout: float = 300.0
    connect_timeout: float = 10.0
    ttl_ms: int = 0
    cache_scope: str = "private"
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> RouteSpec:
        path, sep, rest = text.partition("=")
        if not sep or not path.startswith("/") or not rest:
            raise ValueError(
                f"--route {text!r}: expected PATH=UPSTREAM, e.g. /mcp=http://127.0.0.1:3000/mcp"
            )
        upstream, *options = rest.split(",")
        spec = cls(path=path, upstream=upstream)
        for option in options:
            key, eq, value = option.partition("=")
            if not eq or key not in ROUTE_OPTIONS:
                raise ValueError(
                    f"--route {text!r}: unknown option {option!r} "
                    f"(known: {', '.join(sorted(ROUTE_OPTIONS))})"
                )
            if key in ("timeout", "connect_timeout"):
                setattr(spec, key, float(value))
            elif key == "ttl_ms":
                spec.ttl_ms = int(value)
            else:
                setattr(spec, key, value)
        if spec.transport not in ("auto", "http", "sse"):
            raise ValueError(f"--route {text!r}: transport must be auto, http or sse")
        if spec.cache_scope not in ("private", "public"):
            raise ValueError(f"--route {text!r}: cache_scope must be private or public")
        if not upstream.startswith(("http://", "https://")):
            raise ValueError(f"--route {text!r}: the upstream must be an http(s):// URL")
        return spec


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Gateway:
    """The whole process: one aiohttp server, a route per upstream."""

    def __init__(
        self, routes: list[RouteSpec], *, host: str = "127.0.0.1", port: int = 8080
    ) -> None:
        self.specs = routes
        self.host = host
        self.port = port
        self.adapters = AdapterSet.default()
        self.endpoints: list[Endpoint] = []
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    async def build(self) -> web.Application:
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=256, limit_per_host=64),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        loopback = is_loopback(self.host)
        for spec in self.specs:
            if spec.version is not None and spec.version not in self.adapters.by_version:
                raise ValueError(
                    f"route {spec.path}: unknown revision {spec.version} "
                    f"(known: {', '.join(self.adapters.versions)})"
                )
            settings = UpstreamSettings(
                url=spec.upstream,
                transport=spec.transport,
                version=spec.version,
                request_timeout=spec.timeout,
                connect_timeout=spec.connect_timeout,
            )
            route = Route(
                path=spec.path,
                link=UpstreamLink(settings, self.adapters, self._http),
                adapters=self.adapters,
                guard=OriginGuard(
                    loopback_only=loopback,
                    allowed_hosts=spec.allowed_hosts,
                    allowed_origins=spec.allowed_origins,
                ),
                cache_ttl_ms=spec.ttl_ms,
                cache_scope=spec.cache_scope,
            )
            endpoint = Endpoint(route)
            self.endpoints.append(endpoint)
            app.router.add_route("POST", spec.path, endpoint.post)
            app.router.add_route("GET", spec.path, endpoint.get)
            app.router.add_route("DELETE", spec.path, endpoint.delete)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        routes: dict[str, Any] = {}
        ready = True
        for endpoint in self.endpoints:
            link = endpoint.route.link
            try:
                await asyncio.wait_for(link.ensure("anonymous", {}), 5)
            except Exception as exc:  # any reason the upstream is not usable
                ready = False
                routes[endpoint.route.path] = {"ready": False, "error": str(exc)}
                continue
            verdict = link.verdict
            routes[endpoint.route.path] = {
                "ready": True,
                "upstream_revision": verdict.adapter.version if verdict else None,
                "transport": verdict.transport if verdict else None,
            }
        return web.json_response({"ready": ready, "routes": routes}, status=200 if ready else 503)

    async def start(self) -> int:
        app = await self.build()
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                self.port = int(address[1])
                break
        log.info(
            "gateway listening", host=self.host, port=self.port, routes=[s.path for s in self.specs]
        )
        return self.port

    async def stop(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.close()
        if self._runner is not None:
            await self._runner.cleanup()
        for endpoint in self.endpoints:
            await endpoint.route.link.close()
        if self._http is not None:
            await self._http.close()

    async def serve_forever(self, *, demo: bool = False) -> None:
        demo_runner = None
        if demo:
            demo_runner, url = await start_demo()
            self.specs = [RouteSpec(path="/mcp", upstream=url)]
            log.info(
                "no --route given: fronting the bundled demo server",
                route="/mcp",
                upstream=url,
                hint="pass --route PATH=URL to front your own MCP server",
            )
        await self.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("shutting down")
        await self.stop()
        if demo_runner is not None:
            await demo_runner.cleanup()
