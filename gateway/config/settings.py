"""The gateway's settings: flags over environment variables over a TOML file.

Every setting has one name in all three places: the `serve` flag (for the
common ones), the environment variable ``GATEWAY_<NAME>`` and the key in the
file given by ``--config`` / ``GATEWAY_CONFIG``.  Everything is checked on
load; :class:`SettingsError` carries one line that names the bad key and value.

Secrets never live in the file: an upstream credential is named there
(``headers_from_env`` / ``headers_from_file``) and read from the environment
or a mounted file when the gateway starts.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from gateway.bridge.backend import (
    DEFAULT_MAX_PARKED,
    DEFAULT_MAX_PARKED_PER_PRINCIPAL,
    DEFAULT_PARK_TTL_OVER_QUOTA,
)
from gateway.bridge.forwarder import DEFAULT_ASK_SETTLE, DEFAULT_PARK_TTL
from gateway.config import headers
from gateway.config.config_file import SettingsError as SettingsError
from gateway.config.config_file import read_config_file
from gateway.config.route_options import (
    BY_NAME,
    ROUTE_KEYS,
    did_you_mean,
    parse_options,
    shown_route,
    shown_upstream,
    split_outside_quotes,
    target_problem,
    unquote,
)
from gateway.config.store_url import store_url_problem
from gateway.core.redaction import REDACTED, is_secret_key, redact, scrub
from gateway.core.urls import http_url
from gateway.policy import Rate, Rule
from gateway.transport.route import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_FORWARD_HEADERS,
    DEFAULT_KEEPALIVE,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL,
    DEFAULT_MAX_NOTICES,
    DEFAULT_MAX_NOTICES_PER_PRINCIPAL,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
    DEFAULT_STREAM_IDLE_TIMEOUT,
)
from gateway.transport.sessions import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
)
from gateway.upstream.calls import QUESTIONS_AT_ONCE, QUESTIONS_PER_CALL
from gateway.upstream.link import UpstreamSettings
from gateway.upstream.settings import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
)

ENV_PREFIX = "GATEWAY_"
TRANSPORTS = ("auto", "http", "sse")
CACHE_SCOPES = ("private", "public")
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("auto", "json", "console")
EVENT_LOOPS = ("auto", "asyncio", "uvloop")
# Gateway-wide defaults (the per-route ones belong to the modules that use them).
DEFAULT_DRAIN_TIMEOUT = 30.0
DEFAULT_HEADER_TIMEOUT = 15.0
DEFAULT_FD_RESERVE = 128
# Options of the `--route PATH=UPSTREAM[,key=value...]` syntax: the one table
# (gateway/config/route_options.py) that the help, the errors and the reference come from.
ROUTE_OPTIONS = frozenset(BY_NAME)
# A route's `rate=off` (or `tool_rate=off`): no limit there, whatever the default.
RATE_OFF = "off"


STDIO_PREFIX = "stdio:"


class RouteSpec(BaseModel):
    """One route: a path of the gateway and the upstream MCP server behind it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    path: str
    upstream: str
    version: str | None = None
    transport: Literal["auto", "http", "sse", "stdio"] = "auto"
    timeout: float = Field(DEFAULT_REQUEST_TIMEOUT, gt=0)
    # How long one call may wait on its client in all (the upstream's questions being
    # answered: `timeout`'s clock is paused meanwhile), and each question at most.
    ask_timeout: float = Field(DEFAULT_ASK_TIMEOUT, gt=0)
    # The gateway-wide keepalive for this route's SSE answers (None: that one).
    keepalive: float | None = Field(None, ge=0)
    # More targets of the same server (HTTP upstreams): calls spread over the healthy
    # ones, a session stays on its own (gateway/upstream/targets.py).
    also: list[str] = Field(default_factory=list, max_length=32)
    # stdio upstreams: this many children of the command, as targets.
    instances: int = Field(1, ge=1, le=32)
    # How often each target of a route with several is checked (seconds).
    health_every: float = Field(5.0, ge=0.1, le=3600)  # a check loop never spins
    # stdio upstreams: extra environment for the command, and its working directory.
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    shared: bool = False  # stdio: one child for every caller, not one per client session
    per_principal: bool = False  # accepted for older configurations (now the default)
    # End an upstream session (DELETE) when its client's session ends; false only for
    # a server that cannot take it (e.g. mcp 1.9.x servers crash on DELETE).
    end_sessions: bool = True
    # Stateless clients in front of a handshake-era server that asks roots/list: asked
    # only when the server asks, a session then holding that client's roots alone
    # ("per-client", learning whether the server keeps roots per session); "per-session"
    # says it does (a call that may ask asks its client first); "shared": the roots
    # the pool was first given serve all its callers.
    roots: Literal["per-client", "per-session", "shared"] = "per-client"
    connect_timeout: float = Field(DEFAULT_CONNECT_TIMEOUT, gt=0)
    # An upstream's HTTP redirect: an error ("none"), or followed when it is a 307/308
    # on the upstream's own origin ("same-origin").  Never followed to another origin.
    redirects: Literal["none", "same-origin"] = "none"
    # Requests one call's upstream may have open at once, and send in all; past either
    # each is refused with a JSON-RPC error (and logged), never put to the client.
    questions_at_once: int = Field(QUESTIONS_AT_ONCE, gt=0, le=10_000)
    questions_per_call: int = Field(QUESTIONS_PER_CALL, gt=0, le=1_000_000)
    # Connections the h1 HTTP/1.1 client (calls to a plain-http upstream) keeps open
    # to the upstream at once: past it a call is refused.
    max_connections: int = Field(DEFAULT_MAX_CONNECTIONS, gt=0, le=1_000_000)
    # The largest message the upstream may send, in bytes (an SSE event, a JSON body, a
    # stdio line); past it the call gets a clear error.  None: 16 MiB HTTP, 32 MiB stdio.
    max_message: int | None = Field(None, ge=1024, le=1 << 30)
    # How long the era probe waits for an answer (a legacy stdio server may give none).
    probe_timeout: float = Field(DEFAULT_PROBE_TIMEOUT, gt=0)
    ttl_ms: int = Field(0, ge=0)
    cache_scope: Literal["private", "public"] = "private"
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    # Inbound headers forwarded upstream besides the defaults (authorization, trace context).
    forward_headers: list[str] = Field(default_factory=list)
    # Headers sent upstream on every request: header -> environment variable, or file.
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    headers_from_file: dict[str, str] = Field(default_factory=dict)
    # The route's URL as clients reach it (OAuth's resource identifier; else per request).
    public_url: str | None = None
    # OAuth: "transparent" passes the upstream's protection through to the client;
    # "gateway" checks bearer tokens here and calls the upstream with the route's own
    # credentials (headers_from_env / headers_from_file), never the client's token.
    auth: Literal["transparent", "gateway"] = "transparent"
    auth_issuer: str | None = None
    auth_jwks_uri: str | None = None  # default: the issuer's metadata's jwks_uri
    auth_scopes: list[str] = Field(default_factory=list)
    auth_introspection_url: str | None = None  # RFC 7662, for opaque tokens
    # The environment variable holding the Authorization header for introspection.
    auth_introspection_auth_env: str | None = None
    # What the route exposes: allow:PATTERN|... or deny:PATTERN|... (glob patterns on
    # tool and prompt names, resource URIs and URI templates); None: everything.
    tools: str | None = None
    prompts: str | None = None
    resources: str | None = None
    # Rate limits, per principal and per principal and tool: N/s, N/m or N/h with a
    # burst (default N), or "off"; None: the gateway-wide setting of the same name.
    rate: str | None = None
    burst: int | None = Field(None, ge=1)
    tool_rate: str | None = None
    tool_burst: int | None = Field(None, ge=1)
    # In a cluster, when the shared store is down: "open" (each replica limits on its
    # own) or "closed" (limited calls refused); None: the gateway-wide setting.
    rate_fallback: Literal["open", "closed"] | None = None

    @field_validator("tools", "prompts", "resources")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        if value is not None:
            Rule.parse(value)
        return value

    @field_validator("rate", "tool_rate")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        return check_rate(value)

    @field_validator("public_url", "auth_issuer", "auth_jwks_uri", "auth_introspection_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            http_url(value)
        return value

    @field_validator("also")
    @classmethod
    def _also(cls, value: list[str]) -> list[str]:
        for number, url in enumerate(value, 1):
            try:
                http_url(url)
            except ValueError as exc:
                raise ValueError(f"target {number} ({scrub(url)[:100]}): {exc}") from None
        return value

    @model_validator(mode="after")
    def _targets(self) -> RouteSpec:
        stdio = self.command is not None
        problem = target_problem(stdio, bool(self.also), self.instances, self.transport)
        if problem is not None:
            raise ValueError(problem)
        headers.set_upstream(self.headers_from_env, self.headers_from_file, self._urls)
        return self

    @property
    def _urls(self) -> list[str]:
        return [self.upstream, *self.also]  # a stdio command is no URL: it has no user info

    def _own_credentials(self, url: str) -> str:
        return headers.credentials_from(self.headers_from_env, self.headers_from_file, url)

    def target_settings(self) -> list[UpstreamSettings]:
        """Each target's settings: the upstream, then ``also``'s URLs or more instances."""
        first = self.upstream_settings()
        own = self._own_credentials
        more = [replace(first, url=url, credentials_from=own(url)) for url in self.also]
        more += [replace(first) for _ in range(self.instances - 1)]
        return [first, *more]

    @model_validator(mode="after")
    def _gateway_auth(self) -> RouteSpec:
        if self.auth == "gateway" and (not self.public_url or not self.auth_issuer):
            raise ValueError(
                "auth=gateway needs public_url (the audience tokens must name) and auth_issuer"
            )
        return self

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value

    @field_validator("upstream")
    @classmethod
    def _upstream(cls, value: str) -> str:
        if value.startswith(STDIO_PREFIX):
            if not shlex.split(value[len(STDIO_PREFIX) :]):
                raise ValueError("stdio: needs a command, e.g. stdio:'npx -y some-server /data'")
            return value
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL or stdio:COMMAND")
        http_url(value)
        return value

    def forwarded_headers(self) -> tuple[str, ...]:
        """The client headers the route passes upstream: never one the gateway sets for
        the upstream itself, and with auth=gateway never the client's token."""
        static = headers.set_upstream(self.headers_from_env, self.headers_from_file, self._urls)
        if self.auth == "gateway":
            static.add("authorization")
        names = (*DEFAULT_FORWARD_HEADERS, *self.forward_headers)
        return tuple(dict.fromkeys(name for name in names if name not in static))

    @property
    def command(self) -> list[str] | None:
        """The argv of a stdio upstream (``stdio:COMMAND``), else None."""
        if not self.upstream.startswith(STDIO_PREFIX):
            return None
        return shlex.split(self.upstream[len(STDIO_PREFIX) :])

    def upstream_settings(self) -> UpstreamSettings:
        """What the upstream link needs to reach this route's server."""
        command = self.command
        return UpstreamSettings(
            url=self.upstream if command is None else "",
            transport="stdio" if command is not None else self.transport,
            version=self.version,
            request_timeout=self.timeout,
            ask_timeout=self.ask_timeout,
            connect_timeout=self.connect_timeout,
            probe_timeout=self.probe_timeout,
            command=command,
            env=dict(self.env) or None,
            cwd=self.cwd,
            shared=self.shared,
            end_sessions=self.end_sessions,
            roots=self.roots,
            redirects=self.redirects,
            questions_at_once=self.questions_at_once,
            questions_per_call=self.questions_per_call,
            max_connections=self.max_connections,
            max_message=self.max_message,
            route=self.path,
            credentials_from=self._own_credentials(self.upstream),
        )

    @field_validator("forward_headers")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [name.strip().lower() for name in value if name.strip()]

    @classmethod
    def parse(cls, text: str) -> RouteSpec:
        """``PATH=UPSTREAM[,key=value...]``, the `--route` syntax."""
        path, sep, rest = text.partition("=")
        shown = shown_route(path, rest)  # as errors repeat it: no secrets, no options
        if not sep or not path.startswith("/") or not rest:
            raise SettingsError(
                f"--route {shown!r}: expected PATH=UPSTREAM, e.g. /mcp=http://127.0.0.1:3000/mcp"
            )
        try:
            upstream, *options = split_outside_quotes(rest)
            values: dict[str, Any] = {"path": path, **parse_options(options)}
        except ValueError as exc:
            raise SettingsError(f"--route {shown!r}: {scrub(str(exc))}") from None
        # A URL's quotes are the --route's; a stdio command keeps them for its shlex split.
        values["upstream"] = upstream if upstream.startswith(STDIO_PREFIX) else unquote(upstream)
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise SettingsError(f"--route {shown!r}: {describe(exc)}") from None

    def upstream_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The static upstream headers, read from the environment and files now."""
        try:
            return headers.static_headers(
                self.path, self.headers_from_env, self.headers_from_file, environ
            )
        except headers.HeaderError as exc:
            raise SettingsError(str(exc)) from None

    def introspection_auth(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The Authorization header for the introspection endpoint, read now."""
        variable = self.auth_introspection_auth_env
        try:
            return (
                headers.introspection_header(self.path, variable, environ)
                if variable is not None
                else None
            )
        except headers.HeaderError as exc:
            raise SettingsError(str(exc)) from None


def check_rate(value: str | None) -> str | None:
    """A rate option's value: N/s, N/m, N/h or "off" (ValueError otherwise)."""
    if value is not None and value.strip().lower() != RATE_OFF:
        Rate.parse(value)
    return value


def _routes(value: Any) -> Any:
    """Routes as the file, the environment or the flags give them."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc}") from exc
        else:
            value = [part.strip() for part in text.split(";") if part.strip()]
    if isinstance(value, list | tuple):
        return [RouteSpec.parse(item) if isinstance(item, str) else item for item in value]
    return value


# The parsed config file of the load in progress (see `load_settings`).
_FILE_DATA: ContextVar[dict[str, Any] | None] = ContextVar("gateway_file_data", default=None)


class _FileSource(PydanticBaseSettingsSource):
    """The TOML file given by --config / GATEWAY_CONFIG: below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        data = _FILE_DATA.get() or {}
        return data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get() or {})


class Settings(BaseSettings):
    """Everything `gateway serve` needs."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", case_sensitive=False, validate_default=True
    )

    config: Path | None = None
    listen: str = "127.0.0.1:8080"
    routes: Annotated[list[RouteSpec], NoDecode] = Field(default_factory=list)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # auto: console lines at a terminal, else JSON lines.
    log_format: Literal["auto", "json", "console"] = "auto"
    # auto: uvloop when it is installed (the `uvloop` extra), else asyncio's own loop.
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"
    session_idle_timeout: float = Field(DEFAULT_IDLE_TIMEOUT, gt=0)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY, gt=0)
    drain_timeout: float = Field(DEFAULT_DRAIN_TIMEOUT, ge=0)
    park_ttl: float = Field(DEFAULT_PARK_TTL, gt=0)
    max_parked: int = Field(DEFAULT_MAX_PARKED, gt=0)
    # Quotas per principal (a keyed digest of credentials and tenant headers) and in
    # all, per route; over one: a clear error (429, or 503 for a global bound).
    max_parked_per_principal: int = Field(DEFAULT_MAX_PARKED_PER_PRINCIPAL, gt=0)
    # Once a principal is at its parked-call quota, its parked calls live this long.
    park_ttl_over_quota: float = Field(DEFAULT_PARK_TTL_OVER_QUOTA, gt=0)
    # Questions an upstream asks during one call within this many seconds of each
    # other reach a stateless client as one input_required round.
    ask_settle: float = Field(DEFAULT_ASK_SETTLE, ge=0, le=5)
    max_sessions: int = Field(DEFAULT_MAX_SESSIONS, gt=0)
    max_sessions_per_principal: int = Field(DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, gt=0)
    max_streams: int = Field(DEFAULT_MAX_STREAMS, gt=0)
    max_streams_per_principal: int = Field(DEFAULT_MAX_STREAMS_PER_PRINCIPAL, gt=0)
    # Client notifications being passed upstream at once (no answer is owed: past
    # either bound they are dropped and logged).
    max_notices: int = Field(DEFAULT_MAX_NOTICES, gt=0)
    max_notices_per_principal: int = Field(DEFAULT_MAX_NOTICES_PER_PRINCIPAL, gt=0)
    max_inflight: int = Field(DEFAULT_MAX_INFLIGHT, gt=0)
    max_inflight_per_principal: int = Field(DEFAULT_MAX_INFLIGHT_PER_PRINCIPAL, gt=0)
    # The most messages in one JSON-RPC batch (the revisions that have batches).
    max_batch: int = Field(DEFAULT_MAX_BATCH, gt=0)
    # Connections and time: request headers (and keep-alive idling) and bodies must
    # arrive within these; a standalone stream idle this long is ended or pinged.
    header_timeout: float = Field(DEFAULT_HEADER_TIMEOUT, gt=0)
    body_timeout: float = Field(DEFAULT_BODY_TIMEOUT, gt=0)
    stream_idle_timeout: float = Field(DEFAULT_STREAM_IDLE_TIMEOUT, gt=0)
    # An open SSE answer to a client (a standalone or HTTP+SSE stream, a long call's,
    # a listen) quiet this long gets a comment, so that idle proxies keep it; 0: never.
    keepalive: float = Field(DEFAULT_KEEPALIVE, ge=0)
    # File descriptors kept free: with fewer than this left under the process's
    # limit, new requests get 503 (the ops endpoints still answer).
    fd_reserve: int = Field(DEFAULT_FD_RESERVE, ge=0)
    # Host names /healthz, /readyz and /metrics answer besides loopback ones (a
    # scraper's); on a non-loopback listener with none listed, any Host.
    scrape_hosts: list[str] = Field(default_factory=list)
    # Whether X-Forwarded-* / Forwarded headers (from a proxy in front) say the public URL.
    trust_forwarded: bool = False
    # Several replicas as one: the shared store (redis://HOST:PORT/DB, or file:///DIR for
    # one machine), the URL the other replicas reach this one at, worker processes.
    cluster: str | None = None
    advertise: str | None = None
    workers: int = Field(1, ge=1, le=256)
    # A Redis cluster store's connections per process, and how long a store operation
    # waits for one before the request gets a 503 (seconds).  The same defaults as
    # gateway.cluster.store's POOL_SIZE and POOL_TIMEOUT (settings cannot import it).
    cluster_pool: int = Field(100, ge=1, le=10_000)
    cluster_pool_timeout: float = Field(2.0, gt=0)
    # A spent requestState's marker waits (WAIT, 1 s) for a replica of a Redis store to
    # hold it, once the primary has had one: a round is not finished on a marker a
    # failover could lose (503 to send again).  false: a marker is the primary's alone.
    cluster_confirm: bool = True
    # Set by `--workers` for its children: they share the listening port.
    reuse_port: bool = False
    # The usual Streamable HTTP POST served by the gateway's own HTTP/1.1 lane instead
    # of aiohttp's server (every other request still goes to aiohttp).
    lean_lane: bool = True
    pass_through: bool = True  # calls needing no translation: transport/passthrough.py
    server_banner: bool = False  # the Server header with versions (what runs where)
    # The operators' console (gateway/console): off unless asked for, on a listener of
    # its own; its token only from GATEWAY_CONSOLE_TOKEN.  Bodies are recorded only
    # when asked for; each route keeps its last ``console_calls`` calls.
    console: bool = False
    console_listen: str = "127.0.0.1:9090"
    console_bodies: bool = False
    console_calls: int = Field(200, ge=1, le=10_000)
    # Requests a second the console serves to the token's holder, and to each other
    # source address (wrong or no token): a burst of guesses cannot lock the holder out.
    console_rate: float = Field(20.0, gt=0, le=100_000)
    # Rate limits of every route that sets none of its own (route options of the same
    # names): per principal, and per principal and tool, N/s, N/m or N/h, with bursts.
    rate: str | None = None
    burst: int | None = Field(None, ge=1)
    tool_rate: str | None = None
    tool_burst: int | None = Field(None, ge=1)
    # In a cluster, rate limits when the shared store is down: "open" (each replica
    # limits on its own) or "closed" (limited calls refused until it answers).
    rate_fallback: Literal["open", "closed"] = "open"

    @field_validator("rate", "tool_rate")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        return check_rate(value)

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str | None) -> str | None:
        problem = store_url_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("advertise")
    @classmethod
    def _advertise(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("expected the URL other replicas reach this one at, http://HOST:PORT")
        return value

    @field_validator("routes", mode="before")
    @classmethod
    def _parse_routes(cls, value: Any) -> Any:
        return _routes(value)

    @field_validator("log_level", "log_format", "event_loop", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        if value.isdigit():  # a bare port: on loopback
            value = f"127.0.0.1:{value}"
        _host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8080")
        return value

    @model_validator(mode="after")
    def _unique_paths(self) -> Settings:
        seen: set[str] = set()
        for route in self.routes:
            if route.path in seen:
                raise ValueError(f"two routes share the path {route.path}")
            seen.add(route.path)
        return self

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]") or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)


def load_settings(flags: Mapping[str, Any] | None = None) -> Settings:
    """Settings from ``flags`` (the ones given; None means not given), the
    environment and the config file.  Raises :class:`SettingsError`."""
    given = {k: v for k, v in (flags or {}).items() if v is not None and v != []}
    config = given.get("config") or os.environ.get(ENV_PREFIX + "CONFIG")
    data = read_config_file(Path(config)) if config else {}
    token = _FILE_DATA.set(data)
    try:
        return Settings(**given)
    except ValidationError as exc:
        where = f" (config file {config})" if config else ""
        raise SettingsError(f"invalid settings{where}: {describe(exc)}") from exc
    except ValueError as exc:  # pydantic-settings' own errors (e.g. undecodable env values)
        raise SettingsError(f"invalid settings: {_one_line(str(exc))}") from exc
    finally:
        _FILE_DATA.reset(token)


def describe(exc: ValidationError) -> str:
    """A validation error as one line: `key = value: what is wrong` for each problem."""
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "settings"
        message = error["msg"].removeprefix("Value error, ")
        whole = error["input"] if isinstance(error["input"], dict) else None
        if message.startswith("--route ") or not error["loc"]:
            parts.append(scrub(message))  # a rule of the whole: its input is not one value
        elif whole is not None and error["type"] == "value_error":  # a route's own rule
            parts.append(f"{key} ({scrub(str(whole.get('path', '?')))[:80]}): {scrub(message)}")
        elif error["type"] == "extra_forbidden":
            parts.append(f"{key}: unknown setting{_nearest(error['loc'])}")
        elif error["type"] == "missing":
            parts.append(f"{key}: required")
        else:
            parts.append(f"{key} = {_shown(error['loc'], error['input'])!r}: {scrub(message)}")
    return _one_line("; ".join(parts))


def _shown(loc: tuple[int | str, ...], value: Any) -> Any:
    """A value an error repeats: an upstream as a route error shows one, routes' text
    not at all (it holds their commands), a secret's place redacted."""
    if loc[-1:] == ("upstream",) and isinstance(value, str):
        return shown_upstream(value)
    if (loc == ("routes",) and isinstance(value, str)) or any(map(_secret_place, loc)):
        return REDACTED
    return redact(value)


def _secret_place(part: int | str) -> bool:
    """A place in the settings whose value may be a secret: a secret-looking name that
    is no setting or route option (an env= variable's, a header's; ``auth`` is not)."""
    known = part in RouteSpec.model_fields or part in Settings.model_fields
    return not known and is_secret_key(part)


def _nearest(loc: tuple[int | str, ...]) -> str:
    """ "Did you mean" for an unknown key: a route's (routes.N.key) or a setting's."""
    word = str(loc[-1])
    if len(loc) > 1 and loc[0] == "routes":
        return did_you_mean(word, (*ROUTE_KEYS, *BY_NAME))
    return did_you_mean(word, Settings.model_fields)


def _one_line(text: str) -> str:
    return " ".join(text.split())
