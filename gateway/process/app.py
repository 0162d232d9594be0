"""Wiring: settings turned into values (limits, the state key, cluster options), the
aiohttp application built (a route per upstream, its link, guard and auth; the
request-context middleware; the ops endpoints of :mod:`gateway.process.ops`), and the gateway
started and run until a signal (the way down is :mod:`gateway.process.lifecycle`'s)."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import aiohttp
import orjson
import structlog
from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE

from gateway import __version__
from gateway.auth.discovery import DocumentFetcher, UpstreamAuth
from gateway.auth.front import RouteAuth
from gateway.auth.tokens import TokenPolicy, TokenValidator
from gateway.auth.wellknown import WellKnown
from gateway.bridge.backend import (
    DEFAULT_MAX_PARKED,
    Backend,
)
from gateway.bridge.forwarder import DEFAULT_PARK_TTL
from gateway.bridge.principal import Principals, tenant_headers
from gateway.bridge.state import StateSealer
from gateway.config.settings import (
    DEFAULT_DRAIN_TIMEOUT,
    ROUTE_OPTIONS,
    RouteSpec,
    Settings,
)
from gateway.core import Failure, FailureKind, tracing
from gateway.core.limits import DescriptorBudget, Quota
from gateway.core.log_context import REQUEST_CONTEXT
from gateway.core.redaction import safe_url, scrub
from gateway.core.transports import release_when_lost
from gateway.demo import start_demo
from gateway.observability import CallObservers, Metrics, log_call
from gateway.policy import RoutePolicy
from gateway.process.bounds import Bounds, route_policy
from gateway.process.lifecycle import (
    CLOSE_GRACE,
    SHUTDOWN_MARGIN,
    InFlight,
    Signals,
    StartupError,
    freeze_startup_memory,
    start_unless,
    stop_accepting,
    watchdog,
)
from gateway.process.ops import OPS_PATHS, Ops
from gateway.process.route_check import say_in_log, watch
from gateway.process.start_options import (
    STATE_KEY_ENV,
    cluster_options,
    console_for,
    console_options,
    is_loopback,
    state_key_from_env,
)
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.http import Endpoint, to_web
from gateway.transport.lane import Lane, LaneHooks
from gateway.transport.marks import REQUEST_ID
from gateway.transport.page import page
from gateway.transport.post import WholeAnswer, gateway_fault
from gateway.transport.request_ids import RequestIds
from gateway.transport.route import (
    DEFAULT_MAX_BODY,
    Route,
)
from gateway.transport.sessions import (
    DEFAULT_IDLE_TIMEOUT,
    SessionStore,
)
from gateway.upstream.link import UpstreamLink
from gateway.upstream.targets import Targets

if TYPE_CHECKING:  # imported only when a cluster (or the console) is configured
    from gateway.cluster.node import ClusterNode
    from gateway.cluster.options import ClusterOptions
    from gateway.console import ConsoleOptions

__all__ = ["ROUTE_OPTIONS", "STATE_KEY_ENV", "Gateway", "RouteSpec", "is_loopback"]

log = structlog.get_logger(__name__)

# At most one "short of descriptors" warning this often, however many are refused.
BUDGET_LOG_INTERVAL = 10.0
REQUEST_ID_HEADER = "X-Request-Id"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Gateway:
    """The whole process: one aiohttp server, a route per upstream."""

    def __init__(
        self,
        routes: list[RouteSpec],
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        park_ttl: float = DEFAULT_PARK_TTL,
        max_parked: int = DEFAULT_MAX_PARKED,
        state_key: bytes | None = None,
        trust_forwarded: bool = False,
        limits: Bounds | None = None,
        cluster: ClusterOptions | None = None,
        reuse_port: bool = False,
        lean_lane: bool = True,
        pass_through: bool = True,
        server_banner: bool = False,
        console: ConsoleOptions | None = None,
    ) -> None:
        self.specs = routes
        self.limits = limits or Bounds()
        self.descriptors = DescriptorBudget(self.limits.fd_reserve)
        self.trust_forwarded = trust_forwarded
        self.park_ttl = park_ttl
        self.max_parked = max_parked
        # One key for every route (configured: replicas open each other's states).
        self.state_key = state_key or secrets.token_bytes(32)
        self.host = host
        self.port = port
        self.session_idle_timeout = session_idle_timeout
        self.max_body_bytes = max_body_bytes
        self.drain_timeout = drain_timeout
        self.adapters = AdapterSet.default()
        self.endpoints: list[Endpoint] = []
        # Requests in flight, and the way down (gateway/process/lifecycle.py).
        self.work = InFlight(self.endpoints)
        self._http: aiohttp.ClientSession | None = None
        self._route_http: list[aiohttp.ClientSession] = []
        self._runner: web.AppRunner | None = None
        self._budget_logged = float("-inf")
        self.request_ids = RequestIds()
        # Several replicas as one (gateway/cluster): None without --cluster / --workers.
        self.cluster_options = cluster
        self.cluster: ClusterNode | None = None
        self.reuse_port = reuse_port
        self.lean_lane = lean_lane  # the usual POST off the socket (transport/lane.py)
        self.pass_through = pass_through  # (transport/passthrough.py)
        self.lane: Lane | None = None
        self.banner = _banner(server_banner)
        self._listener: asyncio.Server | None = None
        self.metrics = Metrics(
            lambda: [e.route for e in self.endpoints], self.in_flight, self._lane_figures
        )
        self.ops = Ops(self.endpoints, self.metrics, lambda: self.work.draining)
        self.console = console_for(console, self)

    @classmethod
    def from_settings(cls, settings: Settings) -> Gateway:
        return cls(
            list(settings.routes),
            host=settings.host,
            port=settings.port,
            session_idle_timeout=settings.session_idle_timeout,
            max_body_bytes=settings.max_body_bytes,
            drain_timeout=settings.drain_timeout,
            park_ttl=settings.park_ttl,
            max_parked=settings.max_parked,
            state_key=state_key_from_env(),
            trust_forwarded=settings.trust_forwarded,
            limits=Bounds.from_settings(settings),
            cluster=cluster_options(settings),
            reuse_port=settings.reuse_port,
            lean_lane=settings.lean_lane,
            pass_through=settings.pass_through,
            server_banner=settings.server_banner,
            console=console_options(settings),
        )

    def _lane_figures(self) -> tuple[int, int] | None:
        """The lane's open connections and handoffs so far (None: no lane)."""
        lane = self.lane
        return (len(lane.connections), lane.handoffs) if lane is not None else None

    def in_flight(self) -> int:
        """Client requests (POSTs) being handled, and calls answered on a stream."""
        return self.work.count()

    # ------------------------------------------------------------------ build

    def _session_for(self, spec: RouteSpec) -> aiohttp.ClientSession:
        """The shared client session, or the route's own when it sends static headers."""
        headers = spec.upstream_headers()
        if not headers:
            assert self._http is not None
            return self._http
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
            headers=headers,
        )
        self._route_http.append(session)
        return session

    async def build(self) -> web.Application:
        # No pool cap: each upstream session's GET stream holds a connection for as
        # long as the session lives, and a cap would make calls wait behind them.
        # What bounds them is the sessions' and calls' own bounds; the POSTs of
        # calls to a plain-http upstream are capped in the h1 client (max_connections).
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        if self.cluster_options is not None:
            self.cluster = self.cluster_options.node(self.state_key)
        middlewares = [self._context_middleware]
        if self.cluster is not None:
            middlewares.append(self.cluster.middleware)
        app = web.Application(
            client_max_size=max(64 * 1024 * 1024, self.max_body_bytes + 1),
            middlewares=middlewares,
        )
        app.on_response_prepare.append(self._on_prepare)
        loopback = is_loopback(self.host)
        self.ops.guard = OriginGuard(
            loopback_only=loopback,
            allowed_hosts=self.limits.scrape_hosts,
            hosts_option="the setting scrape_hosts",
        )
        # Discovery documents are fetched without any credentials (the shared session).
        fetcher = DocumentFetcher(self._http)
        for spec in self.specs:
            route = self._route(spec, loopback)
            route.auth = self._route_auth(spec, fetcher)
            route.policy = self._policy(spec)
            route.observer = self._observers()
            if self.console is not None:
                self.console.attach(route)
            endpoint = Endpoint(route)
            self.endpoints.append(endpoint)
            app.router.add_route("POST", spec.path, endpoint.post)
            app.router.add_route("GET", spec.path, endpoint.get)
            app.router.add_route("DELETE", spec.path, endpoint.delete)
        WellKnown([e.route.auth for e in self.endpoints if e.route.auth is not None]).register(app)
        self.ops.register(app)
        if all(spec.path != "/" for spec in self.specs):
            app.router.add_get("/", self._front_page)
        return app

    def _route(self, spec: RouteSpec, loopback: bool) -> Route:
        """One route: its upstream link behind the bridge, its guard and its limits."""
        if spec.version is not None and spec.version not in self.adapters.by_version:
            raise ValueError(
                f"route {spec.path}: unknown revision {spec.version} "
                f"(known: {', '.join(self.adapters.versions)})"
            )
        node = self.cluster
        backend = self._backend(spec)
        forward = spec.forwarded_headers()
        limits = self.limits
        return Route(
            path=spec.path,
            backend=backend,
            adapters=self.adapters,
            guard=OriginGuard(
                loopback_only=loopback,
                allowed_hosts=spec.allowed_hosts,
                allowed_origins=spec.allowed_origins,
            ),
            forward_headers=forward,
            max_body=self.max_body_bytes,
            ask_timeout=spec.ask_timeout,
            sessions=SessionStore(
                idle_timeout=self.session_idle_timeout,
                max_sessions=limits.max_sessions,
                per_principal=limits.max_sessions_per_principal,
                id_prefix=node.session_prefix if node is not None else "",
                route=spec.path,
            ),
            principals=Principals(self.state_key, tenant_headers(forward)),
            max_batch=limits.max_batch,
            body_timeout=limits.body_timeout,
            stream_idle_timeout=limits.stream_idle_timeout,
            keepalive=limits.keepalive if spec.keepalive is None else spec.keepalive,
            calls=Quota("calls in flight", limits.max_inflight_per_principal, limits.max_inflight),
            streams=Quota("open streams", limits.max_streams_per_principal, limits.max_streams),
            notices=Quota(
                "notifications in progress",
                limits.max_notices_per_principal,
                limits.max_notices,
            ),
            pass_through=self.pass_through,
        )

    def _backend(self, spec: RouteSpec) -> Backend:
        """The route's upstream link behind the bridge (joined to the cluster, if any)."""
        node = self.cluster
        sealer = StateSealer(
            self.state_key,
            ttl=self.park_ttl,
            owner=node.id if node is not None else None,
            ledger=node.use_once if node is not None else None,
        )
        # With the console recording bodies, the link's adapters note what it sends and reads.
        adapters = self.console.link_adapters() if self.console is not None else self.adapters
        http = self._session_for(spec)
        links = [UpstreamLink(each, adapters, http) for each in spec.target_settings()]
        link = links[0]
        targets = Targets(links, check_every=spec.health_every) if len(links) > 1 else None
        if node is not None:
            node.attach(spec.path, self.max_body_bytes, sealer)
            if spec.command is None:  # each target's verdict, shared by the replicas
                for each in links:  # keyed by a digest: a URL's secrets stay out of the store
                    digest = hashlib.sha256(each.settings.url.encode()).hexdigest()[:16]
                    node.verdicts.add(f"{spec.path} {digest}", each, self.adapters)
        limits = self.limits
        backend = Backend(
            link,
            self.adapters,
            targets=targets,
            cache_ttl_ms=spec.ttl_ms,
            cache_scope=spec.cache_scope,
            sealer=sealer,
            max_parked=self.max_parked,
            max_parked_per_principal=limits.max_parked_per_principal,
            park_ttl_over_quota=limits.park_ttl_over_quota,
            ask_settle=limits.ask_settle,
        )
        if node is not None:
            # Public list results: one replica's fetch serves the others within ttlMs.
            backend.forwarder.shared = node.results(f"{spec.path} {spec.upstream or spec.command}")
        return backend

    def _observers(self) -> CallObservers:
        if tracing.active is None:
            return CallObservers(log_call, self.metrics.observe)
        self.metrics.exemplars = True  # tracing first: it puts the span's ids in the record
        return CallObservers(tracing.active.observe, log_call, self.metrics.observe)

    def _policy(self, spec: RouteSpec) -> RoutePolicy | None:
        """What the route exposes and its rate limits (None: neither is configured, and
        its calls never enter gateway/policy)."""
        shared = self.cluster.store if self.cluster is not None else None
        policy = route_policy(spec, self.limits, shared)
        if policy is not None:
            policy.refused.append(self.metrics.refused)
        return policy

    def _route_auth(self, spec: RouteSpec, fetcher: DocumentFetcher) -> RouteAuth | None:
        """The route's OAuth side: transparent for an HTTP upstream, or the gateway
        checking tokens itself (auth=gateway); none for a plain stdio route."""
        if spec.auth == "gateway":
            assert spec.public_url is not None and spec.auth_issuer is not None
            policy = TokenPolicy(
                issuer=spec.auth_issuer,
                audience=spec.public_url,
                scopes=tuple(spec.auth_scopes),
                jwks_uri=spec.auth_jwks_uri,
                introspection_url=spec.auth_introspection_url,
                introspection_auth=spec.introspection_auth(),
            )
            return RouteAuth(
                spec.path,
                mode="gateway",
                public_url=spec.public_url,
                trust_forwarded=self.trust_forwarded,
                validator=TokenValidator(policy, fetcher),
            )
        if spec.command is not None:
            return None
        return RouteAuth(
            spec.path,
            public_url=spec.public_url,
            trust_forwarded=self.trust_forwarded,
            upstream=UpstreamAuth(spec.upstream, fetcher),
        )

    async def _on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every aiohttp answer: the request id, and the Server header (its banner)."""
        _add_request_id(request, response)
        response.headers["Server"] = self.banner

    async def _front_page(self, request: web.Request) -> web.StreamResponse:
        """``/`` (no route there): the page naming the routes, for a browser."""
        refused = self.ops.refused(request)  # the same Host check as the ops endpoints
        return refused or page(request, [e.route.path for e in self.endpoints])

    @web.middleware
    async def _context_middleware(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        """A request id (the client's X-Request-Id when sane) and trace ids on every log
        line of the request; POSTs counted as in flight for the drain; then the budget
        check (:meth:`_over_budget`).  One middleware, not two: each is a coroutine
        frame more on every request.  The lane does the same (:meth:`_lane_hooks`)."""
        request_id, token = self.request_ids.bind(request.headers)
        request[REQUEST_ID] = request_id
        task = asyncio.current_task()
        tracked = request.method == "POST" and task is not None
        if tracked:
            assert task is not None
            self.work.requests.add(task)
        try:
            refused = self._over_budget(request)
            if refused is not None:
                return refused
            return await handler(request)
        except (web.HTTPException, asyncio.CancelledError, ConnectionError):
            raise
        except Exception:
            # An MCP POST whose answer has not begun is answered in JSON-RPC; anything
            # else (an answer already streaming, an ops endpoint whose status a probe
            # reads) goes to aiohttp, which ends the connection.
            if request.method != "POST" or request.path in OPS_PATHS or _answer_begun(request):
                raise
            log.exception("error handling a request")
            return to_web(gateway_fault(request_id))
        finally:
            REQUEST_CONTEXT.reset(token)  # (by token: nothing of the context copied)
            if tracked:
                assert task is not None
                self.work.requests.discard(task)

    def _over_budget(self, request: web.Request) -> web.StreamResponse | None:
        """The ops endpoints' Host check (DNS rebinding); and new work refused with 503
        while the process is short of descriptors, before it runs out of them."""
        if request.path in OPS_PATHS:
            return self.ops.refused(request)
        overloaded = self._overloaded()
        return to_web(overloaded) if overloaded is not None else None

    def _overloaded(self) -> WholeAnswer | None:
        """503 while the process is short of descriptors (logged now and then)."""
        if not self.descriptors.exhausted():
            return None
        return self._refuse_overloaded()

    def _refuse_overloaded(self) -> WholeAnswer:
        now = time.monotonic()
        if now - self._budget_logged >= BUDGET_LOG_INTERVAL:
            self._budget_logged = now
            log.warning(
                "short of file descriptors: refusing new requests",
                open=self.descriptors.open_count(),
                limit=self.descriptors.limit(),
            )
        failure = Failure(FailureKind.OVERLOADED, "the gateway is overloaded; try again later")
        adapter = self.adapters.default_legacy
        return WholeAnswer(
            adapter.http_status(failure),
            {"Retry-After": "1"},
            orjson.dumps(adapter.encode_failure(None, failure)),
            "application/json",
        )

    def _lane_hooks(self) -> LaneHooks:
        return LaneHooks(
            context=self.request_ids.bind_for_task,
            budget=self.descriptors,
            overloaded=self._refuse_overloaded,
            requests=self.work.requests,
        )

    # ---------------------------------------------------------------- running

    async def start(self) -> int:
        app = await self.build()
        self._runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=CLOSE_GRACE,
            # aiohttp closes a connection idle this long since it opened or since its
            # last answer, headers half-sent included: a slow-header client is cut off.
            keepalive_timeout=self.limits.header_timeout,
        )
        await self._runner.setup()
        release_when_lost(self._runner.server)  # Python 3.11's cycle (gateway/core/transports.py)
        if self.lean_lane:
            await self._listen_lean()
        else:
            site = web.TCPSite(
                self._runner, self.host, self.port, reuse_port=self.reuse_port or None
            )
            await site.start()
            for address in self._runner.addresses:
                if isinstance(address, tuple):
                    self.port = int(address[1])
                    break
        if self.cluster is not None and self.cluster_options is not None:
            url = await self.cluster_options.internal_url(self._runner, self.host, self.port)
            try:
                await self.cluster.start(url)
            except Exception as exc:  # the store's own error (redis-py's, a file's)
                log.debug("cluster store at start", exc_info=True)
                said = scrub(str(exc)) or type(exc).__name__
                store = safe_url(self.cluster_options.store_url)
                raise StartupError(f"cannot join the cluster: store {store}: {said}") from None
        if self.console is not None:
            await self.console.start()
        for endpoint in self.endpoints:
            if endpoint.route.backend.targets is not None:  # several: each checked
                endpoint.route.backend.targets.start()
        log.info(
            "gateway listening", host=self.host, port=self.port, routes=[s.path for s in self.specs]
        )
        return self.port

    async def _listen_lean(self) -> None:
        """The listening socket, its connections carried by the lane, which hands
        to aiohttp's server every request it does not carry."""
        assert self._runner is not None and self._runner.server is not None
        endpoints = {endpoint.route.path: endpoint for endpoint in self.endpoints}
        self.lane = Lane(
            self._runner.server,
            endpoints,
            self._lane_hooks(),
            self.limits.header_timeout,
            local=self.cluster.here if self.cluster is not None else None,
            write_timeout=self.limits.stream_idle_timeout,
        )
        self._listener = await asyncio.get_running_loop().create_server(
            self.lane, self.host, self.port, backlog=128, reuse_port=self.reuse_port or None
        )
        self.port = int(self._listener.sockets[0].getsockname()[1])

    async def drain(self, deadline_s: float) -> int:
        """Stop accepting, then wait (up to ``deadline_s`` seconds) for the calls in flight.
        Returns how many were still running at the deadline."""
        self.work.draining = True
        await stop_accepting(self._runner, self._listener, self.lane, self.endpoints)
        return await self.work.wait(deadline_s)

    async def stop(self, drain_timeout: float = 0.0) -> None:
        """Drain, end the downstream sessions, end the upstream sessions (DELETE)."""
        if await self.drain(drain_timeout):
            await self.work.cut_off()
        await self._release()
        log.info("gateway stopped")

    def _owned_work(self) -> int:
        """What a draining cluster member waits for: calls in flight and parked calls."""
        return self.in_flight() + sum(
            e.route.backend.forwarder.parked_count for e in self.endpoints
        )

    async def _release(self) -> None:
        if self.console is not None:
            await self.console.stop()
        if self.cluster is not None:
            await self.cluster.close()
        for endpoint in self.endpoints:
            await endpoint.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.lane is not None:
            self.lane.close_all()
        for endpoint in self.endpoints:
            backend = endpoint.route.backend
            await (backend.targets or backend.link).close()
        for session in self._route_http:
            await session.close()
        if self._http is not None:
            await self._http.close()

    async def serve_forever(self, *, demo: bool = False) -> None:
        """Start (fronting the bundled demo server when ``demo``), serve until
        SIGTERM/SIGINT, then drain and stop within the drain timeout; a signal during
        start-up ends it cleanly too, never by the signal's default action."""
        demo_runner = None
        with Signals(self.work.force) as signals:
            try:
                if demo:
                    demo_runner = await self._front_demo()
                within = self.drain_timeout + SHUTDOWN_MARGIN
                if not await start_unless(self.start, self._abandon_start, signals.stop, within):
                    return
                freeze_startup_memory()
                routes = [(e.route.path, e.route.backend) for e in self.endpoints]
                summary = asyncio.create_task(watch(routes, say_in_log), name="route-summary")
                await signals.stop.wait()
                summary.cancel()
                await self._shut_down()
            finally:
                if demo_runner is not None:
                    await demo_runner.cleanup()

    async def _abandon_start(self) -> None:
        """A start that failed or was stopped: nothing more is accepted (a listener may
        be open already), then what it began is released."""
        self.work.draining = True
        await stop_accepting(self._runner, self._listener, self.lane, self.endpoints)
        await self._release()

    async def _front_demo(self) -> web.AppRunner:
        """No route given: the bundled demo server, started and fronted at /mcp."""
        demo_runner, url = await start_demo()
        self.specs = [RouteSpec(path="/mcp", upstream=url)]
        log.info(
            "no --route given: fronting the bundled demo server",
            route="/mcp",
            upstream=url,
            hint="pass --route PATH=URL to front your own MCP server",
        )
        return demo_runner

    async def _shut_down(self) -> None:
        """The way down after a signal, bounded by the watchdog."""
        started = time.monotonic()
        watchdog(self.drain_timeout + SHUTDOWN_MARGIN)
        if self.cluster is not None:
            # Keep listening while what this replica owns finishes (relayed to it).
            self.work.draining = True
            await self.cluster.drain(self.drain_timeout, self._owned_work)
        await self.stop(max(0.0, self.drain_timeout - (time.monotonic() - started)))


def _banner(versions: bool) -> str:
    """The Server header: the product alone, unless asked for versions (what runs where)."""
    return f"mcp-gateway/{__version__} {SERVER_SOFTWARE}" if versions else "mcp-gateway"


def _answer_begun(request: web.Request) -> bool:
    """Whether bytes of an answer to ``request`` have been written already."""
    return getattr(request.writer, "output_size", 0) > 0


def _add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    request_id = request.get(REQUEST_ID)
    if isinstance(request_id, str):
        response.headers.setdefault(REQUEST_ID_HEADER, request_id)
