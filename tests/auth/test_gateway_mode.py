"""auth=gateway end to end: the gateway is the resource server.  It checks the
client's token itself and calls the upstream with the route's own credential;
the upstream records every token it is shown, so the test can say the client's
never reached it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.auth import challenge
from tests.auth.harness import INITIALIZE, World, http, mint, oauth_world, run_client
from tests.e2e.gateway_proc import RunningGateway, gateway

pytestmark = pytest.mark.interop

PRM = "/.well-known/oauth-protected-resource"


@contextlib.contextmanager
def guarded(tmp_path: Path) -> Iterator[tuple[World, RunningGateway]]:
    with oauth_world(tmp_path) as world:
        secret = tmp_path / "upstream-credential"
        secret.write_text(f"Bearer {world.service_token}\n")
        config = tmp_path / "gateway.toml"
        config.write_text(
            f"""
[[routes]]
path = "/mcp"
upstream = "{world.upstream}"
auth = "gateway"
public_url = "{world.gateway_base}/mcp"
auth_issuer = "{world.issuer}"
auth_scopes = ["mcp"]
headers_from_file = {{ Authorization = "{secret}" }}
"""
        )
        with gateway(
            extra=("--config", str(config)),
            tmp_path=tmp_path,
            port=world.gateway_port,
            expected_errors=(),
        ) as gw:
            yield world, gw


def test_client_signs_in_with_the_gateway_and_its_token_stays_there(tmp_path: Path) -> None:
    with guarded(tmp_path) as (world, gw):
        report = run_client("1.22.0", gw.url("/mcp"))
        assert report.get("error") is None, report
        assert report["echo"] == "echo: through"
        assert report["whoami"] == "gateway"  # the upstream saw the route's own credential
        assert set(world.seen()) == {world.service_token}


def test_tokens_the_gateway_refuses(tmp_path: Path) -> None:
    with guarded(tmp_path) as (world, gw):
        metadata = gw.url(PRM + "/mcp")
        status, headers, body = http(gw.url("/mcp"), INITIALIZE)
        assert status == 401 and "error" in body  # refused before the body is read
        value = headers["WWW-Authenticate"]
        assert challenge.param(value, "resource_metadata") == metadata
        assert challenge.param(value, "error") is None  # no token: no error code (RFC 6750)
        audience = gw.url("/mcp")
        cases = {
            "expired": (mint(world, aud=audience, exp=int(time.time()) - 3600), 401),
            "wrong audience": (mint(world, aud=world.upstream), 401),
            "wrong issuer": (mint(world, aud=audience, iss="http://127.0.0.1:1"), 401),
            "bad signature": (mint(world, aud=audience, untrusted_key=True), 401),
            "missing scope": (mint(world, aud=audience, scope="other"), 403),
        }
        for name, (token, expected) in cases.items():
            status, headers, _ = http(
                gw.url("/mcp"), INITIALIZE, {"Authorization": f"Bearer {token}"}
            )
            assert status == expected, name
            value = headers["WWW-Authenticate"]
            error = "insufficient_scope" if expected == 403 else "invalid_token"
            assert challenge.param(value, "error") == error, name
            assert challenge.param(value, "resource_metadata") == metadata, name
            if expected == 403:
                assert challenge.param(value, "scope") == "mcp"
        good = mint(world, aud=audience)
        status, _, body = http(gw.url("/mcp"), INITIALIZE, {"Authorization": f"Bearer {good}"})
        assert status == 200 and "result" in body
        _, _, document = http(metadata)
        assert document["resource"] == audience
        assert document["authorization_servers"] == [world.issuer]
        assert document["scopes_supported"] == ["mcp"]
        # The client's tokens never reached the upstream, valid or not.
        assert set(world.seen()) <= {world.service_token}
        assert good not in gw.log()
