"""Who may use the console: the token (HTTP Basic's password, or a bearer token),
checked on every request in constant time; a CSRF token on every POST; and rate
limits of the console's own, so that it cannot be used to load the gateway.

Two budgets, so that nobody can lock the operator out: requests that carry the valid
token share one; every other request (a wrong guess, no token) takes from its source
address's own, so a burst of guesses is refused (429) without touching the operator's.
Header values are compared as the bytes the client sent (aiohttp keeps undecodable
bytes as surrogates), so no token, however it is encoded, can fail the comparison."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

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


# Source addresses whose budgets are kept at once (the least recently seen forgotten:
# a forgotten source starts again with a full budget, as a new one would).
SOURCES_KEPT = 4096


class Access:
    def __init__(self, token: str, rate: float) -> None:
        # Only a digest is kept: compared in constant time, never shown.
        self._digest = hashlib.sha256(_raw(token)).digest()
        # CSRF tokens are per process: a page's token is good until a restart.
        self.csrf = secrets.token_urlsafe(24)
        self.rate = rate
        self.bucket = Bucket(rate, rate * 2)  # the requests that carry the token
        self._sources: OrderedDict[str, Bucket] = OrderedDict()

    def admit(self, request: web.Request) -> bool | None:
        """True: the token is good and its budget allows; False: no or a wrong token,
        within its source's budget (answer 401); None: over the budget (429)."""
        if self.allowed(request):
            return True if self.bucket.take() else None
        return False if self._source(request.remote or "").take() else None

    def _source(self, address: str) -> Bucket:
        bucket = self._sources.get(address)
        if bucket is None:
            bucket = self._sources[address] = Bucket(self.rate, self.rate * 2)
            if len(self._sources) > SOURCES_KEPT:
                self._sources.popitem(last=False)
        else:
            self._sources.move_to_end(address)
        return bucket

    def allowed(self, request: web.Request) -> bool:
        given = _credential(request.headers.get("Authorization", ""))
        if given is None:
            return False
        return hmac.compare_digest(hashlib.sha256(given).digest(), self._digest)

    def csrf_ok(self, request: web.Request) -> bool:
        given = _raw(request.headers.get("X-Console-CSRF", ""))
        return hmac.compare_digest(given, self.csrf.encode())

    @staticmethod
    def unauthorized() -> web.Response:
        """401 with nothing else: no body, no hint of what is behind it."""
        return web.Response(status=401, headers={"WWW-Authenticate": REALM})


def _raw(text: str) -> bytes:
    """A header value as the bytes sent (undecodable ones are surrogates in aiohttp)."""
    return text.encode("utf-8", "surrogateescape")


def _credential(header: str) -> bytes | None:
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return _raw(value.strip()) or None
    if scheme != "basic":
        return None
    try:
        decoded = base64.b64decode(_raw(value.strip()), validate=True)
    except (binascii.Error, ValueError):
        return None
    _, sep, password = decoded.partition(b":")
    return password if sep else None
