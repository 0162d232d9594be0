"""Transparent mode end to end: official SDK OAuth clients sign in through the gateway,
in front of a protected server of the official SDK, with a real authorization server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.auth.harness import oauth_world, run_python_client
from tests.e2e.gateway_proc import gateway

pytestmark = pytest.mark.interop


def test_python_2025_06_18_client_signs_in_through_the_gateway(tmp_path: Path) -> None:
    with (
        oauth_world(tmp_path) as world,
        gateway(f"/mcp={world.upstream}", tmp_path=tmp_path, port=world.gateway_port) as gw,
    ):
        report = run_python_client("1.22.0", gw.url("/mcp"))
        assert report.get("error") is None, report
        assert report["protocolVersion"] == "2025-06-18"
        assert report["echo"] == "echo: through"
        assert report["whoami"]  # the upstream saw a token of the registered client
        assert report["authorized_at"] == [world.issuer + "/authorize"]
        tokens = world.seen()
        assert tokens, "the upstream saw no token"
        log = gw.log()
    assert not any(token in log for token in tokens), "a token reached the gateway's log"
