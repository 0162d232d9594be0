"""Whether a text is an http(s) URL the gateway can send requests to.

One check for every URL the gateway will connect to, whoever wrote it: a route's
upstream and ``also=`` targets and auth URLs (an operator, at ``check`` and at
``serve`` alike), and an HTTP+SSE upstream's ``endpoint`` event (the upstream, at run
time).  A URL that passes can be parsed, has a host a resolver accepts (each label
1 to 63 octets once IDNA-encoded, 253 in all, or an IP literal) and a port from 1 to
65535; anything else is a ValueError with one line that never repeats the URL's user
info or query.
"""

from __future__ import annotations

import ipaddress
import re

from yarl import URL

__all__ = ["http_url"]

_SCHEMES = ("http", "https")
# What a host name's labels may hold once IDNA-encoded (underscores: some internal
# names have them, and resolvers pass them).
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?")


def http_url(text: str, *, encoded: bool = False) -> URL:
    """``text`` as a URL the gateway may connect to, or ValueError saying why not."""
    if not isinstance(text, str) or not text:
        raise ValueError("must be an http(s):// URL")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in text):
        raise ValueError("a URL may not hold white space or control characters")
    try:
        url = URL(text, encoded=encoded)
        port = url.port
        host = url.raw_host
    except (ValueError, UnicodeError) as exc:
        raise ValueError(f"not a URL ({_reason(exc)})") from None
    if url.scheme not in _SCHEMES:
        raise ValueError("must be an http(s):// URL")
    if not host:
        raise ValueError("the URL has no host")
    if port is None or not 0 < port < 65536:
        raise ValueError("the URL's port must be 1 to 65535")
    _check_host(host)
    return url


def _check_host(host: str) -> None:
    try:
        ipaddress.ip_address(host.partition("%")[0])
        return
    except ValueError:
        pass
    try:
        encoded = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("the URL's host is not a valid host name") from None
    labels = encoded.rstrip(".").split(".")
    if len(encoded) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(
            "the URL's host is not a valid host name (each dot-separated label 1 to 63"
            " letters, digits or hyphens)"
        )


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:80] if "@" not in text and "?" not in text else type(exc).__name__
