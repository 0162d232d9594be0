"""Relaying a request to the replica that owns it, and checking a relayed request.

The relayed request is the client's, unchanged but for hop-by-hop headers, plus
three headers: who relays, when, and an HMAC-SHA256 (keyed by the cluster's
shared state key) over the method, path, time, relaying replica, body and the
headers that decide who the caller is and which session it names.  A request
carrying the relay header is never relayed again, so relaying cannot loop.
The answer (JSON or an SSE stream) is copied back byte for byte as it arrives.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

import aiohttp
import structlog
from aiohttp import web

log = structlog.get_logger(__name__)

RELAY_HEADER = "X-Gateway-Relay"
RELAY_TIME = "X-Gateway-Relay-Time"
RELAY_SIG = "X-Gateway-Relay-Signature"
# How far a relayed request's clock may be from ours (seconds).
MAX_SKEW = 30
# Request headers the signature covers (besides every mcp-* header): who the caller
# is and what it resumes.
SIGNED = ("authorization", "last-event-id")
HOP_BY_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_OURS = frozenset(h.lower() for h in (RELAY_HEADER, RELAY_TIME, RELAY_SIG))


def relay_key(state_key: bytes) -> bytes:
    """A key of its own for relays, derived from the state key (never used as is)."""
    return hmac.new(state_key, b"gateway cluster relay v1", hashlib.sha256).digest()


def signature(
    key: bytes,
    method: str,
    path_qs: str,
    stamp: str,
    origin: str,
    body: bytes,
    headers: Mapping[str, str],
) -> str:
    lowered = {k.lower(): v for k, v in headers.items()}
    names = sorted(n for n in lowered if n in SIGNED or n.startswith("mcp-"))
    lines = [method.upper(), path_qs, stamp, origin, hashlib.sha256(body).hexdigest()]
    lines += [f"{name}:{lowered[name]}" for name in names]
    return hmac.new(key, "\n".join(lines).encode(), hashlib.sha256).hexdigest()


def verify(key: bytes, request: web.Request, body: bytes) -> bool:
    """A relayed request signed by a member of the cluster, and fresh."""
    origin = request.headers.get(RELAY_HEADER, "")
    stamp = request.headers.get(RELAY_TIME, "")
    given = request.headers.get(RELAY_SIG, "")
    try:
        if abs(time.time() - float(stamp)) > MAX_SKEW:
            return False
    except ValueError:
        return False
    expected = signature(key, request.method, request.path_qs, stamp, origin, body, request.headers)
    return hmac.compare_digest(expected, given)


class Unreached(Exception):
    """The owner could not be connected to: nothing of the request was sent, so it
    may be sent again."""


class Relay:
    """Sends requests on to their owner and streams the answers back."""

    def __init__(self, key: bytes, origin: str, timeout: float) -> None:
        self.key = key
        self.origin = origin
        self.timeout = timeout
        self.connect_timeout = 3.0
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._http

    def headers_for(self, request: web.Request, body: bytes) -> dict[str, str]:
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() not in _OURS
        }
        stamp = f"{time.time():.3f}"
        sig = signature(
            self.key, request.method, request.path_qs, stamp, self.origin, body, headers
        )
        headers.update({RELAY_HEADER: self.origin, RELAY_TIME: stamp, RELAY_SIG: sig})
        return headers

    async def forward(
        self, request: web.Request, body: bytes, base_url: str
    ) -> web.StreamResponse | None:
        """The owner's answer, streamed to the client; None when the exchange failed
        after it may have reached the owner (the caller answers then, as for an owner
        that is gone).  Raises Unreached when no connection could be made."""
        streaming = request.method == "GET"
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=self.connect_timeout,
            # A GET stream may be quiet for long; it ends when either side goes away.
            sock_read=None if streaming else self.timeout,
        )
        url = base_url.rstrip("/") + request.path_qs
        try:
            answer = await self._session().request(
                request.method,
                url,
                data=body if body else None,
                headers=self.headers_for(request, body),
                timeout=timeout,
                allow_redirects=False,
                # Only the client's own headers: the owner must see its request as sent.
                skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
            )
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise Unreached(str(exc) or type(exc).__name__) from exc
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("relay failed: owner unreachable", owner=base_url, error=str(exc))
            return None
        async with answer:
            return await _copy(request, answer)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None


async def _copy(request: web.Request, answer: aiohttp.ClientResponse) -> web.StreamResponse:
    headers = {
        k: v
        for k, v in answer.headers.items()
        if k.lower() not in HOP_BY_HOP or k.lower() == "content-length"
    }
    out = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
    await out.prepare(request)
    try:
        async for chunk in answer.content.iter_any():
            await out.write(chunk)
    except (aiohttp.ClientError, TimeoutError) as exc:
        # The owner went away mid-answer: the client's stream ends here, as it would have.
        log.info("relayed answer cut short", error=str(exc))
        return out
    await out.write_eof()
    return out
