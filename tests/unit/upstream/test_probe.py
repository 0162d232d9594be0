"""The era probe against a fake carrier: which answers make which verdict."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from gateway.core import Failure, FailureKind
from gateway.core import jsonrpc as rpc
from gateway.protocol import Adapter, AdapterSet
from gateway.protocol.v2026_07_28 import Adapter2026_07_28
from gateway.upstream.calls import Calls
from gateway.upstream.carriers.base import Carrier, CarrierError, Message
from gateway.upstream.carriers.base import UpstreamReply as CarrierReply
from gateway.upstream.probe import EraProbe, Verdict
from gateway.upstream.sessions import SessionPool
from gateway.upstream.settings import UpstreamSettings

URL = "http://upstream.invalid/mcp"
SSE_ENDPOINT = "http://upstream.invalid/messages"

# What the fake upstream does with one request: an answer (with its HTTP status),
# a CarrierError to raise, or None to never answer.
UpstreamReply = tuple[int, Message] | CarrierError | None
Handler = Callable[[Message, Mapping[str, str]], UpstreamReply]


class FakeCarrier(Carrier):
    """A carrier whose upstream is ``handler``; it records what went through it."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[Message, dict[str, str]]] = []
        self.sent: list[Message] = []
        self.started = 0
        self.closed = False

    async def start(self) -> None:
        self.started += 1

    async def request(self, message: Message, headers: Mapping[str, str]) -> CarrierReply:
        self.requests.append((message, dict(headers)))
        reply = self.handler(message, headers)
        if reply is None:
            await asyncio.Event().wait()  # an upstream that never answers
            raise AssertionError("unreachable")
        if isinstance(reply, CarrierError):
            raise reply
        status, answer = reply
        return CarrierReply(status, {}, _messages([answer]))

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        self.sent.append(message)

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        return None

    async def terminate(self, headers: Mapping[str, str]) -> None:
        return None

    async def close(self) -> None:
        self.closed = True

    @property
    def methods(self) -> list[str]:
        return [message["method"] for message, _ in self.requests]

    @property
    def versions(self) -> list[str | None]:
        return [headers.get("MCP-Protocol-Version") for _, headers in self.requests]


async def _messages(items: list[Message]) -> AsyncIterator[Message]:
    for item in items:
        yield item


class Handshakes:
    """The probe's handshake callback: records each try, fails the transports told to."""

    def __init__(self, adapters: AdapterSet, refuse: Mapping[str, CarrierError] = {}) -> None:
        self.adapters = adapters
        self.refuse = dict(refuse)
        self.tries: list[tuple[str, Adapter | None]] = []

    async def __call__(self, transport: str, pinned: Adapter | None) -> Verdict:
        self.tries.append((transport, pinned))
        if transport in self.refuse:
            raise self.refuse[transport]
        adapter = pinned or self.adapters.handshake[0]
        return Verdict(adapter, transport, adapter.client_read_profile({}))


class SseCheck:
    def __init__(self, endpoint: str | None) -> None:
        self.endpoint = endpoint
        self.calls = 0

    async def __call__(self, headers: Mapping[str, str]) -> str | None:
        self.calls += 1
        return self.endpoint


DEFAULT = AdapterSet.default()
MODERN = DEFAULT.stateless[0]
LEGACY = DEFAULT.handshake[0]


def discovered(adapter: Adapter, request_id: Any) -> tuple[int, Message]:
    result = {"supportedVersions": [adapter.version], "capabilities": {"tools": {}}}
    return 200, rpc.result(request_id, result)


def refused(request_id: Any, code: int, data: Any = None, status: int = 400) -> tuple[int, Message]:
    return status, rpc.error(request_id, code, "refused", data)


def make_probe(
    handler: Handler,
    adapters: AdapterSet = DEFAULT,
    sse_endpoint: str | None = None,
    **settings: Any,
) -> tuple[EraProbe, FakeCarrier, SseCheck]:
    carrier = FakeCarrier(handler)
    sse = SseCheck(sse_endpoint)
    upstream = UpstreamSettings(URL, **settings)
    return EraProbe(upstream, adapters, carrier, itertools.count(1), sse), carrier, sse


# ------------------------------------------------------------- modern upstreams


async def test_a_modern_answer_is_a_modern_verdict() -> None:
    probe, carrier, sse = make_probe(lambda message, _: discovered(MODERN, message["id"]))
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({"Authorization": "Bearer t"}, handshakes)
    assert verdict.adapter is MODERN
    assert verdict.transport == "http"
    assert verdict.profile.capabilities == {"tools": {}}
    assert carrier.methods == ["server/discover"]
    assert carrier.requests[0][1]["Authorization"] == "Bearer t"  # forwarded
    assert handshakes.tries == [] and sse.calls == 0


class _Newer(Adapter2026_07_28):
    version = "2099-02-01"


class _Newest(Adapter2026_07_28):
    version = "2099-03-01"


async def test_unsupported_version_with_a_list_discovers_that_version() -> None:
    # Three modern revisions, newest first; the upstream speaks only the oldest and
    # names it when refusing the newest: the one in between is never tried.
    adapters = DEFAULT.with_adapter(_Newer()).with_adapter(_Newest())

    def handler(message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        if headers.get("MCP-Protocol-Version") == MODERN.version:
            return discovered(MODERN, message["id"])
        return refused(message["id"], -32022, {"supported": [MODERN.version]})

    probe, carrier, _ = make_probe(handler, adapters)
    verdict = await probe.run({}, Handshakes(adapters))
    assert verdict.adapter.version == MODERN.version
    assert carrier.versions == ["2099-03-01", MODERN.version]


async def test_unsupported_version_naming_only_handshake_revisions_falls_back() -> None:
    def handler(message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        return refused(message["id"], -32022, {"supported": [LEGACY.version]})

    probe, _, _ = make_probe(handler)
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({}, handshakes)
    assert verdict.adapter is LEGACY
    assert handshakes.tries == [("http", None)]


# ------------------------------------------------------------- legacy upstreams


@pytest.mark.parametrize(
    "reply",
    [
        CarrierError("upstream answered HTTP 400", status=400),
        CarrierError("upstream answered HTTP 404", status=404),
        (200, rpc.error(1, -32601, "Method not found")),  # not a modern code
    ],
    ids=["400", "404", "method-not-found"],
)
async def test_no_modern_evidence_falls_back_to_initialize(reply: UpstreamReply) -> None:
    probe, carrier, sse = make_probe(lambda message, _: reply)
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({}, handshakes)
    assert verdict.adapter is LEGACY and verdict.transport == "http"
    assert carrier.methods == ["server/discover"]
    assert handshakes.tries == [("http", None)]
    assert sse.calls == 0


async def test_the_fallback_handshake_initializes_over_the_same_carrier() -> None:
    """With the real session pool as the handshake: initialize, then initialized."""

    def handler(message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        if message["method"] == "initialize":
            result = {"protocolVersion": LEGACY.version, "capabilities": {"logging": {}}}
            return 200, rpc.result(message["id"], result)
        return CarrierError("upstream answered HTTP 405", status=405)

    carrier = FakeCarrier(handler)
    settings = UpstreamSettings(URL)
    calls = Calls(itertools.count(1))
    pool = SessionPool(settings, DEFAULT, None, (carrier, carrier), calls)  # type: ignore[arg-type]
    probe = EraProbe(settings, DEFAULT, carrier, calls.ids, SseCheck(None))

    async def handshake(transport: str, pinned: Adapter | None) -> Verdict:
        session = await pool.open(transport, {}, pinned)
        pool.adopt("someone", session)
        return Verdict(session.adapter, transport, session.profile)

    try:
        verdict = await probe.run({}, handshake)
        assert verdict.adapter is LEGACY and verdict.transport == "http"
        assert verdict.profile.capabilities == {"logging": {}}
        assert carrier.methods == ["server/discover", "initialize"]
        assert [message["method"] for message in carrier.sent] == ["notifications/initialized"]
    finally:
        await pool.close()
        calls.close()


async def test_initialize_refused_with_a_4xx_tries_http_sse() -> None:
    probe, _, sse = make_probe(
        lambda message, _: CarrierError("405", status=405), sse_endpoint=SSE_ENDPOINT
    )
    handshakes = Handshakes(DEFAULT, {"http": CarrierError("refused", status=405)})
    verdict = await probe.run({}, handshakes)
    assert verdict.transport == "sse"
    assert handshakes.tries == [("http", None), ("sse", None)]
    assert sse.calls == 1


async def test_no_http_sse_stream_either_is_a_protocol_failure() -> None:
    probe, _, sse = make_probe(lambda message, _: CarrierError("405", status=405))
    handshakes = Handshakes(DEFAULT, {"http": CarrierError("refused", status=405)})
    with pytest.raises(Failure) as caught:
        await probe.run({}, handshakes)
    assert caught.value.kind is FailureKind.UPSTREAM_PROTOCOL
    assert "no MCP transport" in caught.value.message
    assert handshakes.tries == [("http", None)] and sse.calls == 1


@pytest.mark.parametrize(
    ("error", "settings", "kind"),
    [
        (CarrierError("upstream answered HTTP 502", status=502), {}, FailureKind.UPSTREAM_REFUSED),
        (CarrierError("refused", status=405), {"transport": "http"}, FailureKind.UPSTREAM_PROTOCOL),
    ],
    ids=["5xx", "pinned-to-streamable-http"],
)
async def test_initialize_refused_without_the_sse_fallback(
    error: CarrierError, settings: dict[str, Any], kind: FailureKind
) -> None:
    probe, _, sse = make_probe(lambda message, _: CarrierError("405", status=405), **settings)
    with pytest.raises(Failure) as caught:
        await probe.run({}, Handshakes(DEFAULT, {"http": error}))
    assert caught.value.kind is kind
    assert caught.value.data == {"status": error.status}
    assert sse.calls == 0


async def test_the_sse_transport_goes_straight_to_the_old_stream() -> None:
    probe, carrier, _ = make_probe(
        lambda message, _: discovered(MODERN, message["id"]),
        sse_endpoint=SSE_ENDPOINT,
        transport="sse",
    )
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({}, handshakes)
    assert verdict.transport == "sse"
    assert carrier.requests == []
    assert handshakes.tries == [("sse", None)]


# ------------------------------------------------------------- no verdict


async def test_connection_refused_is_upstream_unavailable() -> None:
    refused = CarrierError("ConnectionRefusedError", unreached=True)
    probe, _, sse = make_probe(lambda message, _: refused)
    handshakes = Handshakes(DEFAULT)
    with pytest.raises(Failure) as caught:
        await probe.run({}, handshakes)
    assert caught.value.kind is FailureKind.UPSTREAM_UNAVAILABLE
    assert handshakes.tries == [] and sse.calls == 0


async def test_a_timeout_over_http_is_upstream_timeout() -> None:
    probe, _, _ = make_probe(lambda message, _: CarrierError("timed out", timeout=True))
    with pytest.raises(Failure) as caught:
        await probe.run({}, Handshakes(DEFAULT))
    assert caught.value.kind is FailureKind.UPSTREAM_TIMEOUT


# ------------------------------------------------------------- stdio


async def test_a_silent_stdio_server_is_legacy() -> None:
    # Legacy stdio servers may never answer a method they do not know.  A shared child
    # (one session for the whole route) keeps the session the probe opened on it.
    probe, carrier, _ = make_probe(
        lambda message, _: None,
        transport="stdio",
        command=["server"],
        probe_timeout=0.05,
        shared=True,
    )
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({}, handshakes)
    assert verdict.transport == "stdio"
    assert carrier.started == 1
    assert handshakes.tries == [("stdio", None)]
    assert not carrier.closed


async def test_a_modern_stdio_server_is_a_stdio_verdict() -> None:
    probe, _, _ = make_probe(
        lambda message, _: discovered(MODERN, message["id"]), transport="stdio", command=["s"]
    )
    verdict = await probe.run({}, Handshakes(DEFAULT))
    assert verdict.adapter is MODERN and verdict.transport == "stdio"


async def test_a_child_per_session_closes_the_probe_child() -> None:
    probe, carrier, _ = make_probe(
        lambda message, _: CarrierError("the stdio server exited", status=None),
        transport="stdio",
        command=["server"],
    )
    # An exit without an answer is no verdict: the request went, its answer is lost.
    with pytest.raises(Failure) as caught:
        await probe.run({}, Handshakes(DEFAULT))
    assert caught.value.kind is FailureKind.UPSTREAM_LOST

    probe, carrier, _ = make_probe(
        lambda message, _: (200, rpc.error(message["id"], -32601, "Method not found")),
        transport="stdio",
        command=["server"],
    )
    verdict = await probe.run({}, Handshakes(DEFAULT))
    assert verdict.transport == "stdio"
    assert carrier.closed  # it only answered the probe


# ------------------------------------------------------------- pinned revisions


async def test_a_pinned_handshake_revision_skips_the_modern_try() -> None:
    pinned = DEFAULT.handshake[-1]
    probe, carrier, _ = make_probe(
        lambda message, _: discovered(MODERN, message["id"]), version=pinned.version
    )
    handshakes = Handshakes(DEFAULT)
    verdict = await probe.run({}, handshakes)
    assert verdict.adapter is pinned
    assert carrier.requests == []
    assert handshakes.tries == [("http", pinned)]


async def test_a_pinned_modern_revision_discovers_only_that_one() -> None:
    adapters = DEFAULT.with_adapter(_Newest())
    probe, carrier, _ = make_probe(
        lambda message, _: discovered(MODERN, message["id"]), adapters, version=MODERN.version
    )
    verdict = await probe.run({}, Handshakes(adapters))
    assert verdict.adapter.version == MODERN.version
    assert carrier.versions == [MODERN.version]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_pinned_modern_revision_starts_a_stdio_child(transport: str) -> None:
    """Nothing but the probe starts a stdio route's child: pinned, it still must."""
    probe, carrier, _ = make_probe(
        lambda message, _: discovered(MODERN, message["id"]),
        version=MODERN.version,
        transport=transport,
        command=["server"] if transport == "stdio" else None,
    )
    verdict = await probe.run({}, Handshakes(DEFAULT))
    assert verdict.adapter is MODERN
    assert carrier.started == (1 if transport == "stdio" else 0)


async def test_a_pinned_modern_revision_refused_is_a_failure() -> None:
    probe, _, _ = make_probe(
        lambda message, _: refused(message["id"], -32022, {"supported": []}),
        version=MODERN.version,
    )
    handshakes = Handshakes(DEFAULT)
    with pytest.raises(Failure) as caught:
        await probe.run({}, handshakes)
    assert caught.value.kind is FailureKind.UPSTREAM_PROTOCOL
    assert "server/discover failed" in caught.value.message
    assert handshakes.tries == []


async def test_an_unknown_pinned_revision_is_an_internal_failure() -> None:
    probe, carrier, _ = make_probe(lambda message, _: None, version="1999-01-01")
    with pytest.raises(Failure) as caught:
        await probe.run({}, Handshakes(DEFAULT))
    assert caught.value.kind is FailureKind.INTERNAL
    assert carrier.requests == []
