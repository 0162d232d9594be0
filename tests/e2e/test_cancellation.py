"""Cancellation crosses the gateway: a client's notifications/cancelled (or its
going away) stops the upstream call, and the upstream hears about it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import (
    Reply,
    call_tool_legacy,
    notification,
    open_session,
    post,
    session_headers,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import gateway

VERSION = "2025-06-18"
CANCELLED = "the request was cancelled by the client"


@contextlib.asynccontextmanager
async def hanging_call(
    tmp_path: Path, request_id: int
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, str, FakeUpstream, asyncio.Future[Reply]]]:
    """A legacy session's tools/call in flight on an upstream that never answers."""
    upstream = FakeUpstream("hang")
    url = await upstream.start()
    try:
        drain = ("--drain-timeout", "2")
        with gateway(f"/mcp={url},timeout=30", extra=drain, tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                session_id = await open_session(http, gw.url("/mcp"), VERSION)
                call = asyncio.ensure_future(
                    call_tool_legacy(
                        http,
                        gw.url("/mcp"),
                        session_id,
                        "echo",
                        {"text": "x"},
                        id_=request_id,
                        version=VERSION,
                        within=10,
                    )
                )
                await asyncio.wait_for(upstream.call_started.wait(), 10)
                yield http, gw.url("/mcp"), session_id, upstream, call
                # Stopped before the gateway: its shutdown DELETE must not wait on a
                # server that lives in this (then blocked) event loop.
                await upstream.stop()
    finally:
        await upstream.stop()


async def test_a_legacy_clients_cancel_reaches_the_upstream(tmp_path: Path) -> None:
    async with hanging_call(tmp_path, 41) as (http, url, session_id, upstream, call):
        cancel = notification("notifications/cancelled", {"requestId": 41})
        sent = await post(http, url, cancel, session_headers(session_id, VERSION))
        assert sent.status == 202, sent.text
        # The upstream hears the cancellation of its own id for that very call ...
        cancelled = await upstream.wait_cancelled(1, within=10)
        assert cancelled == upstream.call_ids == [upstream.call_ids[0]], (
            cancelled,
            upstream.call_ids,
        )
        # ... and the client's request ends promptly with an error answer to its id.
        reply = await asyncio.wait_for(call, 10)
        assert reply.message["id"] == 41, reply.text
        assert reply.error["message"] == CANCELLED, reply.text


async def test_a_client_that_goes_away_cancels_the_upstream_call(tmp_path: Path) -> None:
    async with hanging_call(tmp_path, 7) as (_, _, _, upstream, call):
        call.cancel()  # drops the connection mid-call
        cancelled = await upstream.wait_cancelled(1, within=10)
        assert cancelled == upstream.call_ids and len(cancelled) == 1, (
            cancelled,
            upstream.call_ids,
        )
