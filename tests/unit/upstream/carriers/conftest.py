"""The HTTP carriers' fixtures: a client session, and real aiohttp servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from tests.unit.upstream.carriers.http_peers import HANDLER_RELEASE, Serve


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    runners: list[tuple[web.AppRunner, asyncio.Event]] = []

    async def start(app: web.Application) -> URL:
        release = asyncio.Event()
        app[HANDLER_RELEASE] = release
        # handler_cancellation: a handler learns of a client that went away,
        # which the cancellation test observes.
        runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append((runner, release))
        host, port = runner.addresses[0][:2]
        return URL.build(scheme="http", host=host, port=port)

    yield start
    for runner, release in runners:
        release.set()  # let parked handlers finish
        await runner.cleanup()
