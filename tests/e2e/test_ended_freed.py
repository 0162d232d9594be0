"""What ends is freed at once, by reference counting: an ended session, its stream,
a listen, a parked call must not wait for a full garbage collection, which an idle
gateway does not run (it freezes its start-up objects and collects rarely), so
cyclic garbage would keep their memory until traffic comes back.

The gateway runs in this process (started as `gateway serve` starts it, in front
of a real upstream process) so that its objects can be watched: with the
collector off, a ``weakref.finalize`` on the object sets an event when reference
counting frees it; the test waits for that event (bounded), never collects.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.config.settings import RouteSpec
from gateway.process.app import Gateway
from gateway.transport.sessions import Session
from tests.e2e.fake_client import (
    ACCEPT_BOTH,
    CAPS,
    EVENT_STREAM,
    JSON,
    SseReader,
    initialize,
    modern_headers,
    modern_request,
    notification,
    open_session,
    post,
    session_headers,
)
from tests.security.harness import demo_upstream, modern_upstream

FREED_WITHIN = 5.0


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """The demo server (2025-11-25, handshake era: upstream sessions; asks mid-call)."""
    with demo_upstream(tmp_path) as url:
        yield url


@pytest.fixture
def modern() -> Iterator[str]:
    """bench.upstreams' 2026-07-28 echo server: the gateway keeps no upstream session."""
    with modern_upstream() as url:
        yield url


@contextlib.asynccontextmanager
async def serving(upstream: str) -> AsyncIterator[tuple[Gateway, str]]:
    gateway = Gateway([RouteSpec(path="/mcp", upstream=upstream)], port=0)
    port = await gateway.start()
    try:
        yield gateway, f"http://127.0.0.1:{port}/mcp"
    finally:
        await gateway.stop()


@pytest.fixture
def no_collection() -> Iterator[None]:
    """The collector off: only reference counting frees anything."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Watch:
    """Events set when the watched objects are freed."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def add(self, what: str, thing: Any) -> None:
        freed = self.events[what] = asyncio.Event()
        weakref.finalize(thing, freed.set)

    async def freed(self) -> None:
        """Every watched object freed (bounded): else which are still alive."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FREED_WITHIN):
                for event in self.events.values():
                    await event.wait()
        alive = [what for what, event in self.events.items() if not event.is_set()]
        assert not alive, f"still alive with the collector off: {alive}"


def the_session(gateway: Gateway, session_id: str) -> Session:
    return gateway.endpoints[0].route.sessions._sessions[session_id]


def watch_session(watch: Watch, session: Session) -> None:
    assert session.downstream is not None  # (its upstream side: the closures over it)
    watch.add("session", session)


async def delete(http: aiohttp.ClientSession, url: str, session_id: str) -> None:
    async with http.delete(url, headers=session_headers(session_id)) as response:
        assert response.status == 200, await response.text()


@pytest.mark.usefixtures("no_collection")
@pytest.mark.parametrize("upstream", ["demo", "modern"])
async def test_a_deleted_session_is_freed_at_once(
    upstream: str, request: pytest.FixtureRequest, http: aiohttp.ClientSession
) -> None:
    async with serving(request.getfixturevalue(upstream)) as (gateway, url):
        session_id = await open_session(http, url)
        watch = Watch()
        watch_session(watch, the_session(gateway, session_id))
        before = server_transports(gateway)
        async with one_connection() as own:  # a connection aiohttp serves (not the lane)
            await delete(own, url, session_id)
            watch_new_transport(watch, gateway, before)
        await watch.freed()


def server_transports(gateway: Gateway) -> set[Any]:
    """The gateway's client connections' transports: the lane's, and aiohttp's (those
    the lane handed over)."""
    assert gateway.lane is not None and gateway._runner is not None
    server = gateway._runner.server
    assert server is not None
    handlers = [handler.transport for handler in server.connections]
    return {c.transport for c in gateway.lane.connections} | set(handlers) - {None}


@contextlib.asynccontextmanager
async def one_connection() -> AsyncIterator[aiohttp.ClientSession]:
    """A client of its own: a stream's connection, closed on exit (kept alive until
    then, as clients do: the lane carries such a POST)."""
    async with aiohttp.ClientSession() as http:
        yield http


def watch_new_transport(watch: Watch, gateway: Gateway, before: set[Any]) -> None:
    (transport,) = server_transports(gateway) - before
    watch.add("its connection's transport", transport)


@pytest.mark.usefixtures("no_collection")
async def test_a_session_with_its_get_stream_is_freed_at_once(
    modern: str, http: aiohttp.ClientSession
) -> None:
    async with serving(modern) as (gateway, url):
        session_id = await open_session(http, url)
        watch = Watch()
        watch_session(watch, the_session(gateway, session_id))
        headers = {**session_headers(session_id), "Accept": EVENT_STREAM}
        before = server_transports(gateway)
        async with one_connection() as own, own.get(url, headers=headers) as stream:
            assert stream.status == 200
            async with asyncio.timeout(FREED_WITHIN):  # the stream is open: its priming event
                assert await stream.content.readline()
            watch_new_transport(watch, gateway, before)
        await delete(http, url, session_id)
        await watch.freed()


@pytest.mark.usefixtures("no_collection")
async def test_an_http_sse_client_is_freed_when_it_leaves(
    modern: str, http: aiohttp.ClientSession
) -> None:
    """A 2024-11-05 client on HTTP+SSE: its session is its stream's connection."""
    async with serving(modern) as (gateway, url):
        watch = Watch()
        before = server_transports(gateway)
        async with one_connection() as own, own.get(url, headers={"Accept": EVENT_STREAM}) as sse:
            assert sse.status == 200
            reader = SseReader(sse)
            endpoint = (await reader.next()).data
            watch_new_transport(watch, gateway, before)
            assert endpoint.startswith("/mcp?"), endpoint
            posted = f"{url.rsplit('/', 1)[0]}{endpoint}"
            headers = {"Content-Type": JSON, "Accept": ACCEPT_BOTH}
            answer = await post(http, posted, initialize(1, "2024-11-05"), headers)
            assert answer.status == 202, answer.text
            assert (await reader.response_to(1))["result"]["protocolVersion"] == "2024-11-05"
            done = await post(http, posted, notification("notifications/initialized"), headers)
            assert done.status == 202, done.text
            (session,) = gateway.endpoints[0].route.sessions._sessions.values()
            watch_session(watch, session)
            del session
        await watch.freed()


@pytest.mark.usefixtures("no_collection")
async def test_a_listen_is_freed_when_its_client_leaves(demo: str) -> None:
    """A 2026-07-28 `subscriptions/listen`: its stream's connection."""
    async with serving(demo) as (gateway, url):
        watch = Watch()
        params = {"notifications": {"toolsListChanged": True}}
        body = modern_request(1, "subscriptions/listen", params)
        headers = modern_headers("subscriptions/listen")
        assert gateway.lane is not None
        before = server_transports(gateway)
        async with one_connection() as own, own.post(url, json=body, headers=headers) as stream:
            assert stream.status == 200, await stream.text()
            acknowledged = await SseReader(stream).next_message()
            assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
            (transport,) = server_transports(gateway) - before
            watch.add("its connection's transport", transport)
            del transport
        await watch.freed()


@pytest.mark.usefixtures("no_collection")
async def test_a_parked_call_is_freed_once_it_is_answered(
    demo: str, http: aiohttp.ClientSession
) -> None:
    """A 2026-07-28 `greet_me` (the demo server asks for a name): parked until the
    client's retry with the answer, which ends it."""
    async with serving(demo) as (gateway, url):
        watch = Watch()
        body = modern_request(1, "tools/call", {"name": "greet_me", "arguments": {}})
        body["params"]["_meta"][CAPS] = {"elicitation": {}}
        headers = modern_headers("tools/call", "greet_me")
        asked = await post(http, url, body, headers)
        assert asked.result["resultType"] == "input_required", asked.text
        (parked,) = gateway.endpoints[0].route.backend.forwarder.parking._calls.values()
        watch.add("the parked call", parked)
        del parked
        answers = {
            key: {"action": "accept", "content": {"name": "Ada"}}
            for key in asked.result["inputRequests"]
        }
        retry = {"inputResponses": answers, "requestState": asked.result["requestState"]}
        body["params"] |= retry
        done = await post(http, url, body, headers)
        assert done.result["content"][0]["text"] == "Hello, Ada!", done.text
        await watch.freed()
