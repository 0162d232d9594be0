"""Hostile upstreams, end to end: `gateway serve` as a subprocess in front of the
servers of tests/e2e/hostile_upstreams.py, clients speaking raw HTTP.

- The route's ``timeout`` bounds a call's whole time upstream: a server that keeps
  its stream alive (notifications, SSE comments) no longer holds a call forever.
  The client hears its revision's error in time, the upstream is told to stop,
  and the next call on the route is served.  Time the upstream spends waiting for
  the client to answer its question is not counted.
- One call's upstream may not fan out: its questions past the route's bounds are
  refused at once, one by one over few connections, never put to the client.
- An upstream's redirect is never followed to another origin (nothing reaches it,
  not the arguments, not the session id); by default not at all, with an error
  naming the route; ``redirects=same-origin`` follows a 307 on the upstream's own
  origin.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import (
    Reply,
    call_tool_legacy,
    call_tool_modern,
    open_session,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.hostile_upstreams import Elsewhere, Hostile
from tests.e2e.test_asks import ADA, Client, input_required, only_key
from tests.e2e.test_http_faults import running_gateway

# The route timeout under test, and the bound within which its error must arrive
# (far below what a hanging call would take: the old code never answered).
TIMEOUT = 1.0
PROMPT = 6.0
# The /flood route's bounds on one call's questions.
AT_ONCE = 8
PER_CALL = 20
FEW = 5


@pytest.fixture
async def elsewhere() -> AsyncIterator[Elsewhere]:
    server = Elsewhere()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def hostile(elsewhere: Elsewhere) -> AsyncIterator[Hostile]:
    server = Hostile(elsewhere.url)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def gw(hostile: Hostile, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    routes = (
        f"/slow={hostile.url},timeout={TIMEOUT}",
        f"/slow-m={hostile.base}/modern,timeout={TIMEOUT}",
        f"/local-m={hostile.base}/local-modern,version=2026-07-28",
        f"/local-m-ok={hostile.base}/local-modern,version=2026-07-28,redirects=same-origin",
        f"/away-m={hostile.base}/away,version=2026-07-28",
        f"/away={hostile.base}/away",
        f"/local={hostile.base}/local",
        f"/local-ok={hostile.base}/local,redirects=same-origin",
        f"/away-still={hostile.base}/away,redirects=same-origin",
        f"/flood={hostile.url},questions_at_once={AT_ONCE},questions_per_call={PER_CALL}",
        f"/flood-few={hostile.url},questions_at_once={AT_ONCE},questions_per_call={FEW}",
    )
    async with running_gateway(*routes, tmp_path=tmp_path) as running:
        yield running


def descriptors(gw: RunningGateway) -> int:
    return len(os.listdir(f"/proc/{gw.process.pid}/fd"))


async def back_to(gw: RunningGateway, baseline: int, slack: int = 4) -> None:
    """Until the gateway's open descriptors are back near ``baseline`` (bounded)."""
    deadline = time.monotonic() + PROMPT
    while descriptors(gw) > baseline + slack:
        assert time.monotonic() < deadline, (descriptors(gw), baseline)
        await asyncio.sleep(0.05)


def assert_timed_out(reply: Reply, id_: int) -> str:
    assert reply.message.get("id") == id_, reply.message
    assert "result" not in reply.message, reply.message
    text = str(reply.error.get("message", ""))
    assert "timeout" in text.lower() or "in time" in text.lower(), text
    return text


# --------------------------------------------------------------------------- deadlines


@pytest.mark.parametrize("tool", ["trickle", "comments"])
@pytest.mark.parametrize("path", ["/slow", "/slow-m"], ids=["handshake-era", "stateless"])
async def test_a_stateless_clients_call_kept_alive_ends_at_the_route_timeout(
    http: aiohttp.ClientSession, gw: RunningGateway, hostile: Hostile, tool: str, path: str
) -> None:
    url = gw.url(path)
    warm = await call_tool_modern(http, url, "echo", {"text": "warm"}, id_=6)
    assert text_of(warm.result) == "echo: warm"
    baseline = descriptors(gw)
    started = time.monotonic()
    reply = await call_tool_modern(http, url, tool, {}, id_=7, within=PROMPT)
    took = time.monotonic() - started
    assert_timed_out(reply, 7)
    assert took >= TIMEOUT * 0.9, took
    if path == "/slow":  # a handshake-era server is told: notifications/cancelled
        await hostile.wait_for(lambda: hostile.cancelled, PROMPT)
        assert hostile.cancelled[0].get("reason") == "timed out", hostile.cancelled
    # Either way its stream is closed (a stateless server's only word to stop).
    await hostile.wait_for(lambda: hostile.open_streams == 0, PROMPT)
    # The route goes on serving, and what the call held is let go.
    fine = await call_tool_modern(http, url, "echo", {"text": "fine"}, id_=8)
    assert text_of(fine.result) == "echo: fine"
    await back_to(gw, baseline)


async def test_a_session_clients_call_kept_alive_ends_at_the_route_timeout(
    http: aiohttp.ClientSession, gw: RunningGateway, hostile: Hostile
) -> None:
    url = gw.url("/slow")
    session_id = await open_session(http, url)
    reply = await call_tool_legacy(http, url, session_id, "trickle", {}, id_=3, within=PROMPT)
    assert_timed_out(reply, 3)
    await hostile.wait_for(lambda: hostile.open_streams == 0, PROMPT)
    fine = await call_tool_legacy(http, url, session_id, "echo", {"text": "again"}, id_=4)
    assert text_of(fine.result) == "echo: again"


async def test_time_the_client_takes_to_answer_is_not_counted(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A person answering slowly is no upstream's fault: the route's timeout is far
    shorter than the client's pause, and the call still completes."""
    fake = FakeUpstream("ask")
    await fake.start()
    try:
        async with running_gateway(f"/ask={fake.url},timeout={TIMEOUT}", tmp_path=tmp_path) as gw:
            client = Client(http, gw.url("/ask"), "patient")
            requests, state = input_required(await client.call("ask_name"))
            # Deliberately slower than the route's timeout: a person thinking.
            await asyncio.sleep(TIMEOUT * 1.5)
            done = await client.call("ask_name", responses={only_key(requests): ADA}, state=state)
            assert done.result.get("resultType") == "complete", done.result
            assert text_of(done.result) == "hello Ada"
    finally:
        await fake.stop()


# --------------------------------------------------------------------------- redirects


@pytest.mark.parametrize("path", ["/away", "/away-still", "/away-m"])
async def test_a_redirect_to_another_origin_is_refused(
    http: aiohttp.ClientSession, gw: RunningGateway, elsewhere: Elsewhere, path: str
) -> None:
    url = gw.url(path)
    modern = await call_tool_modern(http, url, "echo", {"text": "secret argument"}, id_=1)
    assert "result" not in modern.message, modern.message
    text = str(modern.error.get("message", ""))
    assert f"route {path}" in text and "307" in text, text
    session = await http.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        headers={"Accept": "application/json, text/event-stream"},
    )
    async with session:
        body = await session.json()
    assert "result" not in body, body
    assert elsewhere.hits == [], elsewhere.hits


@pytest.mark.parametrize("path", ["/local", "/local-m"], ids=["handshake-era", "stateless"])
async def test_a_redirect_is_an_error_naming_the_route_and_the_option(
    http: aiohttp.ClientSession, gw: RunningGateway, path: str
) -> None:
    reply = await call_tool_modern(http, gw.url(path), "echo", {"text": "x"}, id_=2)
    text = str(reply.error.get("message", ""))
    assert f"route {path}" in text and "redirects=same-origin" in text, text


@pytest.mark.parametrize("path", ["/local-ok", "/local-m-ok"], ids=["handshake-era", "stateless"])
async def test_a_same_origin_redirect_is_followed_when_the_route_allows_it(
    http: aiohttp.ClientSession, gw: RunningGateway, elsewhere: Elsewhere, path: str
) -> None:
    url = gw.url(path)
    modern = await call_tool_modern(http, url, "echo", {"text": "here"}, id_=1)
    assert text_of(modern.result) == "echo: here"
    session_id = await open_session(http, url)
    legacy = await call_tool_legacy(http, url, session_id, "echo", {"text": "there"}, id_=2)
    assert text_of(legacy.result) == "echo: there"
    assert elsewhere.hits == []


# --------------------------------------------------------------------------- fan-out


async def test_a_flood_of_questions_is_cut_to_the_routes_bounds(
    http: aiohttp.ClientSession, gw: RunningGateway, hostile: Hostile
) -> None:
    """30 questions at once: the client is put AT_ONCE of them in one round; the rest
    are refused to the upstream with a JSON-RPC error, without a connection each."""
    client = Client(http, gw.url("/flood"), "flooded")
    warm = await call_tool_modern(http, gw.url("/flood"), "echo", {"text": "warm"}, id_=5)
    assert text_of(warm.result) == "echo: warm"
    baseline = descriptors(gw)
    connected = len(hostile.connections)  # (every route's probes and summaries so far)
    requests, _ = input_required(await client.call("flood", {"n": 30}))
    assert len(requests) == AT_ONCE, len(requests)
    refused = 30 - AT_ONCE
    await hostile.wait_for(lambda: len(hostile.answers) >= refused, PROMPT)
    assert len(hostile.answers) == refused
    assert all(a["error"]["code"] == -32603 for a in hostile.answers), hostile.answers[:2]
    assert "at most 8 open requests at once" in hostile.answers[0]["error"]["message"]
    # The call and its refusals: a few keep-alive connections, not one a refusal (22
    # refusals here).
    assert len(hostile.connections) - connected <= 5, (len(hostile.connections), connected)
    log = gw.log()
    assert "refused an upstream request past the call's bound" in log
    assert '"route": "/flood"' in log
    # An innocent caller is served meanwhile, and the flood held no descriptors of its own.
    fine = await call_tool_modern(http, gw.url("/flood"), "echo", {"text": "me"}, id_=9)
    assert text_of(fine.result) == "echo: me"
    await back_to(gw, baseline, slack=6)


async def test_questions_past_the_per_call_bound_are_refused(
    http: aiohttp.ClientSession, gw: RunningGateway, hostile: Hostile
) -> None:
    """A call may send FEW questions in all (fewer than it may have open at once):
    the round holds FEW, everything past them is refused."""
    client = Client(http, gw.url("/flood-few"), "counted")
    requests, _ = input_required(await client.call("flood", {"n": 30}))
    assert len(requests) == FEW, len(requests)
    await hostile.wait_for(lambda: len(hostile.answers) >= 30 - FEW, PROMPT)
    assert len(hostile.answers) == 30 - FEW
    assert "and 5 in all from one call" in hostile.answers[0]["error"]["message"]
