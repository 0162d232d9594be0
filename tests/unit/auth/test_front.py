"""The cross-era discovery bridge and the well-known endpoints, over loopback HTTP:
an upstream's documents as the gateway serves them under its own URL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.auth import challenge
from gateway.auth.discovery import DocumentFetcher, UpstreamAuth
from gateway.auth.front import RequestSeen, RouteAuth
from gateway.auth.wellknown import WellKnown
from gateway.core import Failure, FailureKind

Serve = Callable[[dict[str, Any]], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Serve JSON documents by path; returns the base URL ({base} in a document is
    replaced by it)."""
    runners: list[web.AppRunner] = []

    async def start(documents: dict[str, Any]) -> str:
        app = web.Application()
        base_holder: list[str] = []

        def fill(value: Any) -> Any:
            if isinstance(value, str):
                return value.replace("{base}", base_holder[0])
            if isinstance(value, list):
                return [fill(v) for v in value]
            if isinstance(value, dict):
                return {k: fill(v) for k, v in value.items()}
            return value

        async def handler(request: web.Request) -> web.Response:
            if request.path not in documents:
                return web.Response(status=404)
            return web.json_response(fill(documents[request.path]))

        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        base_holder.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        return base_holder[0]

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def fetcher() -> AsyncIterator[DocumentFetcher]:
    async with aiohttp.ClientSession() as http:
        yield DocumentFetcher(http)


def as_doc(issuer: str = "{base}") -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": issuer + "/authorize",
        "token_endpoint": issuer + "/token",
        "registration_endpoint": issuer + "/register",
        "response_types_supported": ["code"],
    }


async def test_modern_upstream_bridged_for_an_origin_looking_client(
    serve: Serve, fetcher: DocumentFetcher
) -> None:
    """A 2025-06-18+ upstream names a separate authorization server; a client that
    looks at the MCP server's own origin gets that server's document."""
    auth_server = await serve({"/.well-known/oauth-authorization-server": as_doc()})
    upstream = await serve(
        {
            "/.well-known/oauth-protected-resource/mcp": {
                "resource": "{base}/mcp",
                "authorization_servers": [auth_server],
                "scopes_supported": ["mcp"],
            }
        }
    )
    found = UpstreamAuth(upstream + "/mcp", fetcher)
    assert (await found.authorization_server())["issuer"] == auth_server  # type: ignore[index]
    assert (await found.protected_resource())["scopes_supported"] == ["mcp"]  # type: ignore[index]


async def test_challenge_hint_is_followed(serve: Serve, fetcher: DocumentFetcher) -> None:
    upstream = await serve(
        {"/custom/prm": {"resource": "{base}/mcp", "authorization_servers": ["{base}"]}}
    )
    found = UpstreamAuth(upstream + "/mcp", fetcher)
    assert await found.protected_resource() is None
    found.saw_challenge(f'Bearer resource_metadata="{upstream}/custom/prm"')
    assert found.protected
    assert (await found.protected_resource())["authorization_servers"] == [upstream]  # type: ignore[index]


async def test_legacy_upstream_serving_its_own_metadata(
    serve: Serve, fetcher: DocumentFetcher
) -> None:
    """A 2025-03-26 upstream is its own authorization server: its document is
    forwarded, and newer clients get a protected-resource document naming it."""
    upstream = await serve({"/.well-known/oauth-authorization-server": as_doc()})
    found = UpstreamAuth(upstream + "/mcp", fetcher)
    assert (await found.authorization_server())["token_endpoint"] == upstream + "/token"  # type: ignore[index]
    assert await found.authorization_servers() == [upstream]


async def test_legacy_upstream_without_metadata_gets_the_default_endpoints(
    serve: Serve, fetcher: DocumentFetcher
) -> None:
    upstream = await serve({})
    found = UpstreamAuth(upstream + "/mcp", fetcher)
    assert await found.authorization_server() is None  # not known to be protected
    found.saw_challenge("Bearer")
    document = await found.authorization_server()
    assert document is not None and document["authorization_endpoint"] == upstream + "/authorize"


# ------------------------------------------------------------- the endpoints


async def gateway_app(routes: list[RouteAuth]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    WellKnown(routes).register(app)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def test_well_known_endpoints(serve: Serve, fetcher: DocumentFetcher) -> None:
    auth_server = await serve({"/.well-known/oauth-authorization-server": as_doc()})
    upstream = await serve(
        {
            "/.well-known/oauth-protected-resource": {
                "resource": "{base}/mcp",
                "authorization_servers": [auth_server],
            }
        }
    )
    trusted = RouteAuth(
        "/mcp", upstream=UpstreamAuth(upstream + "/mcp", fetcher), trust_forwarded=True
    )
    pinned = RouteAuth(
        "/other",
        public_url="https://pub.example/team/other",
        upstream=UpstreamAuth(upstream + "/mcp", fetcher),
    )
    runner, base = await gateway_app([trusted, pinned])
    proxy = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"}
    try:
        async with aiohttp.ClientSession() as http:

            async def get(path: str, **headers: str) -> tuple[int, Any]:
                async with http.get(base + path, headers=headers) as resp:
                    return resp.status, await resp.json()

            prm = "/.well-known/oauth-protected-resource"
            status, doc = await get(prm + "/mcp")
            assert (status, doc["resource"]) == (200, base + "/mcp")
            assert doc["authorization_servers"] == [auth_server]
            # Behind a trusted TLS-terminating proxy: https and the public host.
            assert (await get(prm + "/mcp", **proxy))[1]["resource"] == (
                "https://mcp.example.com/mcp"
            )
            assert (await get(prm, **proxy))[1]["resource"] == "https://mcp.example.com/mcp"
            # Not trusted by this route: the headers change nothing; public_url rules.
            assert (await get(prm + "/team/other", **proxy))[1]["resource"] == (
                "https://pub.example/team/other"
            )
            assert (await get(prm + "/other"))[1]["resource"] == "https://pub.example/team/other"
            assert (await get(prm + "/nowhere"))[0] == 404
            status, doc = await get("/.well-known/oauth-authorization-server")
            assert (status, doc["issuer"]) == (200, auth_server)
            assert (await get("/.well-known/openid-configuration/mcp"))[1]["issuer"] == auth_server
    finally:
        await runner.cleanup()


def _Request(headers: dict[str, str] | None = None) -> RequestSeen:
    """Just what RouteAuth reads of a request, as the transport hands it over."""
    return RequestSeen({k.lower(): v for k, v in (headers or {}).items()}, "http", "gw:8080")


async def test_transparent_admission_and_passed_on_refusals(fetcher: DocumentFetcher) -> None:
    route = RouteAuth("/mcp", upstream=UpstreamAuth("http://u:1/mcp", fetcher))
    request: Any = _Request()
    assert (await route.admit(request)).failure is None  # not known to be protected yet
    upstream_refusal = Failure(
        FailureKind.UNAUTHORIZED,
        "no",
        headers={"WWW-Authenticate": 'Bearer resource_metadata="http://u:1/prm", scope="x"'},
    )
    passed = route.passed_on(upstream_refusal, request)
    value = passed.headers["WWW-Authenticate"]
    assert challenge.param(value, "resource_metadata") == (
        "http://gw:8080/.well-known/oauth-protected-resource/mcp"
    )
    assert challenge.param(value, "scope") == "x"
    # Now known to be protected: a request without credentials is refused at once...
    refused = (await route.admit(request)).failure
    assert refused is not None and refused.kind is FailureKind.UNAUTHORIZED
    assert refused.headers["WWW-Authenticate"] == value
    # ...and one with credentials goes on to the upstream, which judges them.
    admitted = await route.admit(_Request({"Authorization": "Bearer t"}))
    assert admitted.failure is None and admitted.principal is None
