"""The OAuth client driver of oauth_client.py for the 2.x Python SDK (`mcp.Client`,
httpx2), run with its pinned interpreter:

    python oauth_client_v2.py --url URL [--mode 2026-07-28]

Same report as oauth_client.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the code is read off the redirect


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    def __init__(self) -> None:
        self.query: dict[str, list[str]] = {}
        self.visited: list[str] = []

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(url)
        location = response.headers.get("location", "")
        if not location.startswith(REDIRECT):
            status = response.status_code
            raise RuntimeError(f"authorization answered {status}: {response.text[:200]}")
        self.query = parse_qs(urlsplit(location).query)

    async def callback(self) -> AuthorizationCodeResult:
        first = {k: v[0] for k, v in self.query.items()}
        return AuthorizationCodeResult(
            code=first["code"], state=first.get("state"), iss=first.get("iss")
        )


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def run(url: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"sdk": f"python-mcp {version('mcp')}"}
    browser = Browser()
    metadata = OAuthClientMetadata(
        client_name="oauth-peer",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_post",
    )
    auth = OAuthClientProvider(url, metadata, Memory(), browser.redirect, browser.callback)
    try:
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            client = Client(
                streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=30
            )
            async with client:
                out["protocolVersion"] = client.protocol_version
                out["echo"] = text_of(await client.call_tool("echo", {"text": "through"}))
                out["whoami"] = text_of(await client.call_tool("whoami", {}))
    except BaseException as exc:  # the report says what went wrong; exit 0 either way
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["authorized_at"] = [urlsplit(u)._replace(query="").geturl() for u in browser.visited]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", default="2026-07-28")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.url, args.mode))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
