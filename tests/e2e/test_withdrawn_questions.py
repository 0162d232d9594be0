"""When the upstream answers a call, the questions it left open are withdrawn (issue
47, item 4): a session client that does not answer them gets the upstream's result at
once, and a `notifications/cancelled` for each question, instead of waiting out the
route's ask_timeout.

Real processes: `gateway serve` in front of a fake server whose `ask_then_go` tool
pushes an elicitation and answers the call without waiting for it; a raw 2025-11-25
session client that declares elicitation and never answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import (
    NEWEST_HANDSHAKE,
    base_headers,
    notification,
    post,
    request,
    session_headers,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.test_http_faults import running_gateway

ASK_TIMEOUT = 15  # the route's: what the client waited out before


async def _session(http: aiohttp.ClientSession, url: str) -> str:
    init = request(
        0,
        "initialize",
        {
            "protocolVersion": NEWEST_HANDSHAKE,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "silent", "version": "0"},
        },
    )
    reply = await post(http, url, init, base_headers())
    session = reply.session_id
    assert session, reply.text
    await post(http, url, notification("notifications/initialized"), session_headers(session))
    return session


async def test_the_answer_goes_out_at_once_and_open_questions_are_withdrawn(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        FakeUpstream("ask") as server,
        running_gateway(f"/mcp={server.url},ask_timeout={ASK_TIMEOUT}", tmp_path=tmp_path) as gw,
    ):
        session = await _session(http, gw.url())
        body = request(1, "tools/call", {"name": "ask_then_go", "arguments": {}})
        data = json.dumps(body).encode()
        seen: list[dict[str, Any]] = []
        async with http.post(gw.url(), data=data, headers=session_headers(session)) as response:
            assert response.content_type == "text/event-stream"
            lines = response.content
            async with asyncio.timeout(10):
                seen.append(await _next_message(lines))  # the question, never answered
                server.go.set()  # the upstream answers the call without it
                started = time.monotonic()
                while not any(m.get("id") == 1 for m in seen):
                    seen.append(await _next_message(lines))
        took = time.monotonic() - started
        assert took < 5, f"the answer waited {took:.1f} s for a question nobody needed"
        asked, *rest = seen
        assert asked["method"] == "elicitation/create", seen
        withdrawn = [m for m in rest if m.get("method") == "notifications/cancelled"]
        assert [w["params"]["requestId"] for w in withdrawn] == [asked["id"]], seen
        assert rest[-1]["result"]["content"][0]["text"] == "went on without it"


async def _next_message(lines: aiohttp.StreamReader) -> dict[str, Any]:
    """The next SSE message's JSON (comments, priming events and ids skipped)."""
    while True:
        line = (await lines.readline()).decode().strip()
        if line.startswith("data:") and line[5:].strip():
            message: dict[str, Any] = json.loads(line[5:])
            return message
