"""Transparent mode end to end: official SDK OAuth clients sign in through the gateway,
in front of a protected server of the official SDK, with a real authorization server."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.auth import challenge
from tests.auth.harness import INITIALIZE, http, mint, oauth_world, run_client
from tests.e2e.gateway_proc import gateway

pytestmark = pytest.mark.interop


@pytest.mark.parametrize(
    ("sdk", "revision"),
    [
        ("1.22.0", "2025-06-18"),
        ("1.9.4", "2025-03-26"),
        ("1.30.0", "2025-11-25"),
        ("2.3.0", "2026-07-28"),
        ("ts", "2025-11-25"),  # @modelcontextprotocol/sdk 1.x, its latest revision
    ],
)
def test_sdk_client_signs_in_through_the_gateway(tmp_path: Path, sdk: str, revision: str) -> None:
    """The client starts unauthenticated, meets the upstream's 401 (passed on, its
    challenge pointing at the gateway), discovers the authorization server (through
    the gateway's protected-resource document, or, for a 2025-03-26 client, through
    the authorization-server document the gateway bridges at its own origin),
    registers, signs in, and calls tools: without knowing the gateway is there."""
    with (
        oauth_world(tmp_path) as world,
        gateway(f"/mcp={world.upstream}", tmp_path=tmp_path, port=world.gateway_port) as gw,
    ):
        report = run_client(sdk, gw.url("/mcp"))
        assert report.get("error") is None, report
        assert report["protocolVersion"] == revision
        assert report["echo"] == "echo: through"
        assert report["whoami"]  # the upstream saw a token of the registered client
        assert report["authorized_at"] == [world.issuer + "/authorize"]
        tokens = world.seen()
        assert tokens, "the upstream saw no token"
        log = gw.log()
    assert not any(token in log for token in tokens), "a token reached the gateway's log"


PRM = "/.well-known/oauth-protected-resource"


def test_the_first_step_every_client_takes(tmp_path: Path) -> None:
    """Unauthenticated: a 401 whose challenge points at the gateway, and the gateway's
    documents: its own URL as the resource, the upstream's authorization server."""
    with (
        oauth_world(tmp_path) as world,
        gateway(f"/mcp={world.upstream}", tmp_path=tmp_path, port=world.gateway_port) as gw,
    ):
        status, headers, body = http(gw.url("/mcp"), INITIALIZE)
        assert status == 401, body
        assert body["error"]["code"] and body["id"] == 1  # a JSON-RPC error in the revision
        value = headers["WWW-Authenticate"]
        assert challenge.param(value, "resource_metadata") == gw.url(PRM + "/mcp")
        # Also when the gateway already knows the upstream's era (a verdict is cached).
        token = mint(world)
        status, _, _ = http(gw.url("/mcp"), INITIALIZE, {"Authorization": f"Bearer {token}"})
        assert status == 200
        assert http(gw.url("/mcp"), INITIALIZE)[0] == 401
        for path in (PRM + "/mcp", PRM):
            status, _, document = http(gw.url(path))
            assert status == 200
            assert document["resource"] == gw.url("/mcp")
            servers = [server.rstrip("/") for server in document["authorization_servers"]]
            assert servers == [world.issuer]
        status, _, metadata = http(gw.url("/.well-known/oauth-authorization-server"))
        assert (status, metadata["issuer"].rstrip("/")) == (200, world.issuer)
        # Forwarded headers are not trusted unless the operator says so.
        spoofed = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}
        assert http(gw.url(PRM + "/mcp"), headers=spoofed)[2]["resource"] == gw.url("/mcp")


def test_behind_a_tls_terminating_proxy(tmp_path: Path) -> None:
    """--trust-forwarded: the challenge and the document name the public https URL."""
    proxy = {
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "mcp.example.com",
        "X-Forwarded-Prefix": "/team",
    }
    with (
        oauth_world(tmp_path) as world,
        gateway(
            f"/mcp={world.upstream}",
            extra=("--trust-forwarded",),
            tmp_path=tmp_path,
            port=world.gateway_port,
        ) as gw,
    ):
        status, headers, _ = http(gw.url("/mcp"), INITIALIZE, proxy)
        assert status == 401
        assert challenge.param(headers["WWW-Authenticate"], "resource_metadata") == (
            "https://mcp.example.com/.well-known/oauth-protected-resource/team/mcp"
        )
        _, _, document = http(gw.url(PRM + "/team/mcp"), headers=proxy)
        assert document["resource"] == "https://mcp.example.com/team/mcp"
        forwarded = {"Forwarded": 'proto=https;host="pub.example"'}
        _, _, document = http(gw.url(PRM + "/mcp"), headers=forwarded)
        assert document["resource"] == "https://pub.example/mcp"
