"""What an upstream publishes about its protection, fetched and cached.

The gateway fetches these documents with its own, credential-free HTTP session:
a route's static upstream credentials must never reach an authorization server,
and a client's token is never needed to read public metadata.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
import structlog

from gateway.auth import challenge
from gateway.auth.metadata import (
    ASM,
    Document,
    as_candidates,
    default_authorization_server,
    is_authorization_server,
    is_protected_resource,
    origin_of,
    prm_candidates,
)

log = structlog.get_logger(__name__)

MAX_DOCUMENT = 256 * 1024
FETCH_TIMEOUT = 5.0
CACHE_TTL = 60.0
# Documents kept at once: their URLs come from upstream challenges, so an upstream
# that names a new one each time must not grow the cache without end.
MAX_CACHED = 64


class DocumentFetcher:
    """GETs JSON documents (bounded, cached for a while, failures cached too)."""

    def __init__(self, http: aiohttp.ClientSession, ttl: float = CACHE_TTL) -> None:
        self.http = http
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Any]] = {}

    async def get(self, url: str) -> Any:
        """The JSON at ``url``, or None when it is not there or not JSON."""
        now = time.monotonic()
        cached = self._cache.get(url)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        document = await self._fetch(url)
        self._cache.pop(url, None)
        if len(self._cache) >= MAX_CACHED:
            self._evict(now)
        self._cache[url] = (now, document)
        return document

    def _evict(self, now: float) -> None:
        """The expired documents; if none, the oldest (the cache is in fetch order)."""
        expired = [url for url, (at, _) in self._cache.items() if now - at >= self._ttl]
        for url in expired or [next(iter(self._cache))]:
            del self._cache[url]

    async def _fetch(self, url: str) -> Any:
        if not url.startswith(("http://", "https://")):
            return None
        try:
            async with self.http.get(
                url,
                headers={"Accept": "application/json"},
                timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT),
            ) as resp:
                if resp.status != 200:
                    return None
                body = await resp.content.read(MAX_DOCUMENT + 1)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.info("metadata fetch failed", url=url, reason=type(exc).__name__)
            return None
        if len(body) > MAX_DOCUMENT:
            return None
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None

    async def authorization_server(self, issuer: str) -> Document | None:
        """An authorization server's metadata, found the ways MCP clients look."""
        for url in as_candidates(issuer):
            document = await self.get(url)
            if is_authorization_server(document):
                assert isinstance(document, dict)
                return document
        return None


class UpstreamAuth:
    """One upstream's protection as the gateway has learnt it: whether it asks for
    credentials, its last challenge, and its discovery documents."""

    def __init__(self, upstream: str, fetcher: DocumentFetcher) -> None:
        self.upstream = upstream
        self.fetcher = fetcher
        self.protected = False
        # The upstream's last challenge, passed on (rewritten) to callers without credentials.
        self.challenge: str | None = None
        self._hint: str | None = None

    def saw_challenge(self, value: str | None) -> None:
        self.protected = True
        if value:
            self.challenge = value
            self._hint = challenge.param(value, "resource_metadata") or self._hint

    async def protected_resource(self) -> Document | None:
        """The upstream's protected-resource metadata (RFC 9728), if it has any."""
        for url in prm_candidates(self.upstream, self._hint):
            document = await self.fetcher.get(url)
            if is_protected_resource(document):
                assert isinstance(document, dict)
                return document
        return None

    async def authorization_server(self, well_known: str = ASM) -> Document | None:
        """The authorization server's metadata for a client that looks for it at the
        MCP server's own origin (clients of the first OAuth revision do): what the upstream serves
        there, else the server its protected-resource document names, else (for an
        upstream known to want credentials) the first OAuth revision's default endpoints."""
        own = await self.fetcher.get(origin_of(self.upstream) + well_known)
        if is_authorization_server(own):
            assert isinstance(own, dict)
            return own
        document = await self.protected_resource()
        if document is not None:
            return await self.fetcher.authorization_server(document["authorization_servers"][0])
        if self.protected:
            return default_authorization_server(origin_of(self.upstream))
        return None

    async def authorization_servers(self) -> list[str] | None:
        """Which authorization servers protect the upstream (for a protected-resource
        document of the gateway's own when the upstream publishes none)."""
        document = await self.protected_resource()
        if document is not None:
            return [str(s) for s in document["authorization_servers"]]
        own = await self.fetcher.get(origin_of(self.upstream) + ASM)
        if is_authorization_server(own) or self.protected:
            return [origin_of(self.upstream)]
        return None
