"""A client is told what happened (issue 47, item 1): whether its call may have run,
and whether sending it again is safe, from the one table of the upstream's failures.

Real processes: `gateway serve` in front of fake servers that fail as asked (`flaky`
cuts a tool's first answer after the tool ran; `html500` answers a call with HTTP
500), each as a handshake-era and as a stateless server, a port nothing listens on,
and a stdio command that does not exist; a 2026-07-28 client and a 2025-11-25
session client each time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import call_tool_legacy, call_tool_modern, open_session
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.test_http_faults import running_gateway

MAY_HAVE_RUN = "it was sent, so it may have run: check its effect before calling it again"
NOT_SENT = "the request was not sent; it may be sent again"


def _error(reply: Any) -> dict[str, Any]:
    error = reply.message.get("error")
    assert isinstance(error, dict), reply.message
    return error


def _no_retry_advice(reply: Any) -> None:
    assert "Retry-After" not in reply.headers, dict(reply.headers)
    assert "retryAfterSeconds" not in str(_error(reply).get("data")), reply.message


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_an_answer_lost_after_the_tool_ran_is_not_called_unreachable(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    async with (
        FakeUpstream("flaky", stateless=stateless) as server,
        running_gateway(f"/mcp={server.url}", tmp_path=tmp_path) as gw,
    ):
        modern = await call_tool_modern(http, gw.url(), "plain", {}, id_="m")
        assert modern.status == 502, modern.text
        assert MAY_HAVE_RUN in str(_error(modern)["message"]), modern.message
        assert "unreachable" not in modern.text
        _no_retry_advice(modern)
        assert server.runs == {"plain": 1}  # it ran, once: the gateway did not resend it
    async with (
        FakeUpstream("flaky", stateless=stateless) as server,
        running_gateway(f"/mcp={server.url}", tmp_path=tmp_path) as gw,
    ):
        session = await open_session(http, gw.url())
        legacy = await call_tool_legacy(http, gw.url(), session, "plain", {}, id_=2)
        assert legacy.status == 200 and _error(legacy)["code"] == -32603, legacy.message
        assert MAY_HAVE_RUN in str(_error(legacy)["message"]), legacy.message
        _no_retry_advice(legacy)
        assert server.runs == {"plain": 1}


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_an_upstream_5xx_is_a_bad_gateway_naming_its_status(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    async with (
        FakeUpstream("html500", stateless=stateless) as server,
        running_gateway(f"/mcp={server.url}", tmp_path=tmp_path) as gw,
    ):
        modern = await call_tool_modern(http, gw.url(), "echo", {"text": "x"}, id_="m")
        assert modern.status == 502, modern.text
        message = str(_error(modern)["message"])
        assert "HTTP 500" in message and MAY_HAVE_RUN in message, message
        assert "<html>" not in modern.text
        _no_retry_advice(modern)
        session = await open_session(http, gw.url())
        legacy = await call_tool_legacy(http, gw.url(), session, "echo", {"text": "x"}, id_=2)
        assert legacy.status == 200 and "HTTP 500" in str(_error(legacy)["message"])
        _no_retry_advice(legacy)


async def test_not_sent_says_so_with_when_to_send_again(
    http: aiohttp.ClientSession, tmp_path: Path, dead_url: str
) -> None:
    async with running_gateway(f"/down={dead_url}", tmp_path=tmp_path) as gw:
        modern = await call_tool_modern(http, gw.url("/down"), "echo", {}, id_="m")
        assert modern.status == 503 and modern.headers.get("Retry-After") == "5"
        error = _error(modern)
        assert NOT_SENT in str(error["message"]) and error["data"] == {"retryAfterSeconds": 5}


async def test_a_command_that_cannot_start_is_said_so_without_retry_advice(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    route = "/x=stdio:no-such-mcp-server-xyz --flag"
    async with running_gateway(route, tmp_path=tmp_path) as gw:
        modern = await call_tool_modern(http, gw.url("/x"), "echo", {}, id_="m")
        assert modern.status == 502, modern.text
        message = str(_error(modern)["message"])
        assert message.startswith("route /x: its server could not be started; waiting will")
        assert "no-such-mcp-server-xyz" not in modern.text and "unreachable" not in message
        _no_retry_advice(modern)
