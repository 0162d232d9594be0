"""auth=gateway's token checks: JWTs against a JWKS served over loopback, and RFC 7662
introspection; one TokenValidator at a time, against real HTTP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.auth.discovery import DocumentFetcher
from gateway.auth.tokens import Principal, Rejected, TokenPolicy, TokenValidator

AUDIENCE = "https://gw.example/mcp"


class Issuer:
    """A key set and its metadata over HTTP; keys can be rotated."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, Any]] = [("k1", rsa.generate_private_key(65537, 2048))]
        self.jwks_fetches = 0
        self.introspected: list[str] = []
        self.base = ""

    @property
    def issuer(self) -> str:
        return self.base

    def rotate(self) -> None:
        self.keys = [("k2", rsa.generate_private_key(65537, 2048))]

    def token(self, *, kid: str | None = None, key: Any = None, **claims: Any) -> str:
        kid = kid or self.keys[0][0]
        key = key or dict(self.keys)[kid]
        body = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "alice",
            "exp": int(time.time()) + 600,
            "scope": "mcp:tools",
            **claims,
        }
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None}, key, "RS256", {"kid": kid}
        )

    def app(self) -> web.Application:
        app = web.Application()

        async def jwks(request: web.Request) -> web.Response:
            self.jwks_fetches += 1
            keys = []
            for kid, key in self.keys:
                jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
                keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
            return web.json_response({"keys": keys})

        async def metadata(request: web.Request) -> web.Response:
            return web.json_response(
                {
                    "issuer": self.issuer,
                    "token_endpoint": self.issuer + "/token",
                    "jwks_uri": self.issuer + "/jwks",
                }
            )

        async def introspect(request: web.Request) -> web.Response:
            form = await request.post()
            token = str(form["token"])
            self.introspected.append(request.headers.get("Authorization", ""))
            if token == "opaque-good":
                return web.json_response(
                    {
                        "active": True,
                        "sub": "bob",
                        "aud": AUDIENCE,
                        "iss": self.issuer,
                        "scope": "mcp:tools",
                        "exp": int(time.time()) + 60,
                    }
                )
            if token == "opaque-narrow":
                return web.json_response({"active": True, "sub": "bob", "aud": [AUDIENCE]})
            return web.json_response({"active": False})

        app.router.add_get("/jwks", jwks)
        app.router.add_get("/.well-known/oauth-authorization-server", metadata)
        app.router.add_post("/introspect", introspect)
        return app


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    server = Issuer()
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.base = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


Make = Callable[..., Awaitable[TokenValidator]]


@pytest.fixture
async def make(issuer: Issuer) -> AsyncIterator[Make]:
    sessions: list[aiohttp.ClientSession] = []

    async def build(**policy: Any) -> TokenValidator:
        http = aiohttp.ClientSession()
        sessions.append(http)
        settings: dict[str, Any] = {"issuer": issuer.issuer, "audience": AUDIENCE, **policy}
        return TokenValidator(TokenPolicy(**settings), DocumentFetcher(http))

    yield build
    for http in sessions:
        await http.close()


async def rejected(validator: TokenValidator, header: str | None) -> Rejected:
    with pytest.raises(Rejected) as info:
        await validator.validate(header)
    return info.value


async def test_valid_token_gives_its_subject(issuer: Issuer, make: Make) -> None:
    validator = await make(scopes=("mcp:tools",))  # jwks_uri found through the metadata
    principal = await validator.validate("Bearer " + issuer.token())
    assert principal == Principal("alice", frozenset({"mcp:tools"}))
    assert principal.key == "sub:alice"


@pytest.mark.parametrize(
    ("claims", "description"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": "https://other.example/mcp"}, "another audience"),
        ({"iss": "https://evil.example"}, "another issuer"),
        ({"sub": None}, "invalid"),
    ],
)
async def test_bad_claims_are_401_invalid_token(
    issuer: Issuer, make: Make, claims: dict[str, Any], description: str
) -> None:
    validator = await make()
    refusal = await rejected(validator, "Bearer " + issuer.token(**claims))
    assert (refusal.status, refusal.error) == (401, "invalid_token")
    assert description in refusal.description


async def test_bad_signature_and_garbage(issuer: Issuer, make: Make) -> None:
    validator = await make()
    forged = issuer.token(key=rsa.generate_private_key(65537, 2048))
    assert "signature" in (await rejected(validator, "Bearer " + forged)).description
    assert (await rejected(validator, "Bearer not-a-jwt")).error == "invalid_token"
    hs = jwt.encode({"sub": "x"}, "secret-secret-secret-secret-32by", "HS256")
    assert "algorithm" in (await rejected(validator, "Bearer " + hs)).description


async def test_missing_token_is_401_without_error_code(make: Make) -> None:
    validator = await make()
    for header in (None, "", "Basic dXNlcjpwdw==", "Bearer "):
        refusal = await rejected(validator, header)
        assert (refusal.status, refusal.error) == (401, None)


async def test_missing_scope_is_403_with_the_scope_hint(issuer: Issuer, make: Make) -> None:
    validator = await make(scopes=("mcp:tools", "mcp:admin"))
    refusal = await rejected(validator, "Bearer " + issuer.token())
    assert (refusal.status, refusal.error, refusal.scope) == (
        403,
        "insufficient_scope",
        "mcp:tools mcp:admin",
    )


async def test_keys_rotate(issuer: Issuer, make: Make) -> None:
    validator = await make(jwks_uri=issuer.base + "/jwks", jwks_cooldown=0.0)
    await validator.validate("Bearer " + issuer.token())
    await validator.validate("Bearer " + issuer.token())
    assert issuer.jwks_fetches == 1  # cached
    issuer.rotate()
    assert (await validator.validate("Bearer " + issuer.token())).subject == "alice"
    assert issuer.jwks_fetches == 2  # an unknown key id fetched the set again


async def test_introspection(issuer: Issuer, make: Make) -> None:
    validator = await make(
        introspection_url=issuer.base + "/introspect",
        introspection_auth="Basic Z3c6c2VjcmV0",
        scopes=("mcp:tools",),
    )
    principal = await validator.validate("Bearer opaque-good")
    assert principal.subject == "bob"
    assert issuer.introspected == ["Basic Z3c6c2VjcmV0"]
    refusal = await rejected(validator, "Bearer opaque-narrow")
    assert (refusal.status, refusal.error) == (403, "insufficient_scope")
    assert (await rejected(validator, "Bearer revoked")).description == "the token is not active"
