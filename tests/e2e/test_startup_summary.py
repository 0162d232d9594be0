"""The startup summary (issue 39): `gateway serve` logs one line per route, with the
upstream's transport and revision, or the reason it is broken and a hint at the fix;
`gateway check --reach` gives the same verdicts and an exit code."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import REPO, RunningGateway, gateway

EXITS = "stdio:sh -c 'echo config missing >&2; exit 7'"


async def _plain_web_server() -> tuple[web.AppRunner, str]:
    """A web server that speaks no MCP: 404 for everything."""
    runner = web.AppRunner(web.Application(), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    return runner, f"http://127.0.0.1:{port}/mcp"


async def _route_lines(running: RunningGateway, count: int, within: float = 30.0) -> dict[str, Any]:
    """The summary's line of each route, once ``count`` routes have one (bounded)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        lines = {}
        for line in running.log().splitlines():
            if line.startswith("{") and '"route ' in line:
                record = json.loads(line)
                if record["event"] in ("route ready", "route broken"):
                    lines[record["route"]] = record
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.1)  # polling (the fakes share this loop), bounded
    raise AssertionError(f"no summary line for every route:\n{running.log()[-3000:]}")


async def test_each_broken_route_kind_says_why_at_start(tmp_path: Path, dead_url: str) -> None:
    runner, plain = await _plain_web_server()
    try:
        async with FakeUpstream("ok") as fake:
            routes = (
                f"/good={fake.url}",
                f"/down={dead_url}",
                f"/tls={fake.url.replace('http://', 'https://')}",
                f"/web={plain}",
                "/nocmd=stdio:no-such-mcp-server-xyz --flag",
                f"/exits={EXITS}",
            )
            with gateway(*routes, tmp_path=tmp_path) as running:
                lines = await _route_lines(running, len(routes))
    finally:
        await runner.cleanup()
    good = lines["/good"]
    assert (good["event"], good["transport"]) == ("route ready", "http"), good
    assert good["revision"], good
    expected = {
        "/down": ("nothing is listening at 127.0.0.1:", "start the server"),
        "/tls": ("TLS handshake failed: the port speaks plain HTTP", "use http://"),
        "/web": ("not an MCP endpoint", "check the URL's path"),
        "/nocmd": ("command not found: no-such-mcp-server-xyz", "install it"),
        "/exits": ("exited with code 7; its last stderr line: config missing", "by hand"),
    }
    for path, (reason, hint) in expected.items():
        line = lines[path]
        assert line["event"] == "route broken", line
        assert reason in line["reason"], line
        assert hint in line["hint"], line
        assert line["level"] == "warning", line


async def _check(*args: str) -> subprocess.CompletedProcess[str]:
    """`gateway check ARGS` in a thread: the fakes of this loop keep answering."""
    argv = [sys.executable, "-m", "gateway", "check", *args]
    return await asyncio.to_thread(
        subprocess.run, argv, cwd=REPO, capture_output=True, text=True, timeout=90
    )


async def test_gateway_check_exit_codes(dead_url: str) -> None:
    async with FakeUpstream("ok") as fake:
        good = await _check("--route", f"/good={fake.url}", "--reach")
        assert good.returncode == 0, good.stderr
        assert good.stdout.startswith("ok   /good  "), good.stdout
        assert ", http 20" in good.stdout, good.stdout  # as transport= says it
        both = ("--route", f"/good={fake.url}", "--route", f"/down={dead_url}")
        bad = await _check(*both, "--reach")
        assert bad.returncode == 1, bad.stderr
        assert "FAIL /down" in bad.stdout and "nothing is listening" in bad.stdout
        unreached = await _check("--route", f"/down={dead_url}")  # valid, not reached
        assert unreached.returncode == 0 and "valid" in unreached.stdout
    invalid = await _check("--route", "/x=ftp://nowhere")
    assert invalid.returncode == 2 and "must be an http(s):// URL" in invalid.stderr
