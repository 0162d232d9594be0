"""Transparent mode end to end: official SDK OAuth clients sign in through the gateway,
in front of a protected server of the official SDK, with a real authorization server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.auth.harness import oauth_world, run_python_client
from tests.e2e.gateway_proc import gateway

pytestmark = pytest.mark.interop


@pytest.mark.parametrize(
    ("sdk", "revision"),
    [
        ("1.22.0", "2025-06-18"),
        ("1.9.4", "2025-03-26"),
        ("1.30.0", "2025-11-25"),
        ("2.3.0", "2026-07-28"),
    ],
)
def test_python_client_signs_in_through_the_gateway(
    tmp_path: Path, sdk: str, revision: str
) -> None:
    """The client starts unauthenticated, meets the upstream's 401 (passed on, its
    challenge pointing at the gateway), discovers the authorization server (through
    the gateway's protected-resource document, or, for a 2025-03-26 client, through
    the authorization-server document the gateway bridges at its own origin),
    registers, signs in, and calls tools: without knowing the gateway is there."""
    with (
        oauth_world(tmp_path) as world,
        gateway(f"/mcp={world.upstream}", tmp_path=tmp_path, port=world.gateway_port) as gw,
    ):
        report = run_python_client(sdk, gw.url("/mcp"))
        assert report.get("error") is None, report
        assert report["protocolVersion"] == revision
        assert report["echo"] == "echo: through"
        assert report["whoami"]  # the upstream saw a token of the registered client
        assert report["authorized_at"] == [world.issuer + "/authorize"]
        tokens = world.seen()
        assert tokens, "the upstream saw no token"
        log = gw.log()
    assert not any(token in log for token in tokens), "a token reached the gateway's log"
