"""An authorization server and a protected MCP server, built on the official Python
SDK's auth support (run with a pinned SDK's interpreter, e.g. .peers/py-1.22.0).

    python oauth_servers.py authorization-server --port N [--default-audience URL]
    python oauth_servers.py protected-server --port N --issuer URL --audience URL...
                                             [--service-token T] [--seen-file F]

The authorization server is the SDK's (`create_auth_routes`: metadata, dynamic
registration, /authorize, /token) over a small in-memory provider that approves
every request at once and issues RS256 JWTs; it also serves its JWKS and, for
tests only, `POST /test/mint` (a token with the claims given, optionally signed
with a key nobody trusts).  The protected server is the SDK's FastMCP with a
token verifier (the SDK's RequireAuthMiddleware answers 401/403 and serves the
protected-resource metadata); it checks JWTs against the JWKS with PyJWT and
records every Authorization it sees, so a test can say what reached it.
"""

from __future__ import annotations

import argparse
import secrets
import time
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SCOPES = ["mcp", "mcp:admin"]
TOKEN_TTL = 3600


class AutoApprove:
    """An in-memory OAuthAuthorizationServerProvider that approves every request."""

    def __init__(self, issuer: str, default_audience: str | None) -> None:
        self.issuer = issuer
        self.default_audience = default_audience
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.audiences: dict[str, str | None] = {}

    def sign(self, claims: dict[str, Any], key: Any = None) -> str:
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": resource or self.default_audience,
            "client_id": client_id,
            "scope": " ".join(scopes),
            "iat": now,
            "exp": now + TOKEN_TTL,
            "jti": secrets.token_hex(8),
        }
        refresh = secrets.token_urlsafe(24)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        self.audiences[refresh] = resource
        return OAuthToken(
            access_token=self.sign({k: v for k, v in claims.items() if v is not None}),
            token_type="Bearer",
            expires_in=TOKEN_TTL,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self.issue(
            client.client_id or "", authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "unknown refresh token")
        resource = self.audiences.pop(refresh_token.token, None)
        return self.issue(client.client_id or "", scopes or refresh_token.scopes, resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return None

    async def revoke_token(self, token: Any) -> None:
        return None


def authorization_server(port: int, default_audience: str | None) -> Starlette:
    issuer = f"http://127.0.0.1:{port}"
    provider = AutoApprove(issuer, default_audience)
    registration = ClientRegistrationOptions(
        enabled=True, valid_scopes=SCOPES, default_scopes=["mcp"]
    )
    metadata = build_metadata(AnyHttpUrl(issuer), None, registration, RevocationOptions())

    async def document(request: Request) -> JSONResponse:
        body = metadata.model_dump(mode="json", exclude_none=True)
        return JSONResponse({**body, "jwks_uri": issuer + "/jwks", "scopes_supported": SCOPES})

    async def jwks(request: Request) -> JSONResponse:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(provider.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**jwk, "kid": provider.kid, "use": "sig", "alg": "RS256"}]})

    async def mint(request: Request) -> JSONResponse:
        """Test only: a token with the claims given (defaults: a valid one)."""
        wanted = await request.json()
        now = int(time.time())
        claims = {
            "iss": issuer,
            "sub": "user-1",
            "aud": default_audience,
            "scope": "mcp",
            "iat": now,
            "exp": now + TOKEN_TTL,
            **wanted.get("claims", {}),
        }
        key = rsa.generate_private_key(65537, 2048) if wanted.get("untrusted_key") else None
        kept = {k: v for k, v in claims.items() if v is not None}
        return JSONResponse({"token": provider.sign(kept, key)})

    routes = [
        Route("/.well-known/oauth-authorization-server", document, methods=["GET"]),
        Route("/jwks", jwks, methods=["GET"]),
        Route("/test/mint", mint, methods=["POST"]),
        *create_auth_routes(provider, AnyHttpUrl(issuer), client_registration_options=registration),
    ]
    return Starlette(routes=routes)


class JwtVerifier:
    """The protected server's TokenVerifier: RS256 JWTs from the issuer's JWKS, for one
    of its audiences; or the static service token (what a gateway of its own presents)."""

    def __init__(
        self, issuer: str, audiences: list[str], service_token: str | None, seen: str | None
    ) -> None:
        self.issuer = issuer
        self.audiences = audiences
        self.service_token = service_token
        self.seen = seen
        self.keys = jwt.PyJWKClient(issuer + "/jwks", cache_keys=True)

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.seen:
            # A test server's small record; blocking the loop briefly is fine here.
            with open(self.seen, "a", encoding="utf-8") as handle:  # noqa: ASYNC230
                handle.write(token + "\n")
        if self.service_token and secrets.compare_digest(token, self.service_token):
            return AccessToken(token=token, client_id="gateway", scopes=["mcp"])
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self.audiences, issuer=self.issuer
            )
        except jwt.PyJWTError:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=str(claims.get("aud")),
        )


def protected_server(args: argparse.Namespace) -> Starlette:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.fastmcp import FastMCP

    url = f"http://127.0.0.1:{args.port}/mcp"
    verifier = JwtVerifier(args.issuer, args.audience or [url], args.service_token, args.seen_file)
    mcp = FastMCP(
        "protected",
        host="127.0.0.1",
        port=args.port,
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(args.issuer),
            resource_server_url=AnyHttpUrl(url),
            required_scopes=["mcp"],
        ),
    )

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @mcp.tool()
    def whoami() -> str:
        """Who the token the server received speaks for (its client id)."""
        token = get_access_token()
        return token.client_id if token is not None else "nobody"

    return mcp.streamable_http_app()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["authorization-server", "protected-server"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--default-audience")
    parser.add_argument("--issuer")
    parser.add_argument("--audience", action="append")
    parser.add_argument("--service-token")
    parser.add_argument("--seen-file")
    args = parser.parse_args()
    if args.role == "authorization-server":
        app = authorization_server(args.port, args.default_audience)
    else:
        app = protected_server(args)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
