"""Bearer tokens checked by the gateway itself (`auth=gateway`).

A JWT is checked with PyJWT: its signature against the issuer's JWKS (PyJWKClient
caches the key set and fetches it again when a token names a key it does not
hold, so keys can rotate), then `iss`, `aud` (the route's public URL), `exp` and
the required scopes.  An opaque token is checked by RFC 7662 introspection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt
import orjson

from gateway.auth.discovery import DocumentFetcher

# Asymmetric algorithms only: a shared-secret algorithm would let anyone holding
# the public key forge tokens (algorithm confusion), and `none` is never valid.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
INTROSPECTION_TIMEOUT = 5.0


@dataclass(frozen=True)
class TokenPolicy:
    """What a route accepts."""

    issuer: str
    audience: str
    scopes: tuple[str, ...] = ()
    jwks_uri: str | None = None
    introspection_url: str | None = None
    # The Authorization header the gateway presents to the introspection endpoint.
    introspection_auth: str | None = None
    leeway: float = 30.0
    # How soon after a fetch an unknown key id may fetch the key set again.
    jwks_cooldown: float = 5.0


@dataclass(frozen=True)
class Principal:
    """Who a valid token speaks for."""

    subject: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    client_id: str | None = None

    @property
    def key(self) -> str:
        """The principal the gateway binds sessions, pools and requestState to."""
        return f"sub:{self.subject}"


class Rejected(Exception):
    """A token the route does not accept: the status and RFC 6750 error to answer."""

    def __init__(
        self, status: int, error: str | None, description: str, scope: str | None = None
    ) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope


class Unavailable(Exception):
    """The gateway could not check a token (keys or introspection unreachable)."""


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer ...` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """`scope` (RFC 8693/9068: space-separated) or `scp` (a list or a string)."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list):
        return frozenset(str(s) for s in raw)
    return frozenset()


def _require_scopes(policy: TokenPolicy, granted: frozenset[str]) -> None:
    missing = [s for s in policy.scopes if s not in granted]
    if missing:
        raise Rejected(
            403,
            "insufficient_scope",
            f"the token lacks the scope(s) {' '.join(missing)}",
            " ".join(policy.scopes),
        )


class TokenValidator:
    """Checks one route's bearer tokens."""

    def __init__(self, policy: TokenPolicy, fetcher: DocumentFetcher) -> None:
        self.policy = policy
        self.fetcher = fetcher
        self._jwks: jwt.PyJWKClient | None = None
        self._jwks_lock = asyncio.Lock()

    async def validate(self, authorization: str | None) -> Principal:
        """The principal of a valid token; raises Rejected or Unavailable."""
        token = bearer_token(authorization)
        if token is None:
            raise Rejected(401, None, "a bearer token is required")
        if self.policy.introspection_url:
            return await self._introspect(token)
        return await self._check_jwt(token)

    async def _keys(self) -> jwt.PyJWKClient:
        async with self._jwks_lock:
            if self._jwks is None:
                uri = self.policy.jwks_uri
                if uri is None:
                    document = await self.fetcher.authorization_server(self.policy.issuer)
                    if document is None or not isinstance(document.get("jwks_uri"), str):
                        raise Unavailable(f"no jwks_uri in {self.policy.issuer}'s metadata")
                    uri = str(document["jwks_uri"])
                self._jwks = jwt.PyJWKClient(
                    uri,
                    cache_keys=True,
                    lifespan=300,
                    timeout=5,
                    cooldown_duration=self.policy.jwks_cooldown,
                )
            return self._jwks

    async def _check_jwt(self, token: str) -> Principal:
        policy = self.policy
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Rejected(401, "invalid_token", "the token is not a JWT") from exc
        if header.get("alg") not in ALGORITHMS:
            raise Rejected(401, "invalid_token", "the token's algorithm is not accepted")
        keys = await self._keys()
        try:
            # PyJWKClient fetches with urllib: off the event loop.
            key = await asyncio.to_thread(keys.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            raise Unavailable(f"the issuer's keys cannot be fetched: {exc}") from exc
        except jwt.PyJWKClientError as exc:
            raise Rejected(401, "invalid_token", "the token's signing key is unknown") from exc
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=list(ALGORITHMS),
                audience=policy.audience,
                issuer=policy.issuer,
                leeway=policy.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise Rejected(401, "invalid_token", "the token has expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise Rejected(401, "invalid_token", "the token is for another audience") from exc
        except jwt.InvalidIssuerError as exc:
            raise Rejected(401, "invalid_token", "the token is from another issuer") from exc
        except jwt.InvalidSignatureError as exc:
            raise Rejected(401, "invalid_token", "the token's signature is invalid") from exc
        except jwt.PyJWTError as exc:
            raise Rejected(401, "invalid_token", f"the token is invalid: {exc}") from exc
        granted = scopes_of(claims)
        _require_scopes(policy, granted)
        client = claims.get("client_id", claims.get("azp"))
        return Principal(str(claims["sub"]), granted, str(client) if client else None)

    async def _introspect(self, token: str) -> Principal:
        claims = await self._introspection(token)
        policy = self.policy
        if claims.get("active") is not True:
            raise Rejected(401, "invalid_token", "the token is not active")
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp + policy.leeway < time.time():
            raise Rejected(401, "invalid_token", "the token has expired")
        if "iss" in claims and claims["iss"] != policy.issuer:
            raise Rejected(401, "invalid_token", "the token is from another issuer")
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if policy.audience not in audiences:
            raise Rejected(401, "invalid_token", "the token is for another audience")
        subject = claims.get("sub") or claims.get("username")
        if not isinstance(subject, str) or not subject:
            raise Rejected(401, "invalid_token", "the token names no subject")
        granted = scopes_of(claims)
        _require_scopes(policy, granted)
        client = claims.get("client_id")
        return Principal(subject, granted, str(client) if client else None)

    async def _introspection(self, token: str) -> dict[str, Any]:
        assert self.policy.introspection_url is not None
        headers = {"Accept": "application/json"}
        if self.policy.introspection_auth:
            headers["Authorization"] = self.policy.introspection_auth
        try:
            async with self.fetcher.http.post(
                self.policy.introspection_url,
                data={"token": token, "token_type_hint": "access_token"},
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=INTROSPECTION_TIMEOUT),
            ) as resp:
                body = await resp.content.read(64 * 1024)
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Unavailable(f"introspection failed: {type(exc).__name__}") from exc
        if status != 200:
            raise Unavailable(f"introspection answered HTTP {status}")
        try:
            claims = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise Unavailable("introspection answered something other than JSON") from exc
        if not isinstance(claims, dict):
            raise Unavailable("introspection answered something other than a JSON object")
        return claims
