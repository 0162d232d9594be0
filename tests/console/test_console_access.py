"""The console as an attacker meets it, over real HTTP to `gateway serve --console`:
the token only from the environment, a DNS-rebinding Host refused, the rate limit,
and nothing secret of a route on its pages."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.console.conftest import TOKEN, console_port
from tests.e2e.gateway_proc import REPO, gateway


def get(url: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_console_needs_its_token_from_the_environment(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GATEWAY_CONSOLE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--console", "--check-config"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "GATEWAY_CONSOLE_TOKEN" in done.stderr
    # And there is no flag that would put the token on a command line.
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--console-token", "x" * 20, "--check-config"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "No such option" in done.stderr


def test_a_rebinding_host_is_refused_and_the_rate_limit_holds(
    console_env: None, tmp_path: Path
) -> None:
    with gateway(extra=("--console", "--console-listen", "127.0.0.1:0"), tmp_path=tmp_path) as gw:
        base = f"http://127.0.0.1:{console_port(gw)}"
        status, _ = get(base + "/routes", Host="attacker.example")
        assert status == 403
        statuses = [get(base + "/routes")[0] for _ in range(120)]
        assert statuses[0] == 200 and 429 in statuses
        # Refused before the token is even looked at: guessing is as slow as browsing.
        connection = http.client.HTTPConnection("127.0.0.1", console_port(gw), timeout=10)
        connection.request("GET", "/routes", headers={"Authorization": "Bearer guess"})
        assert connection.getresponse().status in (401, 429)


def test_a_routes_secrets_are_not_on_its_page(console_env: None, tmp_path: Path) -> None:
    route = "/x=http://user:hunter2@127.0.0.1:9/mcp?api_key=s3cret"
    with gateway(
        route, extra=("--console", "--console-listen", "127.0.0.1:0"), tmp_path=tmp_path
    ) as gw:
        status, body = get(f"http://127.0.0.1:{console_port(gw)}/routes")
        assert status == 200
        assert b"http://127.0.0.1:9/mcp" in body
        assert b"hunter2" not in body and b"s3cret" not in body and b"user" not in body
        assert TOKEN.encode() not in body
        # Its health is the check /readyz makes: nothing listens on port 9.
        said = b"<td class=health><b>not ready</b>: nothing is listening at 127.0.0.1:9"
        assert said in body, body


def test_a_healthy_route_shows_ready(demo_console: tuple[object, str]) -> None:
    _, console = demo_console
    status, body = get(console + "/fragment/routes")
    assert status == 200 and b"<td class=health>ready</td>" in body, body


@pytest.mark.parametrize(
    "path", ["/", "/routes", "/calls", "/calls/1", "/playground", "/static/console.js", "/nothing"]
)
def test_every_path_is_401_without_the_token(demo_console: tuple[object, str], path: str) -> None:
    _, console = demo_console
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(console + path, timeout=10)
    assert refused.value.code == 401 and refused.value.read() == b""
