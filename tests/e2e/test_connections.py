"""Upstream keep-alive: the gateway reuses its pooled connections to an upstream.

A real `gateway serve` in front of a fake upstream that counts the TCP
connections its requests arrive on.  1,000 sequential calls must travel on a
handful of connections, and 16 concurrent callers on about 16, whether the
upstream answers with JSON or with an SSE stream (whose end comes in a write
of its own, after the answer: the gateway must not drop the connection for it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import (
    assert_clean_log,
    call_tool_legacy,
    call_tool_modern,
    open_session,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import RunningGateway, gateway

SEQUENTIAL = 1000
CALLERS = 16
CALLS_EACH = 25
# The probe and the handshake open their own few; a call may race an idle close.
HANDFUL = 4


@contextlib.asynccontextmanager
async def gateway_before(fake: FakeUpstream, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """`gateway serve` (off the event loop, so the in-process fake keeps serving)."""
    manager = gateway(f"/mcp={fake.url}", tmp_path=tmp_path)
    running = await asyncio.to_thread(manager.__enter__)
    try:
        yield running
        assert_clean_log(running.log())
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


async def _echo(http: aiohttp.ClientSession, url: str, session: str | None, n: int) -> None:
    arguments = {"text": f"hi {n}"}
    if session is None:
        reply = await call_tool_modern(http, url, "echo", arguments, id_=n)
    else:
        reply = await call_tool_legacy(http, url, session, "echo", arguments, id_=n)
    assert reply.status == 200, reply.text
    assert text_of(reply.result) == f"echo: hi {n}"


@pytest.mark.parametrize(
    ("client", "behaviour"), [("modern", "ok_sse"), ("session", "ok_sse"), ("modern", "ok")]
)
async def test_calls_reuse_upstream_connections(
    behaviour: str, client: str, tmp_path: Path
) -> None:
    async with FakeUpstream(behaviour) as fake, gateway_before(fake, tmp_path) as gw:
        url = gw.url()
        # One connection per concurrent caller on the client side too, and no more.
        connector = aiohttp.TCPConnector(limit=CALLERS)
        async with aiohttp.ClientSession(connector=connector) as http:
            session = await open_session(http, url) if client == "session" else None
            await _echo(http, url, session, 0)  # the probe and handshake are behind us
            before = len(fake.connections)
            for n in range(1, SEQUENTIAL + 1):
                await _echo(http, url, session, n)
            sequential = len(fake.connections) - before
            assert sequential <= HANDFUL, f"{sequential} connections for {SEQUENTIAL} calls"

            before = len(fake.connections)

            async def caller(first: int) -> None:
                for n in range(first, first + CALLS_EACH):
                    await _echo(http, url, session, n)

            await asyncio.gather(*(caller(10_000 + i * CALLS_EACH) for i in range(CALLERS)))
            concurrent = len(fake.connections) - before
            assert concurrent <= CALLERS + HANDFUL, (
                f"{concurrent} new connections for {CALLERS} concurrent callers"
            )
