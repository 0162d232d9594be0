"""The console's web application on its own listener: the token and rate limit in
one middleware, the routes and recent-calls pages, their live fragments, and the
vendored script and style (package data: nothing is fetched from the network)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Protocol

import structlog
from aiohttp import web

from gateway.config.settings import RouteSpec
from gateway.console import pages
from gateway.console.access import Access
from gateway.console.options import ConsoleOptions
from gateway.console.playground import Playground, Run
from gateway.console.playground_web import PlaygroundWeb
from gateway.console.recent import RecentCalls
from gateway.console.view import RoutesView
from gateway.console.wiretap import UpstreamWires, recording_adapters
from gateway.observability import Metrics
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.http import Endpoint
from gateway.transport.route import Route

__all__ = ["Console"]

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}


class GatewayState(Protocol):
    """What the console reads of the gateway (gateway/process/app.py's Gateway)."""

    endpoints: list[Endpoint]
    specs: list[RouteSpec]
    metrics: Metrics
    adapters: AdapterSet
    host: str
    port: int


class Console:
    def __init__(self, options: ConsoleOptions, gateway: GatewayState) -> None:
        self.options = options
        self.gateway = gateway
        routes = self._routes_of
        self.access = Access(options.token, options.rate)
        self.upstream = UpstreamWires()
        self.recent = RecentCalls(
            options.calls_per_route,
            bodies=options.record_bodies,
            body_chars=options.body_chars,
            upstream=self.upstream,
        )
        self.view = RoutesView(routes, lambda: gateway.specs, gateway.metrics)
        self.playground = Playground(self._gateway_url, gateway.adapters)
        # The routes' links' adapters (the same set for every route), when recording.
        self._link_adapters = (
            recording_adapters(gateway.adapters, self.upstream)
            if options.record_bodies
            else gateway.adapters
        )
        self.guard = OriginGuard(loopback_only=_loopback(options.host))
        self._runner: web.AppRunner | None = None
        self.port = options.port

    def _routes_of(self) -> list[Route]:
        return [endpoint.route for endpoint in self.gateway.endpoints]

    def _gateway_url(self) -> str:
        """Where the playground reaches the gateway's routes (loopback for a wildcard)."""
        host = self.gateway.host
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.gateway.port}"

    def link_adapters(self) -> AdapterSet:
        return self._link_adapters

    def attach(self, route: Route) -> None:
        """Record the route's calls (the one thing the console puts on a call's path)."""
        route.console = self.recent.tap(route.path, route.backend)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate], client_max_size=64 * 1024)
        app.router.add_get("/", self._home)
        app.router.add_get("/routes", self._routes)
        app.router.add_get("/fragment/routes", self._routes_fragment)
        app.router.add_get("/calls", self._calls)
        app.router.add_get("/fragment/calls", self._calls_fragment)
        app.router.add_get(r"/calls/{number:\d+}", self._call)
        app.router.add_post("/calls/clear", self._clear)
        app.router.add_get("/static/{name}", self._static)
        PlaygroundWeb(
            self.playground,
            lambda: [route.path for route in self._routes_of()],
            self._page,
            self._gateway_side,
        ).register(app)
        return app

    async def start(self) -> int:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port)
        await site.start()
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                self.port = int(address[1])
                break
        log.info(
            "console listening",
            host=self.options.host,
            port=self.port,
            bodies=self.options.record_bodies,
        )
        return self.port

    async def stop(self) -> None:
        await self.playground.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Rate limit first (the token's budget, or the source's: against guessing it),
        then the Host check (DNS rebinding), the token, and the CSRF token of a POST."""
        admitted = self.access.admit(request)
        if admitted is None:
            return web.Response(status=429, headers={"Retry-After": "1"})
        if self.guard.check({k.lower(): v for k, v in request.headers.items()}) is not None:
            return web.Response(status=403)
        if not admitted:
            return self.access.unauthorized()
        if request.method == "POST" and not self.access.csrf_ok(request):
            return web.Response(status=403, text="missing or wrong CSRF token")
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    def _page(self, title: str, body: str, live: str | None = None) -> web.Response:
        html = pages.page(title, self.access.csrf, body, live=live)
        return web.Response(text=html, content_type="text/html")

    def _gateway_side(self, run: Run) -> str | None:
        """What recent calls recorded of a playground call's rounds (its route's calls
        of the same method and revision since it began), when the call is over."""
        if not run.done:
            return None
        rounds = [
            record
            for record in self.recent.select(run.route, run.revision)
            if record.method == run.method and record.at >= run.started
        ]
        said = []
        for record in reversed(rounds):
            said.append(
                f"recent call #{record.number}: {record.client_revision} client -> "
                f"{record.upstream_revision} upstream, {record.outcome}, {record.latency_ms} ms"
            )
            if record.upstream_got is not None:
                said.append(f"Upstream got:\n{record.upstream_got}")
                said.append(f"Upstream sent:\n{record.upstream_sent}")
        return "\n\n".join(said) or None

    async def _home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/routes")

    async def _routes(self, request: web.Request) -> web.Response:
        await self.view.check_health()
        return self._page("Routes", pages.routes_table(self.view.snapshot()), "/fragment/routes")

    async def _routes_fragment(self, request: web.Request) -> web.Response:
        await self.view.check_health()
        return web.Response(text=pages.routes_table(self.view.snapshot()), content_type="text/html")

    def _calls_html(self, request: web.Request) -> str:
        query = request.query
        records = self.recent.select(
            query.get("route") or None, query.get("revision") or None, query.get("outcome") or None
        )
        return pages.calls_table(records, self.recent.bodies)

    async def _calls(self, request: web.Request) -> web.Response:
        everything = self.recent.select()
        filters = pages.calls_page(
            {k: v for k, v in request.query.items() if isinstance(v, str)},
            sorted(self.recent.rings),
            sorted({c.client_revision for c in everything}),
            sorted({c.outcome for c in everything}),
        )
        clear = "<form method=post action=/calls/clear><button>Clear</button></form>"
        body = self._calls_html(request)
        html = pages.page("Recent calls", self.access.csrf, body, live="/fragment/calls")
        html = html.replace("<div id=live", filters + clear + "<div id=live", 1)
        return web.Response(text=html, content_type="text/html")

    async def _calls_fragment(self, request: web.Request) -> web.Response:
        return web.Response(text=self._calls_html(request), content_type="text/html")

    async def _call(self, request: web.Request) -> web.Response:
        record = self.recent.find(int(request.match_info["number"]))
        if record is None:
            raise web.HTTPNotFound()
        return self._page(f"Call #{record.number}", pages.call_page(record))

    async def _clear(self, request: web.Request) -> web.Response:
        for ring in self.recent.rings.values():
            ring.clear()
        return web.Response(status=204)

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        body = resources.files("gateway.console").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=STATIC[name])


def _loopback(host: str) -> bool:
    from ipaddress import ip_address

    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
