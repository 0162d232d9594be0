"""Retries only where they are safe (issue 40, item 4): a call that may have reached
the server is sent again only when running it twice cannot harm (a read-only method,
or a tool whose annotations say readOnlyHint or idempotentHint); a plain tool is never
run twice, and its client gets a clear error in its own revision.

Real processes: `gateway serve` in front of a fake server (`flaky`) that records every
run of each tool and cuts the answer of each tool's first run after it ran.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import (
    call_tool_legacy,
    call_tool_modern,
    modern_headers,
    modern_request,
    open_session,
    post,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.test_http_faults import running_gateway


async def list_tools(http: aiohttp.ClientSession, url: str) -> None:
    """The gateway learns each tool's annotations from a list that passes through."""
    reply = await post(http, url, modern_request(1, "tools/list"), modern_headers("tools/list"))
    assert {t["name"] for t in reply.result["tools"]} >= {"read_it", "same_again", "plain"}


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_stateless_clients_safe_tools_are_run_again_and_a_plain_one_never(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    """Before a handshake-era server, and a stateless one (where the pass-through
    lane sends the calls: what it holds is retried by the full path's rule)."""
    async with (
        FakeUpstream("flaky", stateless=stateless) as server,
        running_gateway(f"/mcp={server.url}", tmp_path=tmp_path) as gw,
    ):
        await list_tools(http, gw.url())
        for name in ("read_it", "same_again"):
            reply = await call_tool_modern(http, gw.url(), name, {}, id_=name)
            assert reply.status == 200, reply.text
            assert text_of(reply.result) == f"{name} ran 2 times", reply.message
        plain = await call_tool_modern(http, gw.url(), "plain", {}, id_="p")
        assert "error" in plain.message, plain.message  # said, in the client's revision
        assert server.runs["plain"] == 1  # never run twice by the gateway
        again = await call_tool_modern(http, gw.url(), "plain", {}, id_="p2")
        assert text_of(again.result) == "plain ran 2 times"  # the client's own retry
        assert server.runs == {"read_it": 2, "same_again": 2, "plain": 2}
        async with http.get(gw.url("/metrics")) as response:
            metrics = await response.text()
        assert 'gateway_upstream_retries_total{route="/mcp",why="safe_tool"} 2.0' in metrics


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_sessions_calls_follow_the_same_rule(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    async with (
        FakeUpstream("flaky", stateless=stateless) as server,
        running_gateway(f"/mcp={server.url}", tmp_path=tmp_path) as gw,
    ):
        session = await open_session(http, gw.url())
        listed = await post(
            http,
            gw.url(),
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            _session_headers(session),
        )
        assert "tools" in listed.result
        read = await call_tool_legacy(http, gw.url(), session, "read_it", {}, id_=2)
        assert text_of(read.result) == "read_it ran 2 times", read.message
        plain = await call_tool_legacy(http, gw.url(), session, "plain", {}, id_=3)
        assert plain.status == 200 and "error" in plain.message, plain.message
        assert server.runs == {"read_it": 2, "plain": 1}


def _session_headers(session: str) -> dict[str, str]:
    from tests.e2e.fake_client import session_headers

    return session_headers(session)
