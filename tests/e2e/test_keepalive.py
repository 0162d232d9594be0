"""Streams that survive idle proxies (issue 40, item 5): nginx in front of the gateway
with a short ``proxy_read_timeout`` cuts a response that is quiet for that long, as
nginx's default 60 s and cloud load balancers' idle timeouts do.  The gateway's
``keepalive`` comments keep an open, quiet SSE answer alive: a 2025-11-25 client's
standalone GET stream and a 2026-07-28 ``subscriptions/listen`` stay open across three
of nginx's timeouts, and a notification sent near the end arrives.  With
``keepalive=0`` the same stream is cut by nginx at its first timeout.

Scaled down from the issue's figures (30 s timeout, 90 s open, notification at 80 s):
nginx's timeout 2 s, the keepalive 0.5 s, 6 s open, the notification at 5.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.cluster.conftest import NGINX_CONF, _process, program, wait_port
from tests.e2e.fake_client import NEWEST_HANDSHAKE, SseReader, open_session
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import HeldPort, RunningGateway, free_port, gateway
from tests.e2e.test_subscriptions import ACK, TOOLS_CHANGED, get_stream, listen

PROXY_TIMEOUT = 2  # seconds (nginx takes whole ones)
OPEN_FOR = 6.0  # three of nginx's timeouts
NOTIFY_AT = 5.5


@pytest.fixture
def notify_port() -> Iterator[int]:
    with HeldPort() as held:
        yield held.port


@pytest.fixture
def gw(notify_port: int, tmp_path: Path) -> Iterator[RunningGateway]:
    upstream = f"http://127.0.0.1:{notify_port}/mcp"
    routes = (f"/mcp={upstream},keepalive=0.5", f"/off={upstream},keepalive=0")
    with gateway(*routes, tmp_path=tmp_path) as running:
        yield running


@pytest.fixture
def proxy(gw: RunningGateway, tmp_path: Path) -> Iterator[str]:
    """nginx in front of the gateway, cutting responses quiet for PROXY_TIMEOUT."""
    port = free_port()
    conf = tmp_path / "nginx.conf"
    gateway_port = int(gw.base.rsplit(":", 1)[1])
    servers = f"        server 127.0.0.1:{gateway_port};"
    conf.write_text(
        NGINX_CONF.format(tmp=tmp_path, servers=servers, port=port, read_timeout=PROXY_TIMEOUT)
    )
    argv = [program("nginx"), "-c", str(conf), "-p", str(tmp_path), "-e", str(tmp_path / "e.log")]
    with _process(argv, tmp_path / "nginx.log") as nginx:
        wait_port(port, 10.0, nginx)
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
async def fake(notify_port: int, gw: RunningGateway) -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream("notify")
    await upstream.start(notify_port)
    try:
        yield upstream
    finally:
        await upstream.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@contextlib.asynccontextmanager
async def standalone(http: aiohttp.ClientSession, url: str) -> AsyncIterator[SseReader]:
    session = await open_session(http, url)
    async with get_stream(http, url, session, NEWEST_HANDSHAKE) as reader:
        yield reader


async def hold_then_notify(fake: FakeUpstream, streams: int) -> None:
    """Keep the streams open and quiet (time passing is what is tested), then notify."""
    await fake.wait_streams(streams, 10.0)
    await asyncio.sleep(NOTIFY_AT)
    fake.notify(TOOLS_CHANGED)


async def test_quiet_streams_outlive_a_proxys_idle_timeout(
    http: aiohttp.ClientSession, proxy: str, fake: FakeUpstream
) -> None:
    async with (
        standalone(http, f"{proxy}/mcp") as get,
        listen(http, f"{proxy}/mcp", 1, {"toolsListChanged": True}) as listening,
    ):
        assert (await listening.next_message())["method"] == ACK
        notifying = asyncio.create_task(hold_then_notify(fake, 2))
        got = await get.next_message(within=OPEN_FOR + 4)
        heard = await listening.next_message(within=OPEN_FOR + 4)
        await notifying
    assert got["method"] == TOOLS_CHANGED and heard["method"] == TOOLS_CHANGED


async def test_without_keepalive_the_proxy_cuts_a_quiet_stream(
    http: aiohttp.ClientSession, proxy: str, fake: FakeUpstream
) -> None:
    async with standalone(http, f"{proxy}/off") as get:
        await fake.wait_streams(1, 10.0)
        with pytest.raises((EOFError, aiohttp.ClientPayloadError)):
            await get.next_message(within=OPEN_FOR)
