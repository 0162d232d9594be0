"""Who may use the console: the token (HTTP Basic's password, or a bearer token),
checked on every request in constant time; a CSRF token on every POST; and a rate
limit of the console's own, so that it cannot be used to load the gateway."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time

from aiohttp import web

__all__ = ["Access", "Bucket"]

REALM = 'Basic realm="gateway console", charset="UTF-8"'


class Bucket:
    """A token bucket: ``rate`` a second, up to ``burst`` at once."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.level = burst
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.level = min(self.burst, self.level + (now - self.at) * self.rate)
        self.at = now
        if self.level < 1:
            return False
        self.level -= 1
        return True


class Access:
    def __init__(self, token: str, rate: float) -> None:
        # Only a digest is kept: compared in constant time, never shown.
        self._digest = hashlib.sha256(token.encode()).digest()
        # CSRF tokens are per process: a page's token is good until a restart.
        self.csrf = secrets.token_urlsafe(24)
        self.bucket = Bucket(rate, rate * 2)

    def allowed(self, request: web.Request) -> bool:
        given = _credential(request.headers.get("Authorization", ""))
        if given is None:
            return False
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), self._digest)

    def csrf_ok(self, request: web.Request) -> bool:
        given = request.headers.get("X-Console-CSRF", "")
        return hmac.compare_digest(given.encode(), self.csrf.encode())

    @staticmethod
    def unauthorized() -> web.Response:
        """401 with nothing else: no body, no hint of what is behind it."""
        return web.Response(status=401, headers={"WWW-Authenticate": REALM})


def _credential(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return value.strip() or None
    if scheme != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, sep, password = decoded.partition(":")
    return password if sep else None
