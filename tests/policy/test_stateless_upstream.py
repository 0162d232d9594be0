"""A 2026-07-28 upstream that floods its client, issues states that look like the
gateway's, and says "Resource not found" its own way (issue 37, items 4, 7 and 8),
behind `gateway serve`, against tests/policy/stateless_upstream.py run as a process.

- Its questions toward a session client (2025-11-25, which gets them pushed) are held
  to the route's ``questions_at_once``: past it the call fails at once, naming the
  bound, and nothing is pushed.
- A state it issued reaches it unchanged, whatever it looks like: a ``gw1.`` state the
  gateway did not seal is the upstream's, not a tampered one of the gateway's.
- Its "Resource not found" (-32602 with ``data.uri``) reaches a 2025-11-25 client as
  that revision's -32002, exactly as a resource hidden by the route's policy does.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import (
    WAIT,
    base_headers,
    initialize,
    modern_headers,
    modern_request,
    notification,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import REPO, RunningGateway, gateway
from tests.policy.stateless_upstream import OWN_STATE

ANSWER = {"action": "accept", "content": {"ok": True}}


class Upstream:
    """The upstream's process, and the lines it printed (what reached it)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.policy.stateless_upstream"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(WAIT):
            self.process.kill()
            raise TimeoutError("the stateless upstream did not start")
        self.url = self.lines[0].split()[1]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            self._ready.set()

    def calls(self, name: str) -> int:
        return self.lines.count(f"call {name}")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(WAIT)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    running = Upstream()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def gw(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    routes = (f"/mcp={upstream.url},timeout=20", f"/hidden={upstream.url},resources=deny:test://h*")
    with gateway(*routes, tmp_path=tmp_path_factory.mktemp("gw")) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def legacy(
    http: aiohttp.ClientSession, url: str, method: str, params: Any, caps: Any = None
) -> Any:
    """A 2025-11-25 session client (declaring ``caps``) sends one request."""
    opening = initialize(0)
    opening["params"]["capabilities"] = caps or {}
    reply = await post(http, url, opening, base_headers())
    session = reply.session_id
    assert session is not None, reply.text
    headers = session_headers(session)
    await post(http, url, notification("notifications/initialized"), headers)
    return await post(http, url, request(2, method, params), headers)


async def test_a_flood_of_questions_is_not_pushed_to_a_session_client(
    http: aiohttp.ClientSession, gw: RunningGateway, upstream: Upstream
) -> None:
    before = upstream.calls("flood")
    params = {"name": "flood", "arguments": {}}
    reply = await legacy(http, gw.url("/mcp"), "tools/call", params, {"elicitation": {}})
    pushed = [m for m in reply.messages if isinstance(m, dict) and "method" in m]
    assert pushed == [], f"{len(pushed)} questions pushed"
    error = reply.error
    assert "questions_at_once=32" in error["message"], error
    assert upstream.calls("flood") == before + 1  # failed at once: no retry upstream


async def test_an_upstream_state_that_looks_like_the_gateways_reaches_it_unchanged(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    url = gw.url("/mcp")
    caps = {"elicitation": {"form": {}}}
    first = modern_request(1, "tools/call", {"name": "gwstate", "arguments": {}})
    first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps
    headers = modern_headers("tools/call", "gwstate")
    asked = (await post(http, url, first, headers)).result
    assert asked["resultType"] == "input_required", asked
    assert asked["requestState"] == OWN_STATE
    retry = modern_request(
        2,
        "tools/call",
        {
            "name": "gwstate",
            "arguments": {},
            "inputResponses": {"q": ANSWER},
            "requestState": asked["requestState"],
        },
    )
    retry["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps
    done = (await post(http, url, retry, headers)).result
    assert done["content"][0]["text"] == "state ok", done


async def test_a_missing_resource_reads_as_a_hidden_one_in_the_clients_revision(
    http: aiohttp.ClientSession, gw: RunningGateway, upstream: Upstream
) -> None:
    missing = await legacy(http, gw.url("/mcp"), "resources/read", {"uri": "test://missing"})
    hidden = await legacy(http, gw.url("/hidden"), "resources/read", {"uri": "test://hidden"})
    assert "read test://missing" in upstream.lines and "read test://hidden" not in upstream.lines
    for reply, uri in ((missing, "test://missing"), (hidden, "test://hidden")):
        assert reply.status == 200, reply.text
        assert reply.error == {
            "code": -32002,
            "message": "Resource not found",
            "data": {"uri": uri},
        }, reply.text
    found = await legacy(http, gw.url("/mcp"), "resources/read", {"uri": "test://here"})
    assert found.result["contents"][0]["text"] == "here"
