"""DNS-rebinding protection: the gateway checks Host and Origin itself.

The upstream's own check sees the gateway, not the client, so it cannot
protect anything here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from gateway.core import Failure, FailureKind

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def _hostname(value: str) -> str:
    """`host:port`, `[v6]:port` or a bare host → the host, lower-case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class OriginGuard:
    """Allowed Host names and Origins for one route.

    With ``loopback_only`` (the gateway bound to a loopback address), loopback
    names and loopback Origins are accepted by default (loopback Origins only
    then).  An empty ``allowed_hosts`` when not bound
    to loopback accepts any Host (a sidecar behind its own network boundary).
    """

    def __init__(
        self,
        *,
        loopback_only: bool,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        hosts_option: str = "the route option allowed_hosts=",
        origins_option: str = "the route option allowed_origins=",
    ) -> None:
        # Named in a refusal: what lets the refused Host or Origin in.
        self.hosts_option = hosts_option
        self.origins_option = origins_option
        self.loopback_only = loopback_only
        self.allowed_hosts = {_hostname(h) for h in allowed_hosts}
        self.allowed_origins = {o.strip().lower().rstrip("/") for o in allowed_origins}
        # The last Host header value found allowed: nearly every request repeats it.
        self._host_passed: str | None = None

    def check(self, headers: Mapping[str, str]) -> Failure | None:
        host = headers.get("host")
        if host is not None and host != self._host_passed:
            if not self._host_ok(_hostname(host)):
                return Failure(
                    FailureKind.FORBIDDEN,
                    f"Host {host!r} is not allowed (the gateway's operator can allow it with "
                    f"{self.hosts_option})",
                )
            self._host_passed = host
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin.strip().lower().rstrip("/")):
            return Failure(
                FailureKind.FORBIDDEN,
                f"Origin {origin!r} is not allowed (the gateway's operator can allow it with "
                f"{self.origins_option})",
            )
        return None

    def _host_ok(self, host: str) -> bool:
        if host in self.allowed_hosts or "*" in self.allowed_hosts:
            return True
        if host in LOOPBACK_NAMES:
            return True
        return not self.loopback_only and not self.allowed_hosts

    def _origin_ok(self, origin: str) -> bool:
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        if origin == "null":
            return False
        host = urlsplit(origin).hostname or ""
        host = f"[{host}]" if ":" in host else host
        # A page served from loopback may talk to a loopback gateway, and only to one:
        # on any other listener a loopback Origin is no evidence of a local caller.
        return host in LOOPBACK_NAMES and self.loopback_only
