"""A target that takes connections and answers pings but never answers a tool call
(issue 47, item 2): out after its time-outs, kept out while it hangs (its check, a
ping, passes: only a call that succeeds takes it back), its trials one call at a
time on a back-off that doubles.

Real processes: `gateway serve` with two targets, fake MCP servers on loopback: one
answers, one hangs every tool call (and answers `ping`).
"""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import call_tool_modern
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.test_http_faults import running_gateway

TIMEOUT = 0.5  # the route's timeout (seconds)
WINDOW = 10.0  # how long the calls go on


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_hanging_target_is_kept_out_and_tried_on_a_doubling_back_off(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    """Both targets handshake-era servers, or both stateless ones (whose check is not
    a ping on a session)."""
    async with (
        FakeUpstream("ok", stateless=stateless) as good,
        FakeUpstream("hang", stateless=stateless) as hanging,
        running_gateway(
            f"/mcp={good.url},also={hanging.url},timeout={TIMEOUT},health_every=0.2",
            tmp_path=tmp_path,
        ) as gw,
    ):
        started = time.monotonic()
        timeouts: list[float] = []
        shown: list[str] = []
        number = 0
        while time.monotonic() - started < WINDOW:
            number += 1
            reply = await call_tool_modern(http, gw.url(), "echo", {"text": "x"}, id_=number)
            if reply.status == 504:
                timeouts.append(round(time.monotonic() - started, 2))
            else:
                assert reply.status == 200, reply.text
            async with http.get(gw.url("/readyz")) as ready:
                states = (await ready.json())["routes"]["/mcp"]["targets"]
            shown.append(states[1]["state"])
        assert timeouts, "the hanging target was never called"
        # Out after 3 time-outs (each one route timeout), then trials 2, 4, 8 s apart.
        assert len(timeouts) <= 6, timeouts
        ejected = shown.index("ejected")
        assert "up" not in shown[ejected:], shown  # never shown up while it hangs
        assert hanging.calls == len(timeouts)  # every call it got was a time-out
        assert good.calls == number - len(timeouts)
