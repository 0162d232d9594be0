"""A stdio server that exits at once, again and again (issue 49, item 3): started
again after a back-off that doubles (to a minute), each exit's warning carrying what
it last wrote to stderr, /readyz and the start-up line saying so, not a restart every
few seconds forever with only "exited with code 3".

Real processes: `gateway serve` in front of a shell command that says why on stderr
and exits 3; a 2026-07-28 client's calls drive the restarts.
"""

from __future__ import annotations

import json
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
            reply = await call_tool_modern(http, gw.url("/x"), "echo", {}, id_=number)
            assert reply.status in (502, 503), reply.text
            assert FATAL not in reply.text  # the server's words stay in the log
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
