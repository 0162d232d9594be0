"""A route that sends its own upstream credentials (issue 49, item 1): a wrong or empty
secret fails `gateway check --reach` and the start-up line, naming where it comes
from, and clients get a gateway error, not a login challenge for a token that is not
theirs. A route that passes the client's own credentials still hands the client the
upstream's challenge.

Real processes: `gateway check` and `gateway serve`; the upstream is the gateway's demo
server in this process behind a check of `Authorization` (401 with a challenge).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.demo import DemoServer
from tests.e2e.fake_client import call_tool_modern
from tests.e2e.gateway_proc import REPO
from tests.e2e.test_http_faults import running_gateway

RIGHT = "Bearer the-right-upstream-secret"
CHALLENGE = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'


@pytest.fixture
async def guarded() -> AsyncIterator[str]:
    """The demo server, answering only requests that carry ``RIGHT``."""

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.headers.get("Authorization") != RIGHT:
            return web.Response(status=401, headers={"WWW-Authenticate": CHALLENGE})
        response: web.StreamResponse = await handler(request)
        return response

    app = DemoServer().app()
    app.middlewares.append(gate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await runner.cleanup()


async def _check(route: str, secret: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", "check", "--reach", "--route", route]
    env = {**os.environ, "UPSTREAM_AUTH": secret}
    return await asyncio.to_thread(
        subprocess.run, argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


async def test_a_wrong_route_secret_fails_the_check_naming_where_it_comes_from(
    guarded: str,
) -> None:
    route = f"/x={guarded},headers_from_env=Authorization:UPSTREAM_AUTH"
    for wrong in ("Bearer wrong", ""):
        done = await _check(route, wrong)
        assert done.returncode == 1, done
        said = "the upstream refused the Authorization set by headers_from_env UPSTREAM_AUTH"
        assert said in done.stdout and "check the secret in UPSTREAM_AUTH" in done.stdout
        assert "wrong" not in done.stdout
    good = await _check(route, RIGHT)
    assert good.returncode == 0 and good.stdout.startswith("ok   /x"), good


async def test_clients_get_a_gateway_error_not_a_login_challenge(
    guarded: str, http: aiohttp.ClientSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_AUTH", "Bearer wrong")
    own = f"/own={guarded},headers_from_env=Authorization:UPSTREAM_AUTH"
    async with running_gateway(own, f"/theirs={guarded}", tmp_path=tmp_path) as gw:
        reply = await call_tool_modern(http, gw.url("/own"), "add", {"a": 1, "b": 2})
        assert reply.status == 502, reply.text
        assert "WWW-Authenticate" not in reply.headers
        message = str(reply.message["error"]["message"])
        assert "refused the credentials the route sets (HTTP 401)" in message, message
        assert "did not run" in message and "may have run" not in message
        assert "UPSTREAM_AUTH" not in message  # where they come from: the log's to say
        theirs = await call_tool_modern(http, gw.url("/theirs"), "add", {"a": 1, "b": 2})
        assert theirs.status == 401 and "WWW-Authenticate" in theirs.headers, theirs.text
        log = gw.log()
    assert '"route broken"' in log and "refused the Authorization" in log
