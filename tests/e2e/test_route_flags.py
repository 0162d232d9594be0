"""Routes by flags for real upstreams (issue 39): upstream headers whose value comes
from the environment reach the upstream; an unknown option is refused naming the
nearest known one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import open_session
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import REPO, gateway


async def test_a_header_from_the_environment_reaches_the_upstream(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    secret = "sk-test-0123456789"
    async with FakeUpstream("ok") as fake:
        route = f"/m={fake.url},headers_from_env=X-Api-Key:OP_TEST_KEY|X-Team:OP_TEAM"
        env = {"OP_TEST_KEY": secret, "OP_TEAM": "blue"}
        with gateway(route, tmp_path=tmp_path, env=env) as gw:
            await open_session(http, gw.url("/m"))
            assert fake.seen_headers, "the upstream was never reached"
            for headers in fake.seen_headers:
                assert headers.get("X-Api-Key") == secret, headers
                assert headers.get("X-Team") == "blue", headers
            assert secret not in gw.log(), "the secret reached the log"


def test_an_unknown_route_option_names_the_nearest(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "gateway", "serve", "--route", "/m=http://h/mcp,timout=3"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "unknown option 'timout' (did you mean 'timeout'?)" in done.stderr
