"""The one table of gateway-wide settings.

`serve --help` (each flag's help), docs/reference/settings.md
(``python -m gateway.config.setting_table``) and the checks on
config/gateway.example.toml are made from :data:`SETTINGS`; a test keeps it and
:class:`gateway.config.settings.Settings`' fields the same set.  Defaults are read
from the model, never written twice.  (Route options have their table in
:mod:`gateway.config.route_options`.)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticUndefined

from gateway.config.settings import ENV_PREFIX, Settings

__all__ = ["SETTINGS", "Setting", "default_of", "env_name", "help_of", "markdown"]


@dataclass(frozen=True)
class Setting:
    name: str  # the TOML key (and GATEWAY_<NAME>)
    value: str  # what the value looks like, for a person
    meaning: str
    flag: str = ""  # the `serve` flag, when there is one
    default: str = ""  # the default as a person reads it, where the model's says less


def _s(name: str, value: str, meaning: str, flag: str = "", default: str = "") -> Setting:
    return Setting(name, value, meaning, flag, default)


SETTINGS: tuple[Setting, ...] = (
    _s("config", "FILE", "a TOML config file (config/gateway.example.toml)", "--config"),
    _s("listen", "HOST:PORT", "where to listen (a bare PORT: on 127.0.0.1)", "--listen"),
    _s(
        "routes",
        "ROUTE...",
        "the routes (a JSON list, or ';'-separated specs, in GATEWAY_ROUTES): "
        "docs/reference/route-options.md",
        "--route",
    ),
    _s("log_level", "debug|info|warning|error", "what is logged", "--log-level"),
    _s(
        "log_format",
        "auto|json|console",
        "json (one object a line), console, or auto: console at a terminal, else json",
        "--log-format",
    ),
    _s(
        "event_loop",
        "auto|asyncio|uvloop",
        "the event loop: auto is uvloop when it is installed (the `uvloop` extra)",
        "--loop",
    ),
    _s("session_idle_timeout", "SECONDS", "a client session idle this long is forgotten"),
    _s("max_body_bytes", "BYTES", "the largest request body accepted (larger ones get 413)"),
    _s(
        "drain_timeout",
        "SECONDS",
        "on SIGTERM/SIGINT, how long calls in flight may finish",
        "--drain-timeout",
    ),
    _s("park_ttl", "SECONDS", "how long a parked call (and its requestState) lives"),
    _s("max_parked", "N", "parked calls per route at once (beyond: 503)"),
    _s("max_parked_per_principal", "N", "parked calls per caller (its oldest released)"),
    _s(
        "park_ttl_over_quota",
        "SECONDS",
        "a caller at its parked-call quota: how long its parked calls live",
    ),
    _s(
        "ask_settle",
        "SECONDS",
        "questions an upstream asks within this of each other reach a stateless client as "
        "one input_required round",
    ),
    _s("max_sessions", "N", "client sessions per route"),
    _s("max_sessions_per_principal", "N", "client sessions per caller (beyond: 429)"),
    _s("max_streams", "N", "open SSE streams per route"),
    _s("max_streams_per_principal", "N", "open SSE streams per caller"),
    _s("max_notices", "N", "client notifications being passed upstream at once"),
    _s("max_notices_per_principal", "N", "the same, per caller (past either: dropped, logged)"),
    _s("max_inflight", "N", "calls in flight per route"),
    _s("max_inflight_per_principal", "N", "calls in flight per caller (beyond: 429)"),
    _s(
        "max_batch",
        "N",
        "the most messages in one JSON-RPC batch (larger ones get one error)",
        "--max-batch",
    ),
    _s("header_timeout", "SECONDS", "a request's headers (and keep-alive idling) must arrive"),
    _s("body_timeout", "SECONDS", "a request's body must arrive within this"),
    _s("stream_idle_timeout", "SECONDS", "a standalone stream idle this long is ended"),
    _s(
        "keepalive",
        "SECONDS",
        "an open SSE answer quiet this long gets a comment (idle proxies keep it); 0: never",
    ),
    _s(
        "fd_reserve",
        "N",
        "file descriptors kept free: with fewer left, new requests get 503",
    ),
    _s(
        "scrape_hosts",
        "HOST...",
        "host names /healthz, /readyz and /metrics answer besides loopback ones",
    ),
    _s(
        "trust_forwarded",
        "true|false",
        "take the public URL from X-Forwarded-* or Forwarded headers: only behind a proxy "
        "that sets them",
        "--trust-forwarded",
    ),
    _s(
        "cluster",
        "URL",
        "share state with other replicas: redis://, redis+sentinel://, redis+cluster:// "
        "(needs GATEWAY_STATE_KEY and the `cluster` extra) or file:///DIR on one machine",
        "--cluster",
    ),
    _s(
        "advertise",
        "URL",
        "where the other replicas reach this one",
        "--advertise",
        "the --listen address",
    ),
    _s("workers", "N", "worker processes sharing the listening port", "--workers"),
    _s(
        "cluster_pool",
        "N",
        "connections to a Redis store per process (redis://, redis+sentinel://: past "
        "them a request waits its turn; redis+cluster://: per node, refused past them)",
        "--cluster-pool",
    ),
    _s(
        "cluster_pool_timeout",
        "SECONDS",
        "how long a store operation waits for a connection before a 503",
    ),
    _s(
        "cluster_confirm",
        "true|false",
        "a spent requestState's marker waits for a replica of a Redis store to hold it",
    ),
    _s("reuse_port", "true|false", "set by --workers for its children (share the port)"),
    _s(
        "lean_lane",
        "true|false",
        "serve the usual Streamable HTTP POST with the gateway's own HTTP/1.1 lane",
        "--lean-lane",
    ),
    _s(
        "pass_through",
        "true|false",
        "a call needing no translation (the same revision both sides) or only its "
        "answer's (a client of the other era than its upstream's), on a route with "
        "nothing to rewrite, is sent at once and a plain result answered without the "
        "full path",
        "--pass-through",
    ),
    _s(
        "server_banner",
        "true|false",
        "the Server header names the versions of the gateway, Python and aiohttp",
    ),
    _s(
        "console",
        "true|false",
        "serve the operators' console, behind the token in GATEWAY_CONSOLE_TOKEN",
        "--console",
    ),
    _s("console_listen", "HOST:PORT", "where the console listens", "--console-listen"),
    _s(
        "console_bodies",
        "true|false",
        "record the messages of recent calls (redacted, cut)",
        "--console-bodies",
    ),
    _s("console_calls", "N", "recent calls each route keeps for the console"),
    _s(
        "console_rate",
        "N",
        "console requests a second, for the token's holder and for each other address",
    ),
    _s(
        "rate",
        "N/s|N/m|N/h",
        "each caller's rate limit on every route that sets none (rate= route option)",
        "--rate",
    ),
    _s("burst", "N", "the burst of rate"),
    _s(
        "tool_rate",
        "N/s|N/m|N/h",
        "each caller's rate limit per tool on every route that sets none",
        "--tool-rate",
    ),
    _s("tool_burst", "N", "the burst of tool_rate"),
    _s(
        "rate_fallback",
        "open|closed",
        "in a cluster, rate limits while the store is unreachable: open (each replica on "
        "its own) or closed (limited calls refused)",
        "--rate-fallback",
    ),
)


def env_name(setting: Setting) -> str:
    return f"{ENV_PREFIX}{setting.name.upper()}"


def default_of(name: str) -> str:
    """The model's default, as a person reads it."""
    if _BY_NAME[name].default:
        return _BY_NAME[name].default
    field = Settings.model_fields[name]
    value: Any = field.default
    if value is PydanticUndefined:
        value = field.default_factory() if field.default_factory is not None else None  # type: ignore[call-arg]
    if value is None or value == []:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


_BY_NAME = {setting.name: setting for setting in SETTINGS}


def help_of(name: str) -> str:
    """A `serve` flag's help: the meaning, the default, the environment variable."""
    setting = _BY_NAME[name]
    meaning = setting.meaning[0].upper() + setting.meaning[1:]
    if "|" in setting.value and "true|false" not in setting.value:  # the choices
        meaning += f" ({setting.value.replace('|', ', ')})"
    return f"{meaning}.  [default: {default_of(name)}]  Env: {env_name(setting)}."


def markdown() -> str:
    """docs/reference/settings.md."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated by `python -m gateway.config.setting_table > "
        "docs/reference/settings.md` from gateway/config/setting_table.py; a test checks "
        "it is current. -->",
        "",
        "Every setting is a key of the config file (`--config`, "
        "config/gateway.example.toml), an environment variable `GATEWAY_<NAME>`, and "
        "some a flag of `gateway serve`: flags win over the environment, which wins over "
        "the file. Secrets have no setting: `GATEWAY_STATE_KEY` (the key sealing "
        "requestState) and `GATEWAY_CONSOLE_TOKEN` are read from the environment only.",
        "",
        "| setting | value | meaning | default | environment | flag |",
        "|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        env = f"`{env_name(s)}`"
        flag = f"`{s.flag}`" if s.flag else ""
        value = s.value.replace("|", "\\|")
        lines.append(
            f"| `{s.name}` | `{value}` | {s.meaning} | {default_of(s.name)} | {env} | {flag} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the generator
    sys.stdout.write(markdown())
