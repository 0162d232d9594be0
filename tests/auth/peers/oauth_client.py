"""An MCP client that signs in with the official Python SDK's OAuth support
(`OAuthClientProvider`), run with a pinned SDK's interpreter:

    python oauth_client.py --url URL

It starts unauthenticated, follows whatever the server's 401 leads to
(discovery, dynamic registration, authorization with PKCE, token), then calls
tools.  The authorization server approves at once, so the "browser" is one GET
whose redirect carries the code.  Prints one JSON object:

    {"sdk": "python-mcp X", "protocolVersion": ..., "echo": ..., "whoami": ...,
     "issuer": <authorization server the SDK found>, "error": <if it failed>}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import sys
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
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
    """Follows the authorization URL once and keeps what the redirect carries."""

    def __init__(self) -> None:
        self.query: dict[str, list[str]] = {}
        self.visited: list[str] = []

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient(follow_redirects=False) as http:
            response = await http.get(url)
        location = response.headers.get("location", "")
        if not location.startswith(REDIRECT):
            status = response.status_code
            raise RuntimeError(f"authorization answered {status}: {response.text[:200]}")
        self.query = parse_qs(urlsplit(location).query)

    async def callback(self) -> Any:
        code = self.query["code"][0]
        state = self.query.get("state", [None])[0]
        return code, state


def provider(url: str, browser: Browser) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="oauth-peer",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_post",
    )
    return OAuthClientProvider(url, metadata, Memory(), browser.redirect, browser.callback)


@contextlib.asynccontextmanager
async def streams(url: str, auth: httpx.Auth):
    from mcp.client import streamable_http as sh

    modern = getattr(sh, "streamable_http_client", None)
    if modern is not None and "http_client" in inspect.signature(modern).parameters:
        async with (
            httpx.AsyncClient(auth=auth, timeout=30, follow_redirects=True) as http,
            modern(url, http_client=http) as opened,
        ):
            yield opened[0], opened[1]
        return
    async with sh.streamablehttp_client(url, auth=auth) as opened:
        yield opened[0], opened[1]


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def run(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {"sdk": f"python-mcp {version('mcp')}"}
    browser = Browser()
    auth = provider(url, browser)
    try:
        async with streams(url, auth) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocolVersion"] = init.protocolVersion
            out["echo"] = text_of(await session.call_tool("echo", {"text": "through"}))
            out["whoami"] = text_of(await session.call_tool("whoami", {}))
    except BaseException as exc:  # the report says what went wrong; exit 0 either way
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["authorized_at"] = [urlsplit(u)._replace(query="").geturl() for u in browser.visited]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    out = asyncio.run(run(args.url))
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
