"""The inbound pipeline's entry (`Pipeline.receive`): its order and its refusals,
through its real interface, with small fakes of the route's upstream side, its
credential check and the transport's door."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.auth.front import Admission
from gateway.core import Failure, FailureKind, Preamble, ServerProfile, Value
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.inbound import Arrival
from gateway.transport.pipeline import Pipeline, Refusal
from gateway.transport.route import Route
from gateway.transport.sessions import Session, SessionStore

LEGACY = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


class FakeForwarder:
    subscriptions = None

    def __init__(self) -> None:
        self.handled: list[str] = []

    async def handle(self, call: Any, exchange: Any) -> Value:
        self.handled.append(call.method)
        return Value({})

    async def end_session(self, exchange: Any) -> None:
        return None


class FakeBackend:
    upstream_revision = LEGACY

    def __init__(self) -> None:
        self.forwarder = FakeForwarder()

    known = ServerProfile()


class FakeAuth:
    """The route's credential check: a fixed admission, and the requests it saw."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.seen: list[Any] = []

    async def admit(self, request: Any) -> Admission:
        self.seen.append(request)
        return self.admission

    def passed_on(self, failure: Failure, request: Any) -> Failure:
        return failure


class FakeTransport:
    """A transport as the pipeline sees it; every hook it is asked is logged."""

    def __init__(self, *, guarded: bool = True, body: Any = None, vet: Failure | None = None):
        self.guarded = guarded
        self.own_session: Session | None = None
        self.running = None
        self.events = None
        self.body = body
        self.refuse_adapter = vet
        self.asked: list[str] = []

    async def read(self, source: Any, preamble: Preamble) -> Any:
        self.asked.append("read")
        return self.body

    def check_headers(self, adapter: Any, preamble: Preamble, session: Any) -> Failure | None:
        self.asked.append("vet")
        return self.refuse_adapter


def pipeline(*, auth: FakeAuth | None = None, sessions: SessionStore | None = None) -> Pipeline:
    route = Route(
        path="/mcp",
        backend=FakeBackend(),  # type: ignore[arg-type]
        adapters=AdapterSet.default(),
        guard=OriginGuard(loopback_only=True),
        auth=auth,  # type: ignore[arg-type]
        sessions=sessions if sessions is not None else SessionStore(),
    )

    async def push(session: Session, message: dict[str, Any]) -> None:
        session.deliver(message)

    return Pipeline(route, route.sessions, push)


JSON_AND_SSE = "application/json, text/event-stream"


def envelope(session_id: str | None = None, **headers: str) -> Preamble:
    # A POST's headers as a Streamable HTTP client sends them (the revisions' own
    # header rules are the adapters' tests', tests/unit/test_selection.py).
    sent = {"host": "localhost", "content-type": "application/json", "accept": JSON_AND_SSE}
    return Preamble(body=None, headers={**sent, **headers}, session_id=session_id)


def body(message: Any) -> bytes:
    return orjson.dumps(message)


async def test_a_foreign_host_is_refused_before_credentials_or_body() -> None:
    auth = FakeAuth(Admission())
    door = FakeTransport(body=body(PING))
    refused = await pipeline(auth=auth).receive(
        door, "request", envelope(host="evil.example"), "request"
    )
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.FORBIDDEN
    assert auth.seen == []
    assert "read" not in door.asked


async def test_an_unguarded_door_skips_the_host_check() -> None:
    door = FakeTransport(guarded=False, body=body(INITIALIZE))
    arrival = await pipeline().receive(door, "line", envelope(host="evil.example"))
    assert isinstance(arrival, Arrival)


async def test_refused_credentials_stop_before_the_body_is_read() -> None:
    auth = FakeAuth(Admission(failure=Failure(FailureKind.UNAUTHORIZED, "no token")))
    door = FakeTransport(body=body(PING))
    refused = await pipeline(auth=auth).receive(door, "request", envelope(), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.UNAUTHORIZED
    assert auth.seen == ["request"]
    assert door.asked == []  # the body was never read


async def test_the_admitted_principal_owns_the_session() -> None:
    auth = FakeAuth(Admission(principal="alice"))
    door = FakeTransport(body=body(INITIALIZE))
    arrival = await pipeline(auth=auth).receive(door, "request", envelope(), "request")
    assert isinstance(arrival, Arrival)
    assert arrival.principal == "alice"
    assert arrival.opened and arrival.session is not None
    assert arrival.session.principal == "alice"
    assert arrival.reword_failure is not None  # the route's auth has the last word


async def test_a_body_that_never_arrived_is_not_answered() -> None:
    assert await pipeline().receive(FakeTransport(body=None), "request", envelope()) is None


async def test_a_body_the_door_refuses_is_refused_before_any_adapter() -> None:
    door = FakeTransport()
    p = pipeline()
    door.body = p.refusal(envelope(), Failure(FailureKind.PAYLOAD_TOO_LARGE, "too large"))
    refused = await p.receive(door, "request", envelope(), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.PAYLOAD_TOO_LARGE
    assert "vet" not in door.asked


async def test_a_body_that_is_not_json_is_a_parse_error() -> None:
    door = FakeTransport(body=b"{not json")
    refused = await pipeline().receive(door, "request", envelope(), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.PARSE_ERROR
    assert "vet" not in door.asked


async def test_an_unknown_session_is_refused_once_the_body_is_read() -> None:
    door = FakeTransport(body=body(PING))
    refused = await pipeline().receive(door, "request", envelope(session_id="nope"), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.SESSION_NOT_FOUND
    assert refused.id == 2
    assert door.asked == ["read"]


async def test_a_session_whose_owner_cannot_be_located_gets_that_not_not_found() -> None:
    """A cluster middleware's mark (the session's replica could not be looked up): its
    failure, in the revision the message's header names, before any decode."""
    busy = Failure(FailureKind.OVERLOADED, "send it again", headers={"Retry-After": "1"})
    door = FakeTransport(body=body(PING))
    preamble = envelope(session_id="other.x", **{"mcp-protocol-version": "2025-11-25"})
    preamble.owner_unknown = busy
    refused = await pipeline().receive(door, "request", preamble, "request")
    assert isinstance(refused, Refusal)
    assert refused.failure is busy
    assert refused.adapter.version == "2025-11-25"
    assert refused.id == 2
    assert door.asked == ["read"]


async def test_a_retry_whose_call_holder_cannot_be_located_gets_that_in_its_revision() -> None:
    busy = Failure(FailureKind.OVERLOADED, "send it again")
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    message = {"jsonrpc": "2.0", "id": "r", "method": "tools/call", "params": {"_meta": meta}}
    preamble = envelope()
    preamble.owner_unknown = busy
    refused = await pipeline().receive(FakeTransport(body=body(message)), "request", preamble)
    assert isinstance(refused, Refusal)
    assert refused.adapter.version == "2026-07-28"
    assert refused.message()["error"]["code"] == -32000
    assert refused.adapter.http_status(refused.failure) == 503


async def test_the_doors_vet_refuses_in_the_picked_adapters_words() -> None:
    failure = Failure(FailureKind.INVALID_REQUEST, "a header is missing")
    door = FakeTransport(body=body(INITIALIZE), vet=failure)
    refused = await pipeline().receive(door, "request", envelope(), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure is failure
    assert refused.adapter.version == LEGACY
    assert refused.id == 1


async def test_a_session_is_found_again_and_its_revision_kept() -> None:
    p = pipeline()
    opened = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(opened, Arrival) and opened.session is not None
    door = FakeTransport(body=body(PING))
    # The header names the newest handshake revision: the session's own is kept.
    preamble = envelope(opened.session.id, **{"mcp-protocol-version": "2025-11-25"})
    arrival = await p.receive(door, "request", preamble, "request")
    assert isinstance(arrival, Arrival)
    assert arrival.session is opened.session
    assert not arrival.opened
    assert arrival.adapter.version == LEGACY
    # The adapter that decoded the call travels with it.
    assert arrival.requests[0].client.adapter is arrival.adapter
    reply = await p.run(arrival, arrival.requests[0], None)
    assert reply.message is not None and reply.message["id"] == 2


async def test_a_session_of_another_principal_is_not_found() -> None:
    p = pipeline()
    opened = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(opened, Arrival) and opened.session is not None
    other = envelope(opened.session.id, authorization="Bearer someone-else")
    refused = await p.receive(FakeTransport(body=body(PING)), "request", other)
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.SESSION_NOT_FOUND


async def test_a_session_ended_while_its_body_arrived_is_not_found() -> None:
    p = pipeline()
    opened = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(opened, Arrival) and opened.session is not None
    session = opened.session

    class EndingTransport(FakeTransport):
        async def read(self, source: Any, preamble: Preamble) -> Any:
            p.end_session(session.id)
            return body(PING)

    refused = await p.receive(EndingTransport(), "request", envelope(session.id))
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.SESSION_NOT_FOUND
    assert refused.session is None


async def test_the_doors_own_session_stands_when_none_is_named() -> None:
    p = pipeline()
    opened = await p.receive(FakeTransport(guarded=False, body=body(INITIALIZE)), b"", envelope())
    assert isinstance(opened, Arrival) and opened.session is not None
    door = FakeTransport(guarded=False, body=body(PING))
    door.own_session = opened.session
    arrival = await p.receive(door, b"", envelope())
    assert isinstance(arrival, Arrival)
    assert arrival.session is opened.session
    assert arrival.running is opened.session.running  # the door keeps none of its own


async def test_an_initialize_over_the_session_quota_is_refused() -> None:
    p = pipeline(sessions=SessionStore(per_principal=1))
    first = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(first, Arrival) and first.opened
    refused = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(refused, Refusal)
    assert refused.id == 1
    assert len(p.sessions) == 1


async def test_a_message_nested_too_deep_is_refused_unwalked() -> None:
    nested = b'{"a":' * 300 + b"{}" + b"}" * 300
    message = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"x":%b}}' % nested
    refused = await pipeline().receive(FakeTransport(body=message), "request", envelope())
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.INVALID_PARAMS
    assert refused.id == 9


async def test_a_batch_over_the_routes_bound_gets_one_refusal_undecoded() -> None:
    p = pipeline()
    batch = [{**PING, "id": n} for n in range(p.route.max_batch + 1)]
    door = FakeTransport(body=body(batch))
    refused = await p.receive(door, "request", envelope(), "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.INVALID_REQUEST
    assert f"at most {p.route.max_batch}" in refused.failure.message
    assert refused.id is None  # one answer for the whole batch, no message's id
    assert "vet" not in door.asked
    message = refused.message()
    assert message["id"] is None and message["error"]["code"] == -32600
    # A batch at the bound is let in.
    door = FakeTransport(body=body(batch[:-1]))
    assert isinstance(await p.receive(door, "request", envelope(), "request"), Arrival)


async def test_a_refusal_is_worded_in_the_revision_the_message_names() -> None:
    """Too deep to decode, a stateless message still says its revision in ``_meta``:
    its refusal is worded in that revision, not the handshake era's default."""
    nested = b'{"a":' * 300 + b"{}" + b"}" * 300
    meta = b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28","deep":%b}' % nested
    message = b'{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":%b}}' % meta
    refused = await pipeline().receive(FakeTransport(body=message), "request", envelope())
    assert isinstance(refused, Refusal)
    assert refused.adapter.version == "2026-07-28"
    assert refused.id == "x"
    assert refused.message()["error"]["code"] == -32602


async def test_a_deep_batch_is_refused_whole_in_the_default_revision() -> None:
    batch = b'[{"jsonrpc":"2.0","id":4,"method":"ping"}, ' + b"[" * 300 + b"]" * 300 + b"]"
    refused = await pipeline().receive(FakeTransport(body=batch), "request", envelope())
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.INVALID_PARAMS
    assert refused.id == 4
    assert refused.adapter.version == AdapterSet.default().default_legacy.version


async def test_a_revision_the_gateway_does_not_speak_is_refused_with_the_messages_id() -> None:
    door = FakeTransport(body=body(PING))
    preamble = envelope(**{"mcp-protocol-version": "1999-01-01"})
    refused = await pipeline().receive(door, "request", preamble, "request")
    assert isinstance(refused, Refusal)
    assert refused.failure.kind is FailureKind.UNSUPPORTED_VERSION
    assert refused.id == 2
    assert "vet" not in door.asked  # refused before the door's own check


async def test_a_sessions_batch_stays_in_its_revision_though_it_opens_with_initialize() -> None:
    p = pipeline()
    opened = await p.receive(FakeTransport(body=body(INITIALIZE)), "request", envelope())
    assert isinstance(opened, Arrival) and opened.session is not None
    again = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2025-11-25"}}
    door = FakeTransport(body=body([again, PING]))
    arrival = await p.receive(door, "request", envelope(opened.session.id), "request")
    assert isinstance(arrival, Arrival)
    assert arrival.adapter.version == LEGACY
    assert not arrival.opened
