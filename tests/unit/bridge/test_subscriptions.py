"""The subscription hub, without sockets: a scripted upstream, sinks that record."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from gateway.bridge import subscriptions
from gateway.bridge.forwarder import Forwarder
from gateway.bridge.subscriptions import (
    NotificationSink,
    SubscriptionHub,
    SubscriptionUpstream,
)
from gateway.core import (
    Call,
    ClientContext,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet
from gateway.protocol.v2026_07_28 import ACKNOWLEDGED, SUBSCRIPTION_ID, Adapter2026_07_28
from gateway.upstream.link import UpstreamLink
from gateway.upstream.settings import UpstreamSettings

WITHIN = 5.0
# As the adapter that decodes a client's message stamps itself on the client.
CLIENT = ClientContext("2025-11-25", adapter=AdapterSet.default().by_version["2025-11-25"])
CAPS = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True},
}
PROFILE = ServerProfile(capabilities=CAPS)
TOOLS_CHANGED = Event("notifications/tools/list_changed", {})
PROMPTS_CHANGED = Event("notifications/prompts/list_changed", {})


def updated(uri: str) -> Event:
    return Event("notifications/resources/updated", {"uri": uri})


@dataclass
class _Verdict:
    adapter: Adapter


class ScriptedUpstream:
    """Records what the hub asks of it; its listens are queues the test feeds."""

    def __init__(self, stateless: bool = False) -> None:
        self._stateless = stateless
        revision = "2026-07-28" if stateless else "2025-11-25"
        self.verdict = _Verdict(AdapterSet.default().by_version[revision])
        self.requests: list[tuple[str, str]] = []
        self.attached: list[str] = []
        self.listens: list[dict[str, Any]] = []
        self.feeds: list[asyncio.Queue[Event | None]] = []
        self.changed = asyncio.Condition()
        self.sink: NotificationSink | None = None

    @property
    def stateless(self) -> bool:
        return self._stateless

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        self.requests.append((call.method, str(call.params.get("uri"))))
        return Value({})

    def scope(self, exchange: Exchange) -> str:
        return exchange.principal

    async def attach(self, exchange: Exchange) -> None:
        self.attached.append(exchange.principal)

    async def listen(self, call: Call, exchange: Exchange) -> AsyncIterator[Event]:
        wanted = call.params["notifications"]
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        async with self.changed:
            self.listens.append(wanted)
            self.feeds.append(queue)
            self.changed.notify_all()
        yield Event(ACKNOWLEDGED, {"notifications": wanted})
        while True:
            event = await queue.get()
            if event is None:
                raise ConnectionError("stream lost")
            yield event

    def on_notification(self, sink: NotificationSink | None) -> None:
        self.sink = sink

    async def wait_listens(self, count: int) -> None:
        async with asyncio.timeout(WITHIN), self.changed:
            await self.changed.wait_for(lambda: len(self.listens) >= count)


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.arrived = asyncio.Condition()

    async def __call__(self, event: Event) -> None:
        async with self.arrived:
            self.events.append(event)
            self.arrived.notify_all()

    async def wait(self, count: int) -> list[Event]:
        async with asyncio.timeout(WITHIN), self.arrived:
            await self.arrived.wait_for(lambda: len(self.events) >= count)
        return list(self.events)


def exchange_for(call: Call, emit: Recorder | None = None, principal: str = "alice") -> Exchange:
    exchange = Exchange(call=call, route="/mcp", profile=PROFILE, principal=principal)
    if emit is not None:
        exchange.emit = emit
    return exchange


def subscribe_call(uri: str, unsubscribe: bool = False) -> Call:
    op = Operation.RESOURCES_UNSUBSCRIBE if unsubscribe else Operation.RESOURCES_SUBSCRIBE
    return Call(1, op, op.value, {"uri": uri}, CLIENT)


def listen_call(id_: Any, notifications: dict[str, Any]) -> Call:
    return Call(
        id_,
        Operation.LISTEN,
        Operation.LISTEN.value,
        {"notifications": notifications},
        ClientContext("2026-07-28", adapter=Adapter2026_07_28()),
    )


async def settle(hub: SubscriptionHub) -> None:
    """Let the hub's background work (releases) finish."""
    async with asyncio.timeout(WITHIN):
        while hub._tasks:
            await asyncio.wait(set(hub._tasks))


async def test_the_real_link_is_a_subscription_upstream() -> None:
    """The forwarder silently routes no change notifications for a link that fails this
    check: the gateway's own link must pass it (and the test's stand-in too)."""
    async with aiohttp.ClientSession() as http:
        link = UpstreamLink(UpstreamSettings("http://127.0.0.1:9/mcp"), AdapterSet.default(), http)
        try:
            assert isinstance(link, SubscriptionUpstream)
            assert Forwarder(link).subscriptions is not None
        finally:
            await link.close()
    assert isinstance(ScriptedUpstream(), SubscriptionUpstream)


async def test_legacy_sessions_share_an_upstream_subscription() -> None:
    upstream = ScriptedUpstream()
    hub = SubscriptionHub(upstream)
    one, two = Recorder(), Recorder()
    hub.join("s1", "alice", one, PROFILE, client=CLIENT)
    hub.join("s2", "alice", two, PROFILE, client=CLIENT)
    call = subscribe_call("file:///a")
    assert await hub.subscribe("s1", call, exchange_for(call)) == Value({})
    assert await hub.subscribe("s2", call, exchange_for(call)) == Value({})
    assert await hub.subscribe("s2", call, exchange_for(call)) == Value({})  # twice: once
    assert upstream.requests == [("resources/subscribe", "file:///a")]

    assert upstream.sink is not None
    await upstream.sink("alice", updated("file:///a"))
    await upstream.sink("alice", updated("file:///b"))  # nobody's
    await upstream.sink("bob", updated("file:///a"))  # another principal's session
    await upstream.sink("alice", TOOLS_CHANGED)
    await upstream.sink("alice", PROMPTS_CHANGED)  # not declared by the upstream
    assert [e.method for e in await one.wait(2)] == [
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]
    assert len(two.events) == 2

    # Two sessions hold it (s2 once, though it asked twice): the first to go keeps it
    # upstream, the second releases it.
    hub.leave("s1")
    await settle(hub)
    assert upstream.requests == [("resources/subscribe", "file:///a")]
    unsubscribe = subscribe_call("file:///a", unsubscribe=True)
    assert await hub.unsubscribe("s2", unsubscribe, exchange_for(unsubscribe)) == Value({})
    assert upstream.requests[-1] == ("resources/unsubscribe", "file:///a")
    # Nobody holds it any more: the next subscription goes upstream again.
    assert await hub.subscribe("s2", call, exchange_for(call)) == Value({})
    assert upstream.requests[-1] == ("resources/subscribe", "file:///a")
    assert len(upstream.requests) == 3


async def test_a_listen_is_acknowledged_with_what_can_be_honoured() -> None:
    upstream = ScriptedUpstream()
    hub = SubscriptionHub(upstream)
    stream = Recorder()
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": True,  # not declared
        "resourceSubscriptions": ["file:///a"],
        "taskIds": ["t"],
    }
    call = listen_call(7, wanted)
    task = asyncio.ensure_future(hub.listen(call, exchange_for(call, stream)))
    ack = (await stream.wait(1))[0]
    assert ack.method == ACKNOWLEDGED
    assert ack.params == {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}
    }
    assert upstream.requests == [("resources/subscribe", "file:///a")]
    assert upstream.sink is not None
    await upstream.sink("alice", PROMPTS_CHANGED)
    await upstream.sink("alice", updated("file:///a"))
    assert [e.method for e in await stream.wait(2)][1] == "notifications/resources/updated"

    task.cancel()  # the client closed the stream
    await asyncio.gather(task, return_exceptions=True)
    await settle(hub)
    assert upstream.requests[-1] == ("resources/unsubscribe", "file:///a")


async def test_no_subscribe_capability_means_no_resource_subscriptions() -> None:
    upstream = ScriptedUpstream()
    hub = SubscriptionHub(upstream)
    stream = Recorder()
    call = listen_call(1, {"resourceSubscriptions": ["file:///a"], "toolsListChanged": True})
    exchange = exchange_for(call, stream)
    exchange.profile = ServerProfile(capabilities={"tools": {"listChanged": True}})
    task = asyncio.ensure_future(hub.listen(call, exchange))
    ack = (await stream.wait(1))[0]
    assert ack.params == {"notifications": {"toolsListChanged": True}}
    assert upstream.requests == []
    assert upstream.attached == ["alice"]  # the upstream session's stream is opened
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_stateless_upstream_gets_one_listen_with_the_union() -> None:
    upstream = ScriptedUpstream(stateless=True)
    hub = SubscriptionHub(upstream)
    one, two = Recorder(), Recorder()
    hub.join("s1", "alice", one, PROFILE, client=CLIENT, lists=False)
    hub.join("s2", "alice", two, PROFILE, client=CLIENT, lists=False)
    a, b = subscribe_call("file:///a"), subscribe_call("file:///b")
    assert await hub.subscribe("s1", a, exchange_for(a)) == Value({})
    assert upstream.listens == [{"resourceSubscriptions": ["file:///a"]}]
    assert await hub.subscribe("s2", b, exchange_for(b)) == Value({})
    assert upstream.listens[-1] == {"resourceSubscriptions": ["file:///a", "file:///b"]}

    upstream.feeds[-1].put_nowait(updated("file:///b"))
    assert (await two.wait(1))[0].params == {"uri": "file:///b"}
    assert one.events == []

    # The stream is lost: it is re-opened with the same filter.
    upstream.feeds[-1].put_nowait(None)
    await upstream.wait_listens(3)
    assert upstream.listens[-1] == upstream.listens[-2]

    hub.want_lists("s1", True)  # a stream opened: list changes too
    await upstream.wait_listens(4)
    assert upstream.listens[-1]["toolsListChanged"] is True

    hub.leave("s1")
    hub.leave("s2")
    await settle(hub)
    assert "alice" not in hub._feeds  # nobody left: the upstream listen is closed
    await hub.close()


def test_the_modern_adapter_strips_the_upstreams_subscription_id() -> None:
    adapter = Adapter2026_07_28()
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "file:///a", "_meta": {SUBSCRIPTION_ID: 3, "x": 1}},
    }
    event = adapter.client_read_event(message)
    assert event == Event(
        "notifications/resources/updated", {"uri": "file:///a", "_meta": {"x": 1}}
    )
    tagged = adapter.encode_event(updated("file:///a"), listen_id="L")
    assert tagged is not None
    assert tagged["params"]["_meta"] == {SUBSCRIPTION_ID: "L"}


def test_the_listen_filter_is_the_adapters() -> None:
    """The filter's keys live in the adapter: read, honoured, and asked upstream."""
    modern = AdapterSet.default().by_version["2026-07-28"]
    wanted = modern.listen_interest(
        {
            "notifications": {
                "toolsListChanged": True,
                "promptsListChanged": False,
                "resourceSubscriptions": ["a://1", "b://2"],
                "vendor": True,
            }
        }
    )
    assert wanted.lists == {"notifications/tools/list_changed"}
    assert wanted.uris == ("a://1", "b://2")
    assert modern.listen_interest({}).empty
    for malformed in (["a://1", 3], "a://1", {"uri": "a://1"}):
        with pytest.raises(Failure) as refused:
            modern.listen_interest({"notifications": {"resourceSubscriptions": malformed}})
        assert refused.value.kind is FailureKind.INVALID_PARAMS
    ack = modern.listen_acknowledgement(wanted)
    assert ack == Event(
        ACKNOWLEDGED,
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://1", "b://2"]}},
    )
    assert modern.client_read_acknowledgement(ack) == wanted
    assert modern.client_read_acknowledgement(TOOLS_CHANGED) is None
    assert modern.client_listen_params(wanted) == ack.params
    legacy = AdapterSet.default().by_version["2025-06-18"]
    assert legacy.client_list_changes(CAPS) == {"notifications/tools/list_changed"}
    assert legacy.client_can_subscribe(CAPS)
    assert not legacy.client_can_subscribe({"resources": {}})


class RefusingUpstream(ScriptedUpstream):
    """Refuses every resources/subscribe (an unknown URI, say)."""

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        await super().handle(call, exchange)
        return Failure(FailureKind.RESOURCE_NOT_FOUND, "no such resource")


async def test_a_refused_subscribe_leaves_nothing_behind() -> None:
    hub = SubscriptionHub(RefusingUpstream())
    hub.join("s1", "alice", Recorder(), PROFILE, client=CLIENT)
    for n in range(50):
        call = subscribe_call(f"file:///missing/{n}")
        outcome = await hub.subscribe("s1", call, exchange_for(call))
        assert isinstance(outcome, Failure)
    listener = hub.listener("s1")
    assert listener is not None and not listener.uris
    assert len(hub._locks) == 0 and not hub._counts


async def test_one_session_holds_a_bounded_number_of_subscriptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(subscriptions, "MAX_SUBSCRIPTIONS", 3)
    upstream = ScriptedUpstream()
    hub = SubscriptionHub(upstream)
    hub.join("s1", "alice", Recorder(), PROFILE, client=CLIENT)
    hub.join("s2", "alice", Recorder(), PROFILE, client=CLIENT)
    for n in range(3):
        call = subscribe_call(f"file:///{n}")
        assert await hub.subscribe("s1", call, exchange_for(call)) == Value({})
    again = subscribe_call("file:///0")
    assert await hub.subscribe("s1", again, exchange_for(again)) == Value({})  # held already
    call = subscribe_call("file:///3")
    outcome = await hub.subscribe("s1", call, exchange_for(call))
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.QUOTA_EXCEEDED
    assert ("resources/subscribe", "file:///3") not in upstream.requests
    # The bound is the session's: another session of the same caller is not refused.
    assert await hub.subscribe("s2", call, exchange_for(call)) == Value({})
    long = subscribe_call("file:///" + "x" * subscriptions.MAX_URI_LENGTH)
    outcome = await hub.subscribe("s2", long, exchange_for(long))
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.QUOTA_EXCEEDED
