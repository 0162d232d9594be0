"""A client session that ends while one of its requests is still arriving: the
request is refused (the session is gone) and nothing is opened or kept for it,
on either side of the gateway."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import (
    WAIT,
    call_tool_legacy,
    open_session,
    post,
    read_reply,
    request,
    session_headers,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.test_ops import get, running, sample


async def _until(check: object, what: str) -> None:
    """Poll ``check()`` (a state in another process: nothing to await) until true."""
    deadline = time.monotonic() + WAIT
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.02)


async def _in_flight(http: aiohttp.ClientSession, url: str) -> float:
    _, text = await get(http, url)
    return sample(text, "gateway_in_flight_requests") or 0.0


async def test_a_session_deleted_while_a_post_body_arrives_opens_nothing_upstream(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with FakeUpstream("ok") as fake, running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
        session = await open_session(http, gw.url())
        reply = await call_tool_legacy(http, gw.url(), session, "echo", {"text": "a"})
        assert text_of(reply.result) == "echo: a"
        assert len(fake.sessions) == 1
        opened = fake.initializes
        rest = asyncio.Event()
        body = json.dumps(request(7, "tools/call", {"name": "echo", "arguments": {"text": "b"}}))

        async def chunks() -> AsyncIterator[bytes]:
            yield body[:10].encode()
            await rest.wait()
            yield body[10:].encode()

        headers = session_headers(session)
        late = asyncio.create_task(
            http.post(gw.url(), data=chunks(), headers=headers, timeout=aiohttp.ClientTimeout(WAIT))
        )
        metrics = gw.url("/metrics")
        deadline = time.monotonic() + WAIT
        while await _in_flight(http, metrics) < 1:  # the POST's handler has started
            assert time.monotonic() < deadline, "the chunked POST never reached the gateway"
            await asyncio.sleep(0.02)
        async with http.delete(gw.url(), headers=headers) as deleted:
            assert deleted.status in (200, 204)
        await _until(lambda: not fake.sessions, "the upstream session was not ended")
        rest.set()
        async with await late as response:
            answered = await read_reply(response)
        assert answered.status == 404, answered.text
        assert "error" in answered.message, answered.text
        # Nothing was opened upstream for the ended session, and nothing is kept.
        assert not fake.sessions, "an upstream session was opened for an ended client session"
        assert fake.initializes == opened
        _, text = await get(http, metrics)
        assert sample(text, "gateway_sessions", route="/mcp") == 0
        assert sample(text, "gateway_upstream_sessions", route="/mcp") == 0, text


async def test_a_notification_the_gateway_does_not_know_reaches_the_upstream_as_one(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A vendor notification is passed on to the client's own upstream session as a
    notification: never sent as a request the gateway then waits on."""
    async with FakeUpstream("ok") as fake, running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
        session = await open_session(http, gw.url())
        poke = {"jsonrpc": "2.0", "method": "notifications/vendor/poke", "params": {"n": 1}}
        accepted = await post(http, gw.url(), poke, session_headers(session))
        assert accepted.status == 202, accepted.text
        await _until(
            lambda: "notifications/vendor/poke" in fake.notified + fake.unknown,
            "the vendor notification never reached the upstream",
        )
        assert "notifications/vendor/poke" in fake.notified
        assert "notifications/vendor/poke" not in fake.unknown


async def test_a_flood_of_notifications_is_bounded_per_caller(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Notifications the upstream is slow to take are held up to a per-caller bound
    (64); the rest of a flood is dropped, and another caller's still go through."""
    method = "notifications/vendor/poke"
    poke = {"jsonrpc": "2.0", "method": method}

    def pokes() -> int:
        return fake.notified.count(method)

    async with FakeUpstream("ok") as fake, running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
        fake.hold_notices = asyncio.Event()
        batches = "2025-03-26"  # the last revision with JSON-RPC batches
        flooder = await open_session(http, gw.url(), batches)
        for _ in range(3):
            batch = [poke] * 40
            accepted = await post(http, gw.url(), batch, session_headers(flooder, batches))
            assert accepted.status == 202, accepted.text
        await _until(lambda: pokes() >= 64, "the held notifications never arrived")
        auth = {"Authorization": "Bearer another-caller"}
        other = await open_session(http, gw.url(), headers=auth)
        accepted = await post(http, gw.url(), poke, {**auth, **session_headers(other)})
        assert accepted.status == 202, accepted.text
        await _until(lambda: pokes() == 65, "another caller's notification was held")
        fake.hold_notices.set()
        text = {"text": "still here"}
        reply = await call_tool_legacy(http, gw.url(), flooder, "echo", text, version=batches)
        assert text_of(reply.result) == "echo: still here"
        assert pokes() == 65  # the flood's other 56 were dropped, not queued


async def test_a_drain_does_not_wait_for_notifications_the_upstream_holds(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A notification owes nobody an answer: an upstream that holds them does not
    hold the gateway's shutdown for its whole drain timeout (30 s here)."""
    method = "notifications/vendor/poke"
    async with FakeUpstream("ok") as fake:
        fake.hold_notices = asyncio.Event()
        manager = running(f"/mcp={fake.url}", tmp_path=tmp_path, extra=("--drain-timeout", "30"))
        async with manager as gw:
            client = await open_session(http, gw.url())
            poke = {"jsonrpc": "2.0", "method": method}
            accepted = await post(http, gw.url(), poke, session_headers(client))
            assert accepted.status == 202, accepted.text
            await _until(lambda: fake.notified.count(method) == 1, "the notification never arrived")
            started = time.monotonic()
        # The manager's exit stopped the gateway (SIGTERM) and checked its clean exit.
        assert time.monotonic() - started < 10, "the drain waited for a held notification"
        fake.hold_notices.set()
