"""The `gateway` command line.

    gateway serve [--config FILE] [--listen HOST:PORT] [--route PATH=UPSTREAM[,key=value...]]...
    gateway probe UPSTREAM [--json] [--version REV] [--transport auto|http|sse]
    gateway version

Settings come from flags, then ``GATEWAY_*`` environment variables, then the
config file; a bad one is reported on one line and the exit code is 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import typer
from pydantic import ValidationError

from gateway import __version__, otel
from gateway.bridge.backend import Backend
from gateway.bridge.principal import Principals, tenant_headers
from gateway.bridge.state import StateSealer
from gateway.config import route_options
from gateway.config.headers import set_upstream
from gateway.config.setting_table import help_of
from gateway.config.settings import (
    EVENT_LOOPS,
    LOG_FORMATS,
    LOG_LEVELS,
    STDIO_PREFIX,
    TRANSPORTS,
    RouteSpec,
    Settings,
    SettingsError,
    describe,
    load_settings,
)
from gateway.core import Failure, tracing
from gateway.observability import configure_logging
from gateway.policy import FALLBACKS
from gateway.process.app import Gateway
from gateway.process.lifecycle import Signals, StartupError, loop_factory, watchdog_after
from gateway.process.probe_report import as_text, probe_upstream
from gateway.process.route_check import RouteVerdict, reach_all, startable
from gateway.process.start_options import describe_settings, state_key_from_env
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.route import Route
from gateway.transport.stdio import run_stdio
from gateway.upstream.link import UpstreamLink
from gateway.upstream.settings import DEFAULT_REQUEST_TIMEOUT

app = typer.Typer(
    help=(
        "An MCP gateway: lets a client of any MCP protocol revision use a server of any "
        "other.\n\nRun `gateway serve --route /mcp=http://127.0.0.1:3000/mcp` to front an "
        "upstream server, `gateway probe URL` to see what a server speaks."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

USAGE_ERROR = 2
# `gateway stdio` once signalled: 10 s of grace, the stdio server's stop (up to 6 s), 9 s.
STDIO_STOP_LIMIT = 25.0


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """An MCP gateway: lets a client of any MCP protocol revision use a server of any other."""


def _fail(message: str, code: int = USAGE_ERROR) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code)


def _choice(name: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    if value is not None and value.lower() not in choices:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}", param_hint=name)
    return value.lower() if value is not None else None


# The options of `gateway serve`.
RouteOption = Annotated[
    list[str] | None,
    typer.Option(
        "--route",
        "-r",
        metavar="PATH=UPSTREAM[,key=value...]",
        help=route_options.help_text(),
    ),
]

ListenOption = Annotated[
    str | None,
    typer.Option(metavar="HOST:PORT", help=help_of("listen")),
]

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", metavar="FILE", help=help_of("config")),
]

LogLevelOption = Annotated[
    str | None,
    typer.Option(metavar="LEVEL", help=help_of("log_level")),
]

LogFormatOption = Annotated[
    str | None,
    typer.Option(metavar="FORMAT", help=help_of("log_format")),
]

DrainTimeoutOption = Annotated[
    float | None,
    typer.Option(metavar="SECONDS", help=help_of("drain_timeout")),
]

LoopOption = Annotated[
    str | None,
    typer.Option("--loop", metavar="LOOP", help=help_of("event_loop")),
]

LeanLaneOption = Annotated[
    bool | None,
    typer.Option("--lean-lane/--no-lean-lane", help=help_of("lean_lane")),
]
PassThroughOption = Annotated[
    bool | None,
    typer.Option("--pass-through/--no-pass-through", help=help_of("pass_through")),
]

MaxBatchOption = Annotated[
    int | None,
    typer.Option(metavar="N", help=help_of("max_batch")),
]

TrustForwardedOption = Annotated[
    bool | None,
    typer.Option("--trust-forwarded", help=help_of("trust_forwarded")),
]
ClusterOption = Annotated[
    str | None,
    typer.Option(metavar="URL", help=help_of("cluster")),
]
AdvertiseOption = Annotated[
    str | None,
    typer.Option(metavar="URL", help=help_of("advertise")),
]
ClusterPoolOption = Annotated[
    int | None,
    typer.Option(metavar="N", help=help_of("cluster_pool")),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(metavar="N", help=help_of("workers")),
]

RateOption = Annotated[
    str | None,
    typer.Option(metavar="N/s", help=help_of("rate")),
]
ToolRateOption = Annotated[
    str | None,
    typer.Option(metavar="N/s", help=help_of("tool_rate")),
]
RateFallbackOption = Annotated[
    str | None,
    typer.Option(metavar="open|closed", help=help_of("rate_fallback")),
]

ConsoleOption = Annotated[
    bool,
    typer.Option("--console", help=help_of("console")),
]
ConsoleListenOption = Annotated[
    str | None,
    typer.Option(metavar="HOST:PORT", help=help_of("console_listen")),
]
ConsoleBodiesOption = Annotated[
    bool,
    typer.Option("--console-bodies", help=help_of("console_bodies")),
]

CheckConfigOption = Annotated[
    bool,
    typer.Option(
        "--check-config",
        help="Validate the settings, print them as JSON (and a verdict on stderr) and exit "
        "without serving; `gateway check --reach` also reaches every upstream.",
    ),
]


@app.command()
def serve(
    route: RouteOption = None,
    listen: ListenOption = None,
    config: ConfigOption = None,
    log_level: LogLevelOption = None,
    log_format: LogFormatOption = None,
    drain_timeout: DrainTimeoutOption = None,
    loop: LoopOption = None,
    lean_lane: LeanLaneOption = None,
    pass_through: PassThroughOption = None,
    max_batch: MaxBatchOption = None,
    trust_forwarded: TrustForwardedOption = None,
    cluster: ClusterOption = None,
    advertise: AdvertiseOption = None,
    cluster_pool: ClusterPoolOption = None,
    workers: WorkersOption = None,
    rate: RateOption = None,
    tool_rate: ToolRateOption = None,
    rate_fallback: RateFallbackOption = None,
    console: ConsoleOption = False,
    console_listen: ConsoleListenOption = None,
    console_bodies: ConsoleBodiesOption = False,
    check_config: CheckConfigOption = False,
) -> None:
    """Serve MCP clients of every revision in front of the given upstream servers.

    Every setting is also an environment variable GATEWAY_<NAME> and a key of the
    config file (docs/reference/settings.md lists them all, with their defaults);
    flags win over the environment, which wins over the file.
    """
    flags: dict[str, Any] = {
        "config": config,
        "listen": listen,
        "routes": route or None,
        "log_level": _choice("--log-level", log_level, LOG_LEVELS),
        "log_format": _choice("--log-format", log_format, LOG_FORMATS),
        "drain_timeout": drain_timeout,
        "event_loop": _choice("--loop", loop, EVENT_LOOPS),
        "lean_lane": lean_lane,
        "pass_through": pass_through,
        "max_batch": max_batch,
        "trust_forwarded": trust_forwarded or None,
        "cluster": cluster,
        "advertise": advertise,
        "cluster_pool": cluster_pool,
        "workers": workers,
        "rate": rate,
        "tool_rate": tool_rate,
        "rate_fallback": _choice("--rate-fallback", rate_fallback, FALLBACKS),
        "console": console or None,
        "console_listen": console_listen,
        "console_bodies": console_bodies or None,
    }
    settings, gateway = _checked(flags)
    _start(settings, gateway, check_config=check_config)


def _start(settings: Settings, gateway: Gateway, *, check_config: bool) -> None:
    """Print the effective settings (--check-config), or serve: here, or in workers."""
    if check_config:
        typer.echo(describe_settings(settings))
        routes = len(settings.routes) or 1  # none given: the bundled demo's
        typer.echo(
            f"settings are valid: {routes} route(s); `gateway check --reach` reaches them", err=True
        )
        return
    configure_logging(settings.log_level, settings.log_format)
    if settings.workers > 1:
        from gateway.cluster.workers import run_workers

        if settings.port == 0:
            raise _fail("--workers needs a fixed port in --listen (they share it)")
        raise typer.Exit(run_workers(settings.workers, sys.argv[2:], settings.cluster))
    _run(settings, gateway)


def _checked(flags: dict[str, Any]) -> tuple[Settings, Gateway]:
    """The effective settings and the gateway they make, every route's secrets and
    revision checked now (not at the first call); a problem is one `Error:` line and
    exit code 2."""
    try:
        settings = load_settings(flags)
        loop_factory(settings.event_loop)
        gateway = Gateway.from_settings(settings)
        for spec in settings.routes:
            spec.upstream_headers()
            spec.introspection_auth()
            _check_version(spec.version, f"route {spec.path}", gateway.adapters)
            _check_era(spec, f"route {spec.path}", gateway.adapters)
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    return settings, gateway


def _run(settings: Settings, gateway: Gateway) -> None:
    """Serve until a signal ends it (traced when the OTEL_* environment says so)."""
    otel.start()
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            runner.run(gateway.serve_forever(demo=not settings.routes))
    except OSError as exc:  # e.g. the port is taken
        raise _fail(f"cannot listen on {settings.listen}: {exc.strerror or exc}", 1) from None
    except StartupError as exc:
        raise _fail(str(exc), 1) from None
    except KeyboardInterrupt:  # a signal before the handlers were installed
        raise typer.Exit(130) from None
    finally:
        otel.stop()


def _check_version(version: str | None, where: str, adapters: AdapterSet) -> None:
    if version is not None and version not in adapters.by_version:
        raise SettingsError(
            f"{where}: unknown revision {version!r} (known: {', '.join(adapters.versions)})"
        )


def _check_era(spec: RouteSpec, where: str, adapters: AdapterSet) -> None:
    """A revision pinned with a transport of another era: HTTP+SSE is the handshake
    era's (a stateless server has none), so that route could never work."""
    if spec.transport == "sse" and adapters.names_stateless(spec.version):
        raise SettingsError(
            f"{where}: transport=sse is the handshake era's; a {spec.version} "
            "server speaks Streamable HTTP (transport=http) or stdio"
        )


PROBLEM = 1


@app.command()
def check(
    route: RouteOption = None,
    config: ConfigOption = None,
    reach: Annotated[
        bool, typer.Option("--reach", help="Also reach every upstream and say what it speaks.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(metavar="SECONDS", help="With --reach: how long each may take.", min=0.1),
    ] = 15.0,
) -> None:
    """Check a configuration (the same --config / --route / GATEWAY_* as `serve`) without
    serving: a verdict per route; exit 0 when all are good, 1 when a route has a problem
    (a stdio command that cannot be started; with --reach, an upstream that cannot be
    used), 2 when the settings are invalid."""
    settings, gateway = _checked({"config": config, "routes": route or None})
    if not settings.routes:
        typer.echo("ok   no routes: `gateway serve` would front its bundled demo server at /mcp")
        return
    if not reach:
        lines = [startable(spec.path, spec.target_settings()) for spec in settings.routes]
        typer.echo("\n".join(text for text, _ in lines))
        if not all(ok for _, ok in lines):
            raise typer.Exit(PROBLEM)
        return
    verdicts = asyncio.run(_reach_routes(settings, gateway, timeout))
    for verdict in verdicts:
        typer.echo(verdict.text())
    if not all(verdict.ok for verdict in verdicts):
        raise typer.Exit(PROBLEM)


async def _reach_routes(settings: Settings, gateway: Gateway, within: float) -> list[RouteVerdict]:
    configure_logging("error", "console")
    adapters = gateway.adapters
    sessions = [aiohttp.ClientSession(headers=spec.upstream_headers()) for spec in settings.routes]
    links = [
        (spec.path, [UpstreamLink(each, adapters, session) for each in spec.target_settings()])
        for spec, session in zip(settings.routes, sessions, strict=True)
    ]
    try:
        return await reach_all(links, within)
    finally:
        for (_, targets), session in zip(links, sessions, strict=True):
            for link in targets:
                await link.close()
            await session.close()


# Options `probe` and `stdio` share: how to reach and name the upstream.
VersionOption = Annotated[
    str | None,
    typer.Option(
        "--version", metavar="REV", help="Pin the upstream's revision instead of probing."
    ),
]
TransportOption = Annotated[
    str, typer.Option(metavar="TRANSPORT", help="auto, http (Streamable HTTP) or sse.")
]
HeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        metavar="NAME=ENV_VAR",
        help="Send header NAME (e.g. Authorization) upstream with the value of environment "
        "variable ENV_VAR (NAME:ENV_VAR, as the route option writes it, works too); "
        "repeatable.",
    ),
]


@app.command()
def probe(
    upstream: Annotated[
        str,
        typer.Argument(metavar="UPSTREAM", help="The server: an http(s):// URL or stdio:COMMAND."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    version: VersionOption = None,
    transport: TransportOption = "auto",
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="The whole probe's time.", min=0.001)
    ] = 30.0,
    header: HeaderOption = None,
) -> None:
    """Probe an upstream MCP server: its era, revision, transport, identity and what it offers."""
    transport = _choice("--transport", transport, TRANSPORTS) or "auto"
    adapters = AdapterSet.default()
    try:
        spec = _upstream_spec(upstream, version, transport, timeout)
        _check_version(version, "--version", adapters)
        _check_era(spec, "--transport", adapters)
        headers = _env_headers(header or [], upstream)
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    configure_logging("warning", "console")
    settings = replace(
        spec.upstream_settings(),
        connect_timeout=min(timeout, 10.0),
        probe_timeout=min(timeout, 10.0),
    )
    try:
        report = asyncio.run(asyncio.wait_for(probe_upstream(settings, adapters, headers), timeout))
    except TimeoutError:
        raise _fail(f"probe of {upstream}: no answer within --timeout {timeout:g} s", 1) from None
    except Failure as failure:
        raise _fail(f"probe of {upstream} failed: {failure.message}", 1) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise _fail(f"probe of {upstream} failed: {exc or type(exc).__name__}", 1) from None
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(as_text(report))


def _upstream_spec(upstream: str, version: str | None, transport: str, timeout: float) -> RouteSpec:
    """An UPSTREAM argument (http(s) URL or stdio:COMMAND) checked like a route's."""
    values: dict[str, Any] = {"path": "/", "upstream": upstream, "timeout": timeout}
    if version is not None:
        values["version"] = version
    if not upstream.startswith(STDIO_PREFIX):
        values["transport"] = transport
    try:
        return RouteSpec.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(
            f"UPSTREAM {route_options.shown_upstream(upstream)!r}: {describe(exc)}"
        ) from None


@app.command()
def stdio(
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream",
            metavar="UPSTREAM",
            help="The server to front: an http(s):// URL or stdio:COMMAND.",
        ),
    ],
    version: VersionOption = None,
    transport: TransportOption = "auto",
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Per-call upstream timeout.", min=0.001)
    ] = DEFAULT_REQUEST_TIMEOUT,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "warning",
    header: HeaderOption = None,
) -> None:
    """Serve one local stdio MCP client, of any revision, in front of an upstream of any other.

    stdin/stdout carry the client's JSON-RPC; logs go to stderr.
    """
    transport = _choice("--transport", transport, TRANSPORTS) or "auto"
    adapters = AdapterSet.default()
    try:
        spec = _upstream_spec(upstream, version, transport, timeout)
        _check_version(version, "--version", adapters)
        _check_era(spec, "--transport", adapters)
        headers = {k.lower(): v for k, v in _env_headers(header or [], upstream).items()}
        level = _choice("--log-level", log_level, LOG_LEVELS) or "warning"
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    configure_logging(level, "json", sys.stderr)
    otel.start()
    try:
        asyncio.run(_serve_stdio(spec, adapters, headers))
    finally:
        otel.stop()


async def _serve_stdio(spec: RouteSpec, adapters: AdapterSet, headers: dict[str, str]) -> None:
    async with aiohttp.ClientSession() as http:
        link = UpstreamLink(spec.upstream_settings(), adapters, http)
        # The same parking TTL and state key settings as `gateway serve` (environment).
        key = state_key_from_env() or secrets.token_bytes(32)
        sealer = StateSealer(key, ttl=Settings().park_ttl)
        forward = tuple(headers) or ("authorization",)
        route = Route(
            path=spec.path,
            backend=Backend(link, adapters, sealer=sealer),
            adapters=adapters,
            guard=OriginGuard(loopback_only=True),
            forward_headers=forward,
            principals=Principals(key, tenant_headers(forward)),
            pass_through=Settings().pass_through,
        )
        if tracing.active is not None:  # the finished call's outcome on its span
            route.observer = tracing.active
        # A first signal ends the input (the calls in flight finish), a second the
        # wait; either way the stdio server is stopped gracefully, never orphaned.
        force = asyncio.Event()
        with Signals(force) as signals:
            # Bounded once signalled, whatever holds it (an initialize still waiting
            # on its server, a DELETE to one that hangs): the grace, the stdio
            # server's stop, a margin.
            armed = asyncio.create_task(watchdog_after(signals.stop, STDIO_STOP_LIMIT))
            try:
                await run_stdio(route, headers=headers, stop=signals.stop, force=force)
            finally:
                await route.backend.close()
                await link.close()
                armed.cancel()


def _env_headers(specs: list[str], upstream: str) -> dict[str, str]:
    """``--header`` values read from the environment, for requests to ``upstream`` (whose
    URL's user info is an Authorization of its own: not both)."""
    headers = {}
    for spec in specs:
        # NAME=ENV_VAR, or NAME:ENV_VAR as the route option headers_from_env writes it.
        name, eq, variable = spec.partition("=") if "=" in spec else spec.partition(":")
        if not eq or not name or not variable:
            raise SettingsError(f"--header {spec!r}: expected NAME=ENV_VAR (or NAME:ENV_VAR)")
        if variable not in os.environ:
            raise SettingsError(f"--header {spec!r}: environment variable {variable} is not set")
        headers[name] = os.environ[variable]
    try:
        set_upstream(headers, {}, [upstream])
    except ValueError as exc:
        raise SettingsError(f"--header: {exc}") from None
    return headers


@app.command()
def demo(listen: ListenOption = None) -> None:
    """Run the bundled demo server alone (a handshake-era MCP server at /mcp), e.g. as
    the upstream of several gateway replicas."""
    listen = listen or "127.0.0.1:3000"
    host, _, port = (f"127.0.0.1:{listen}" if listen.isdigit() else listen).rpartition(":")
    if not port.isdigit():
        raise _fail("--listen: expected HOST:PORT, e.g. 127.0.0.1:3000")
    asyncio.run(_serve_demo(host.strip("[]") or "127.0.0.1", int(port)))


async def _serve_demo(host: str, port: int) -> None:
    from gateway.demo import start_demo

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before it listens: a signal then ends it
        loop.add_signal_handler(sig, stop.set)
    runner, url = await start_demo(host, port)
    typer.echo(f"demo MCP server at {url}", err=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


@app.command()
def version() -> None:
    """Print the gateway's version."""
    typer.echo(__version__)


def main() -> None:  # pragma: no cover - the console script
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
