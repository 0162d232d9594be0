"""A stdio server that exits at once, again and again (issue 49, item 3): started
again after a back-off that doubles (to a minute), each exit's warning carrying what
it last wrote to stderr, /readyz and the start-up line saying so, not a restart every
few seconds forever with only "exited with code 3".

Real processes: `gateway serve` in front of a shell command that says why on stderr
and exits 3; a 2026-07-28 client's calls drive the restarts.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import call_tool_modern
from tests.e2e.test_http_faults import running_gateway

FATAL = "FATAL: GREETING env var is required"
COMMAND = f"stdio:sh -c 'echo {FATAL} >&2; exit 3'"


async def test_a_crash_looping_command_backs_off_and_says_why(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with running_gateway(f"/x={COMMAND},timeout=5", tmp_path=tmp_path) as gw:
        for number in range(6):
            await _until_startable(http, gw.url("/readyz"))
            reply = await call_tool_modern(http, gw.url("/x"), "echo", {}, id_=number)
            assert reply.status in (502, 503), reply.text
            assert FATAL not in reply.text  # the server's words stay in the log
        # Within the back-off: told at once that its server could not be started (no
        # advice to wait: waiting will not help).
        reply = await call_tool_modern(http, gw.url("/x"), "echo", {}, id_=7)
        assert reply.status == 502, reply.text
        assert "could not be started" in str(reply.error["message"]), reply.text
        assert "Retry-After" not in reply.headers and FATAL not in reply.text
        async with http.get(gw.url("/readyz")) as response:
            ready = (await response.json())["routes"]["/x"]
        assert ready["ready"] is False and "keeps exiting" in ready["error"], ready
        assert FATAL in ready["last_stderr"], ready
        lines = [json.loads(line) for line in gw.log().splitlines() if line.startswith("{")]
    stopped = [line for line in lines if line["event"] == "the stdio server stopped"]
    assert len(stopped) >= 4, stopped
    assert all(FATAL in line["last_stderr"] for line in stopped), stopped
    waits = [line["next_start_in_s"] for line in stopped]
    assert waits[-1] >= 4 * waits[1] > 0, waits  # doubling, not a steady restart
    broken = [line for line in lines if line["event"] == "route broken"]
    assert broken and FATAL in broken[-1]["hint"] + broken[-1]["reason"], broken


async def _until_startable(http: aiohttp.ClientSession, ready_url: str) -> None:
    """Until the route's back-off is over (/readyz says when the next start may be),
    bounded: a call then starts a child rather than being refused at once."""
    deadline = time.monotonic() + 30
    while True:
        async with http.get(ready_url) as response:
            route = (await response.json())["routes"]["/x"]
        if route.get("next_start_in_s", 0) <= 0:
            return
        assert time.monotonic() < deadline, route
        await asyncio.sleep(0.05)  # polling /readyz, bounded by the deadline
