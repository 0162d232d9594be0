"""Change notifications across eras, end to end over loopback HTTP.

The gateway runs as a subprocess; upstreams are the `notify` fake (a 2025-06-18
server with a GET stream the test can push notifications on) or, for the
stateless era, a small modern fake defined here whose `subscriptions/listen`
streams stay open.  Every wait is bounded; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.e2e.fake_client import (
    EVENT_STREAM,
    WAIT,
    SseReader,
    assert_clean_log,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import HeldPort, RunningGateway, gateway

SUB_ID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
UPDATED = "notifications/resources/updated"
ACK = "notifications/subscriptions/acknowledged"
WATCHED = "file:///watched.txt"
OTHER = "file:///other.txt"


# --------------------------------------------------------------------------- helpers


@contextlib.asynccontextmanager
async def listen(
    http: aiohttp.ClientSession, url: str, id_: Any, notifications: dict[str, Any]
) -> AsyncIterator[SseReader]:
    """A modern client's `subscriptions/listen`: the open stream, closed on exit."""
    body = modern_request(id_, "subscriptions/listen", {"notifications": notifications})
    headers = modern_headers("subscriptions/listen")
    response = await asyncio.wait_for(http.post(url, json=body, headers=headers), WAIT)
    try:
        assert response.status == 200, await response.text()
        assert response.content_type == EVENT_STREAM
        yield SseReader(response)
    finally:
        response.close()


@contextlib.asynccontextmanager
async def get_stream(
    http: aiohttp.ClientSession, url: str, session_id: str, version: str
) -> AsyncIterator[SseReader]:
    """A legacy session's standalone GET stream."""
    headers = session_headers(session_id, version)
    headers["Accept"] = EVENT_STREAM
    response = await asyncio.wait_for(http.get(url, headers=headers), WAIT)
    try:
        assert response.status == 200, await response.text()
        yield SseReader(response)
    finally:
        response.close()


async def next_notification(reader: SseReader, method: str) -> dict[str, Any]:
    """The next message, which must be ``method``."""
    message = await reader.next_message()
    assert message.get("method") == method, message
    return message


# ------------------------------------------------------------- legacy upstream


@pytest.fixture
def notify_port() -> Iterator[int]:
    with HeldPort() as held:
        yield held.port


@pytest.fixture
def legacy_gw(notify_port: int, tmp_path: Any) -> Iterator[RunningGateway]:
    # Started before the fake and stopped after it: the gateway's shutdown must not
    # wait on a fake whose event loop is blocked in this (synchronous) teardown.
    upstream = f"http://127.0.0.1:{notify_port}/mcp"
    with gateway(f"/mcp={upstream}", tmp_path=tmp_path) as running:
        yield running
        assert_clean_log(running.log())


@pytest.fixture
async def fake(notify_port: int, legacy_gw: RunningGateway) -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream("notify")
    await upstream.start(notify_port)
    try:
        yield upstream
    finally:
        await upstream.stop()


async def test_modern_listen_on_legacy_upstream_gets_ack_and_tagged_notifications(
    http: aiohttp.ClientSession, legacy_gw: RunningGateway, fake: FakeUpstream
) -> None:
    url = legacy_gw.url("/mcp")
    wanted = {
        "toolsListChanged": True,
        "resourceSubscriptions": [WATCHED],
        "taskIds": ["t-1"],  # not something a legacy upstream can honour
    }
    async with listen(http, url, "L-1", wanted) as reader:
        ack = await next_notification(reader, ACK)
        assert ack["params"]["_meta"][SUB_ID] == "L-1"
        assert ack["params"]["notifications"] == {
            "toolsListChanged": True,
            "resourceSubscriptions": [WATCHED],
        }
        assert ("resources/subscribe", WATCHED) in fake.subscriptions
        await fake.wait_streams(1, WAIT)

        fake.notify(UPDATED, {"uri": OTHER})  # nobody asked for this one
        fake.notify("notifications/prompts/list_changed")  # nor for this
        fake.notify(TOOLS_CHANGED)
        fake.notify(UPDATED, {"uri": WATCHED})
        changed = await next_notification(reader, TOOLS_CHANGED)
        assert changed["params"]["_meta"][SUB_ID] == "L-1"
        updated = await next_notification(reader, UPDATED)
        assert updated["params"]["uri"] == WATCHED
        assert updated["params"]["_meta"][SUB_ID] == "L-1"
    # Closing the stream releases the upstream subscription.
    subs = await fake.wait_subscriptions(2, WAIT)
    assert subs == [("resources/subscribe", WATCHED), ("resources/unsubscribe", WATCHED)]


async def test_two_listeners_share_one_upstream_subscription(
    http: aiohttp.ClientSession, legacy_gw: RunningGateway, fake: FakeUpstream
) -> None:
    url = legacy_gw.url("/mcp")
    wanted = {"resourceSubscriptions": [WATCHED]}
    async with listen(http, url, 1, wanted) as first:
        await next_notification(first, ACK)
        async with listen(http, url, 2, wanted) as second:
            ack = await next_notification(second, ACK)
            assert ack["params"]["notifications"] == {"resourceSubscriptions": [WATCHED]}
            await fake.wait_streams(1, WAIT)
            fake.notify(UPDATED, {"uri": WATCHED})
            one = await next_notification(first, UPDATED)
            two = await next_notification(second, UPDATED)
            assert one["params"]["_meta"][SUB_ID] == 1
            assert two["params"]["_meta"][SUB_ID] == 2
        # The second left; the first still watches: no unsubscribe yet, and it still hears.
        fake.notify(UPDATED, {"uri": WATCHED})
        again = await next_notification(first, UPDATED)
        assert again["params"]["uri"] == WATCHED
        assert fake.subscriptions == [("resources/subscribe", WATCHED)]
    subs = await fake.wait_subscriptions(2, WAIT)
    assert subs == [("resources/subscribe", WATCHED), ("resources/unsubscribe", WATCHED)]


async def test_legacy_sessions_get_list_changed_and_their_updates(
    http: aiohttp.ClientSession, legacy_gw: RunningGateway, fake: FakeUpstream
) -> None:
    url = legacy_gw.url("/mcp")
    version = "2025-06-18"
    watcher = await open_session(http, url, version)
    bystander = await open_session(http, url, "2025-03-26")
    reply = await post(
        http,
        url,
        request(5, "resources/subscribe", {"uri": WATCHED}),
        session_headers(watcher, version),
    )
    assert reply.result == {}, reply.message
    async with (
        get_stream(http, url, watcher, version) as watching,
        get_stream(http, url, bystander, "2025-03-26") as other,
    ):
        await fake.wait_streams(1, WAIT)
        fake.notify(UPDATED, {"uri": OTHER})
        fake.notify(UPDATED, {"uri": WATCHED})
        fake.notify(TOOLS_CHANGED)
        updated = await next_notification(watching, UPDATED)
        assert updated["params"] == {"uri": WATCHED}  # no subscriptionId for a legacy client
        await next_notification(watching, TOOLS_CHANGED)
        changed = await next_notification(other, TOOLS_CHANGED)  # the bystander: lists only
        assert "params" not in changed or SUB_ID not in (changed["params"].get("_meta") or {})
    reply = await post(
        http,
        url,
        request(6, "resources/unsubscribe", {"uri": WATCHED}),
        session_headers(watcher, version),
    )
    assert reply.result == {}, reply.message
    subs = await fake.wait_subscriptions(2, WAIT)
    assert subs == [("resources/subscribe", WATCHED), ("resources/unsubscribe", WATCHED)]


# ------------------------------------------------------------- stateless upstream


class ModernFake:
    """A 2026-07-28 server: discovery, and `subscriptions/listen` streams kept open."""

    def __init__(self) -> None:
        self.url = ""
        self.listens: list[dict[str, Any]] = []  # every filter asked for, in order
        self.open: dict[Any, asyncio.Queue[dict[str, Any] | None]] = {}
        self._seen = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}/mcp"

    async def stop(self) -> None:
        for queue in self.open.values():
            queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for(self, predicate: Any, within: float = WAIT) -> None:
        async with asyncio.timeout(within), self._seen:
            await self._seen.wait_for(predicate)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send on every open listen whose filter asked for it."""
        for listen_id, queue in self.open.items():
            wanted = next(f for i, f in self.listens_by_id if i == listen_id)
            if method == "notifications/resources/updated":
                if params.get("uri") not in (wanted.get("resourceSubscriptions") or []):
                    continue
            elif not wanted.get("toolsListChanged"):
                continue
            meta = {SUB_ID: listen_id}
            queue.put_nowait(
                {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": meta}}
            )

    @property
    def listens_by_id(self) -> list[tuple[Any, dict[str, Any]]]:
        return [(entry["id"], entry["filter"]) for entry in self.listens]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST"})
        message = json.loads(await request.read())
        method, id_ = message.get("method"), message.get("id")
        if id_ is None:
            return web.Response(status=202)
        if method == "server/discover":
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": id_,
                    "result": {
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {
                            "tools": {"listChanged": True},
                            "resources": {"subscribe": True},
                        },
                        "_meta": {
                            "io.modelcontextprotocol/serverInfo": {
                                "name": "modern-fake",
                                "version": "0",
                            }
                        },
                    },
                }
            )
        if method == "subscriptions/listen":
            return await self._listen(request, id_, message.get("params") or {})
        return web.json_response(
            {"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no"}}
        )

    async def _listen(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        wanted = params.get("notifications") or {}
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        ack = {
            "jsonrpc": "2.0",
            "method": ACK,
            "params": {"notifications": wanted, "_meta": {SUB_ID: id_}},
        }
        await stream.write(f"event: message\ndata: {json.dumps(ack)}\n\n".encode())
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        async with self._seen:
            self.listens.append({"id": id_, "filter": wanted})
            self.open[id_] = queue
            self._seen.notify_all()
        try:
            while True:
                message = await queue.get()
                if message is None:
                    break
                await stream.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
        except (ConnectionError, RuntimeError):
            pass
        finally:
            self.open.pop(id_, None)
            async with self._seen:
                self._seen.notify_all()
        return stream


@pytest.fixture
async def modern() -> AsyncIterator[ModernFake]:
    upstream = ModernFake()
    await upstream.start()
    try:
        yield upstream
    finally:
        await upstream.stop()


async def test_legacy_subscribe_on_stateless_upstream_opens_an_upstream_listen(
    http: aiohttp.ClientSession, modern: ModernFake, tmp_path: Any
) -> None:
    version = "2025-11-25"
    with gateway(f"/mcp={modern.url}", tmp_path=tmp_path) as running:
        url = running.url("/mcp")
        session_id = await open_session(http, url, version)
        async with get_stream(http, url, session_id, version) as stream:
            # The open stream wants list changes: an upstream listen for them.
            await modern.wait_for(lambda: len(modern.open) == 1)
            assert modern.listens[-1]["filter"] == {"toolsListChanged": True}
            reply = await post(
                http,
                url,
                request(3, "resources/subscribe", {"uri": WATCHED}),
                session_headers(session_id, version),
            )
            assert reply.result == {}, reply.message
            # Re-opened with the URI (the old one closed).
            assert modern.listens[-1]["filter"] == {
                "toolsListChanged": True,
                "resourceSubscriptions": [WATCHED],
            }
            await modern.wait_for(lambda: list(modern.open) == [modern.listens[-1]["id"]])
            modern.notify(UPDATED, {"uri": WATCHED})
            updated = await next_notification(stream, UPDATED)
            assert updated["params"] == {"uri": WATCHED}  # the subscriptionId is stripped
            modern.notify(TOOLS_CHANGED, {})
            changed = await next_notification(stream, TOOLS_CHANGED)
            assert SUB_ID not in (changed.get("params") or {}).get("_meta", {})
        # The stream closed and nothing is subscribed... but the URI still is: unsubscribe.
        reply = await post(
            http,
            url,
            request(4, "resources/unsubscribe", {"uri": WATCHED}),
            session_headers(session_id, version),
        )
        assert reply.result == {}, reply.message
        # Nobody wants anything any more: the upstream listen is closed.
        await modern.wait_for(lambda: not modern.open)
        assert_clean_log(running.log())


async def test_a_new_upstream_session_is_subscribed_again(
    http: aiohttp.ClientSession, legacy_gw: RunningGateway, fake: FakeUpstream
) -> None:
    url = legacy_gw.url("/mcp")
    async with listen(http, url, "L-9", {"resourceSubscriptions": [WATCHED]}) as reader:
        await next_notification(reader, ACK)
        assert fake.subscriptions == [("resources/subscribe", WATCHED)]
        # The session's GET stream opens in the background: once it is open ...
        await fake.wait_streams(1, WAIT)
        fake.sessions.clear()  # ... the upstream restarts: it knows no session any more
        # The next call meets a 404, opens a new upstream session and retries ...
        listed = await post(
            http, url, modern_request(5, "tools/list", {}), modern_headers("tools/list")
        )
        assert listed.status == 200 and "tools" in listed.result, listed.text
        # ... and the new session is subscribed to what is still watched.
        subs = await fake.wait_subscriptions(2, WAIT)
        assert subs == [("resources/subscribe", WATCHED)] * 2
        await fake.wait_streams(2, WAIT)
        fake.notify(UPDATED, {"uri": WATCHED})
        updated = await next_notification(reader, UPDATED)
        assert updated["params"]["_meta"][SUB_ID] == "L-9"


# ------------------------------------------------------------------- shutdown

DRAIN_TIMEOUT = 120.0  # what the gateway would wait for calls in flight
ENDS_WITHIN = 20.0  # an open listen must not hold the shutdown anywhere near that


@pytest.mark.parametrize("era", ["legacy", "stateless"])
async def test_an_open_listen_ends_promptly_on_sigterm(
    http: aiohttp.ClientSession, modern: ModernFake, tmp_path: Any, era: str
) -> None:
    """A listen lasts as long as its client: SIGTERM ends it with its final answer
    (a graceful end) instead of counting it as a call to wait the drain out for."""
    legacy = FakeUpstream("notify")
    await legacy.start()
    upstream = legacy.url if era == "legacy" else modern.url
    try:
        with gateway(
            f"/mcp={upstream}", extra=("--drain-timeout", str(DRAIN_TIMEOUT)), tmp_path=tmp_path
        ) as gw:
            async with listen(http, gw.url("/mcp"), "L-D", {"toolsListChanged": True}) as reader:
                await next_notification(reader, ACK)
                gw.process.send_signal(signal.SIGTERM)
                final = await reader.next_message(ENDS_WITHIN)
                assert final.get("id") == "L-D" and "result" in final, final
                with pytest.raises(EOFError):
                    await reader.next(ENDS_WITHIN)
            # Waited for off the loop: the fakes must keep answering the shutdown.
            code = await asyncio.to_thread(gw.process.wait, ENDS_WITHIN)
            assert code == 0, gw.log()[-4000:]
            assert '"drained"' in gw.log() or "drained" in gw.log()
    finally:
        await legacy.stop()
