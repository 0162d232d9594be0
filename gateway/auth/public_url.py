"""The gateway's public URL, as the client sees it.

Behind a TLS-terminating proxy the request the gateway receives says `http` and
an inner host; the client used `https` and the public name.  The operator either
says so (`public_url`) or vouches for the proxy's headers (`--trust-forwarded`):
X-Forwarded-Proto/-Host/-Port/-Prefix or RFC 7239 `Forwarded`.  Without that
trust those headers are ignored, since any client can send them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_SANE_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")
_SANE_PREFIX = re.compile(r"^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*$")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True)
class Origin:
    """Scheme, host (with port when not the default) and path prefix the client used."""

    scheme: str
    host: str
    prefix: str = ""

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}"

    def url(self, path: str) -> str:
        return f"{self.base}{self.prefix}{path}"


def _first(value: str | None) -> str | None:
    """The first (client-facing) entry of a comma-separated proxy header."""
    if value is None:
        return None
    first = value.split(",")[0].strip()
    return first or None


def _forwarded(value: str | None) -> dict[str, str]:
    """The first element of an RFC 7239 `Forwarded` header, names lower-cased."""
    first = _first(value)
    pairs: dict[str, str] = {}
    for part in (first or "").split(";"):
        name, eq, raw = part.partition("=")
        if eq:
            pairs[name.strip().lower()] = raw.strip().strip('"')
    return pairs


def _with_port(host: str, port: str | None, scheme: str) -> str:
    if not port or not port.isdigit() or _DEFAULT_PORTS.get(scheme) == port:
        return host
    if host.endswith("]") or ":" not in host:
        return f"{host}:{port}"
    return host


def _strip_default_port(host: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    if default and host.endswith(f":{default}") and not host.endswith("]"):
        return host[: -len(default) - 1]
    return host


def request_origin(
    scheme: str, host: str, headers: Mapping[str, str], *, trust_forwarded: bool
) -> Origin:
    """Where the client sent its request.  ``headers`` have lower-case names."""
    prefix = ""
    if trust_forwarded:
        forwarded = _forwarded(headers.get("forwarded"))
        proto = forwarded.get("proto") or _first(headers.get("x-forwarded-proto"))
        if proto and proto.lower() in _DEFAULT_PORTS:
            scheme = proto.lower()
        given = forwarded.get("host") or _first(headers.get("x-forwarded-host"))
        if given and _SANE_HOST.match(given):
            host = _with_port(given, _first(headers.get("x-forwarded-port")), scheme)
        wanted = (_first(headers.get("x-forwarded-prefix")) or "").rstrip("/")
        if wanted and not wanted.startswith("/"):
            wanted = "/" + wanted
        if _SANE_PREFIX.match(wanted):
            prefix = wanted
    if not _SANE_HOST.match(host):
        host = "localhost"
    return Origin(scheme.lower(), _strip_default_port(host, scheme.lower()), prefix)


def resource_url(
    public_url: str | None,
    route_path: str,
    scheme: str,
    host: str,
    headers: Mapping[str, str],
    *,
    trust_forwarded: bool,
) -> str:
    """The route's resource identifier (RFC 8707/9728): the configured public URL,
    else the URL the client used to reach the route."""
    if public_url:
        return public_url
    origin = request_origin(scheme, host, headers, trust_forwarded=trust_forwarded)
    return origin.url(route_path)
