"""What the process reads at start besides its settings: the state key from the
environment, cluster mode's options, and whether an address is loopback-only; and the
effective settings as `serve --check-config` prints them."""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
from typing import TYPE_CHECKING

from gateway.config.settings import Settings, SettingsError
from gateway.core.redaction import redact, safe_command
from gateway.upstream.settings import DEFAULT_REQUEST_TIMEOUT

if TYPE_CHECKING:  # imported only when a cluster (or the console) is configured
    from gateway.cluster.options import ClusterOptions
    from gateway.console import Console, ConsoleOptions
    from gateway.console.server import GatewayState


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


STATE_KEY_ENV = "GATEWAY_STATE_KEY"


def state_key_from_env() -> bytes | None:
    """The requestState key: a secret, so only from the environment (any string,
    at least 32 characters), never from the config file."""
    raw = os.environ.get(STATE_KEY_ENV)
    if not raw:
        return None
    if len(raw) < 32:
        raise SettingsError(f"{STATE_KEY_ENV} must be at least 32 characters long")
    return raw.encode()


def cluster_options(settings: Settings) -> ClusterOptions | None:
    """Cluster mode (``--cluster``): replicas authenticate each other with the state
    key, so there is none without it."""
    if settings.cluster is None:
        return None
    if state_key_from_env() is None:
        raise SettingsError(
            f"--cluster needs {STATE_KEY_ENV}: the same secret on every replica "
            "(it seals requestState and authenticates relays between replicas)"
        )
    if settings.advertise is None and settings.host in ("0.0.0.0", "::"):
        raise SettingsError(
            "--cluster on a wildcard address needs --advertise http://HOST:PORT "
            "(where the other replicas reach this one)"
        )
    from gateway.cluster.options import ClusterOptions

    timeout = max((spec.timeout for spec in settings.routes), default=DEFAULT_REQUEST_TIMEOUT)
    return ClusterOptions(
        settings.cluster,
        advertise=settings.advertise,
        own_port=settings.reuse_port,
        relay_timeout=timeout + 5.0,
        pool_size=settings.cluster_pool,
        pool_timeout=settings.cluster_pool_timeout,
        confirm=settings.cluster_confirm,
    )


def describe_settings(settings: Settings) -> str:
    """The effective settings, secrets left out (only where they come from): the one
    redaction rule, except for the header options, whose values name a variable or a
    file (where the secret is), not the secret, and ``auth``, which names a mode."""
    data = settings.model_dump(mode="json")
    kept = ("headers_from_env", "headers_from_file", "auth")
    routes = []
    for route in data.pop("routes", None) or []:
        names = {key: route.pop(key) for key in kept if key in route}
        upstream = str(route.get("upstream", ""))
        if upstream.startswith("stdio:"):  # a command's secret options, hidden
            command = shlex.join(safe_command(shlex.split(upstream[len("stdio:") :])))
            route["upstream"] = "stdio:" + command
        routes.append({**redact(route), **names})
    return json.dumps({**redact(data), "routes": routes}, indent=2, sort_keys=True)


def console_options(settings: Settings) -> ConsoleOptions | None:
    """``--console``'s options; None (and nothing of gateway/console imported) when off."""
    if not settings.console:
        return None
    from gateway.console.options import ConsoleOptions

    return ConsoleOptions.from_settings(settings)


def console_for(options: ConsoleOptions | None, gateway: GatewayState) -> Console | None:
    """The operators' console, when asked for (nothing of it imported otherwise)."""
    if options is None:
        return None
    from gateway.console import Console

    return Console(options, gateway)
