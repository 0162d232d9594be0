"""The link to one upstream (`UpstreamLink`): its era verdict, the upstream sessions
it keeps for its clients, and running calls on them, through its real carriers
against a small scripted MCP server on a loopback port."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Downstream,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    ServerProfile,
    Value,
    discard_event,
)
from gateway.protocol import AdapterSet
from gateway.upstream.link import UpstreamLink, UpstreamSettings, Verdict

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
ADAPTERS = AdapterSet.default()
WITHIN = 10.0  # seconds: a bound on any one step (each takes milliseconds)
ECHO = {
    "name": "echo",
    "inputSchema": {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    },
}
ECHO_HEADERS = {("region",): "Region"}


class Upstream:
    """An MCP server of one era on a loopback port, recording what reaches it.

    ``era`` "stateless" answers each request on its own (2026-07-28: discovery, and
    an unsupported-version refusal when ``refuse_version`` is set); "handshake" is a
    2025-06-18 server: a request outside a session is refused with 400, `initialize`
    opens a session (``Mcp-Session-Id``), DELETE ends it, an unknown one is 404, and
    it offers no GET stream.  ``expire_calls``: every `tools/call` finds its session
    expired (404), as after a server restart."""

    def __init__(self, era: str) -> None:
        self.era = era
        self.refuse_version = False
        self.expire_calls = False
        # (method, the Mcp-Session-Id it came with) of every POST; DELETEs as "DELETE".
        self.seen: list[tuple[str, str | None]] = []
        self.headers: list[dict[str, str]] = []  # of every tools/call
        # The sessions opened, in order, and the capabilities each declared.
        self.opened: list[str] = []
        self.declared: dict[str, Any] = {}
        self.sessions: set[str] = set()
        self._arrived = asyncio.Condition()
        self.url = ""
        self._runner: web.AppRunner | None = None

    def methods(self, method: str) -> list[str | None]:
        """The session ids of every ``method`` request received, in order."""
        return [session for seen, session in self.seen if seen == method]

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds, re-checked as requests arrive (bounded)."""
        async with asyncio.timeout(WITHIN), self._arrived:
            await self._arrived.wait_for(predicate)

    async def _note(self, method: str, session: str | None) -> None:
        async with self._arrived:
            self.seen.append((method, session))
            self._arrived.notify_all()

    async def __aenter__(self) -> Upstream:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        session = request.headers.get("Mcp-Session-Id")
        if request.method == "DELETE":
            await self._note("DELETE", session)
            self.sessions.discard(session or "")
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        message = orjson.loads(await request.read())
        method, id_ = message.get("method"), message.get("id")
        await self._note(str(method), session)
        if method == "tools/call":
            self.headers.append(dict(request.headers))
        if self.era == "stateless" and method == "subscriptions/listen":
            return await self._listen(request, id_)
        if self.era == "stateless":
            return self._stateless(id_, str(method), message.get("params") or {})
        return self._handshake(id_, str(method), message.get("params") or {}, session)

    async def _listen(self, request: web.Request, id_: Any) -> web.StreamResponse:
        """A listen's stream: its acknowledgement, one change, then its graceful end."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        for message in (
            {"method": "notifications/subscriptions/acknowledged", "params": {}},
            {"method": "notifications/tools/list_changed", "params": {}},
            {"id": id_, "result": {}},
        ):
            await stream.write(b"data: " + orjson.dumps({"jsonrpc": "2.0", **message}) + b"\n\n")
        await stream.write_eof()
        return stream

    def _stateless(self, id_: Any, method: str, params: dict[str, Any]) -> web.Response:
        if self.refuse_version:
            error = {"code": -32022, "message": "Unsupported", "data": {"supported": ["2099"]}}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=400)
        if method == "server/discover":
            result = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})
        if id_ is None:
            return web.Response(status=202)
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": _answer(method, params)})

    def _handshake(
        self, id_: Any, method: str, params: dict[str, Any], session: str | None
    ) -> web.Response:
        if method == "initialize":
            session = uuid.uuid4().hex
            self.sessions.add(session)
            self.opened.append(session)
            self.declared[session] = params.get("capabilities")
            result = {
                "protocolVersion": LEGACY,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "0"},
            }
            reply = {"jsonrpc": "2.0", "id": id_, "result": result}
            return web.json_response(reply, headers={"Mcp-Session-Id": session})
        if session is None:
            error = {"code": -32600, "message": "Bad Request: No valid session ID provided"}
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        if session not in self.sessions or (method == "tools/call" and self.expire_calls):
            self.sessions.discard(session)
            error = {"code": -32001, "message": "Session not found"}
            return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error}, status=404)
        if id_ is None:
            return web.Response(status=202)
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": _answer(method, params)})


def _answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "tools/list":
        return {"tools": [ECHO]}
    text = str((params.get("arguments") or {}).get("text"))
    return {"content": [{"type": "text", "text": f"echo: {text}"}]}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def linked(http: aiohttp.ClientSession, url: str, **settings: Any) -> UpstreamLink:
    return UpstreamLink(UpstreamSettings(url, request_timeout=WITHIN, **settings), ADAPTERS, http)


def call(
    operation: Operation = Operation.TOOLS_CALL,
    *,
    capabilities: dict[str, Any] | None = None,
    **params: Any,
) -> Call:
    """A 2025-11-25 client's request (its revision is not the upstream's)."""
    client = ClientContext(
        "2025-11-25",
        capabilities=capabilities or {},
        info={"name": "client", "version": "1"},
        adapter=ADAPTERS.by_version["2025-11-25"],
    )
    if operation is Operation.TOOLS_CALL:
        params = {"name": "echo", "arguments": {"text": "hi"}, **params}
    return Call(7, operation, operation.value, params, client)


def exchange(the_call: Call, principal: str = "alice", session: str | None = None) -> Exchange:
    """``session``: the client's own session (a handshake-era client); None: stateless."""
    downstream = Downstream(session, None, discard_event) if session is not None else None
    return Exchange(
        call=the_call,
        route="/mcp",
        profile=ServerProfile(),
        principal=principal,
        downstream=downstream,
    )


def echoed(outcome: Any) -> str:
    assert isinstance(outcome, Value), outcome
    return str(outcome.result["content"][0]["text"])


async def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


# ------------------------------------------------------------------ the verdict


async def test_concurrent_first_calls_probe_a_stateless_upstream_once(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        told: list[Verdict] = []
        link.on_verdict = told.append
        try:
            assert link.verdict is None and not link.stateless
            async with asyncio.timeout(WITHIN):
                outcomes = await asyncio.gather(
                    *(link.handle(c, exchange(c)) for c in [call() for _ in range(5)])
                )
            assert [echoed(o) for o in outcomes] == ["echo: hi"] * 5
            assert len(upstream.methods("server/discover")) == 1
            assert len(upstream.methods("tools/call")) == 5
            assert link.stateless
            assert link.verdict is not None and link.verdict.adapter.version == MODERN
            assert told == [link.verdict]
            # No session of any kind: one listen per principal is what scopes them.
            assert link.session_count() == 0
            assert link.scope(exchange(call(), "bob", session="s1")) == "bob"
        finally:
            await link.close()


async def test_a_verdict_from_elsewhere_spares_the_probe(http: aiohttp.ClientSession) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        told: list[Verdict] = []
        link.on_verdict = told.append
        modern = Verdict(ADAPTERS.by_version[MODERN], "http", ServerProfile())
        link.adopt(modern)
        # A verdict already held is not replaced by another replica's.
        link.adopt(Verdict(ADAPTERS.by_version[LEGACY], "http", ServerProfile()))
        try:
            assert link.verdict is modern
            assert echoed(await link.handle(call(), exchange(call()))) == "echo: hi"
            assert [m for m, _ in upstream.seen] == ["tools/list", "tools/call"]
            assert told == []  # only this replica's own probes are told
        finally:
            await link.close()


async def test_an_upstream_that_changes_revision_is_probed_again(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        try:
            assert echoed(await link.handle(call(), exchange(call()))) == "echo: hi"
            upstream.refuse_version = True
            refused = await link.handle(call(), exchange(call()))
            assert isinstance(refused, Failure)
            assert refused.kind is FailureKind.UNSUPPORTED_VERSION
            assert link.verdict is None  # the verdict stopped holding
            # Redeployed as a handshake-era server: the next call finds out.
            upstream.era, upstream.refuse_version = "handshake", False
            assert echoed(await link.handle(call(), exchange(call()))) == "echo: hi"
            assert link.verdict is not None and link.verdict.adapter.version == LEGACY
            assert len(upstream.methods("server/discover")) == 2
            assert not link.stateless
        finally:
            await link.close()


async def test_an_unreachable_upstream_is_a_failure_never_a_verdict(
    http: aiohttp.ClientSession,
) -> None:
    link = await linked(http, await closed_port_url())
    try:
        outcome = await link.handle(call(), exchange(call()))
        assert isinstance(outcome, Failure)
        assert outcome.kind is FailureKind.UPSTREAM_UNAVAILABLE
        assert link.verdict is None
        opened = await link.open(exchange(call(), session="s1"))  # answered, not raised
        assert isinstance(opened, Failure)
        assert opened.kind is FailureKind.UPSTREAM_UNAVAILABLE
        assert await link.declared_headers(call(), exchange(call())) is None
    finally:
        await link.close()


async def test_a_stdio_upstream_needs_a_command(http: aiohttp.ClientSession) -> None:
    with pytest.raises(ValueError, match="command"):
        UpstreamLink(UpstreamSettings("", transport="stdio"), ADAPTERS, http)


# --------------------------------------------------------- handshake-era sessions


async def test_each_client_session_has_an_upstream_session_ended_with_it(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        try:
            one, two = exchange(call(), session="one"), exchange(call(), session="two")
            assert await link.open(one) is None
            assert await link.open(two) is None
            assert link.session_count() == 2
            assert link.scope(one) == "s:one" and link.scope(two) == "s:two"
            assert echoed(await link.handle(one.call, one)) == "echo: hi"
            assert echoed(await link.handle(two.call, two)) == "echo: hi"
            first, second = upstream.methods("tools/call")
            assert first is not None and second is not None and first != second
            await link.end(one)
            assert first in upstream.methods("DELETE")
            assert second not in upstream.methods("DELETE")
            assert link.session_count() == 1
            # The other client's session goes on.
            assert echoed(await link.handle(two.call, two)) == "echo: hi"
            assert upstream.methods("tools/call")[-1] == second
        finally:
            await link.close()
        # Closing the link ends what is left upstream.
        assert second in upstream.methods("DELETE")


async def test_stateless_clients_share_a_pool_per_principal_and_declared_capabilities(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        try:
            plain = call()
            # `extensions` means nothing to a 2025-06-18 server: the same pool.
            extended = call(capabilities={"extensions": {"x": {}}})
            sampling = call(capabilities={"sampling": {}})
            for c, who in [(plain, "alice"), (extended, "alice"), (sampling, "alice")]:
                assert echoed(await link.handle(c, exchange(c, who))) == "echo: hi"
            assert echoed(await link.handle(plain, exchange(plain, "bob"))) == "echo: hi"
            # The probe's session was ended (it declared the gateway, not a client).
            probe, *pools = upstream.opened
            # Ended in the background once the probe had its answer.
            await upstream.until(lambda: probe in upstream.methods("DELETE"))
            assert upstream.methods("DELETE") == [probe]
            assert [upstream.declared[s] for s in pools] == [{}, {"sampling": {}}, {}]
            calls = upstream.methods("tools/call")
            assert calls[0] == calls[1]  # alice, as the upstream reads her, twice
            assert len(set(calls)) == 3
            assert link.session_count() == 3
            scopes = {link.scope(exchange(c, "alice")) for c in (plain, extended, sampling)}
            assert len(scopes) == 2 and all(s.startswith("p:alice:") for s in scopes)
            assert link.scope(exchange(plain, "bob")).startswith("p:bob:")
        finally:
            await link.close()


async def test_an_expired_upstream_session_is_opened_again_once(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        try:
            client = exchange(call(), session="one")
            assert echoed(await link.handle(client.call, client)) == "echo: hi"
            upstream.sessions.clear()  # the server restarted
            assert echoed(await link.handle(client.call, client)) == "echo: hi"
            lost, found = upstream.methods("tools/call")[1:]
            assert lost != found
            # Expired at once every time: the second try's failure is the answer.
            upstream.expire_calls = True
            before = len(upstream.opened)
            outcome = await link.handle(client.call, client)
            assert isinstance(outcome, Failure)
            assert outcome.kind is FailureKind.UPSTREAM_PROTOCOL
            assert len(upstream.opened) == before + 1
            assert len(upstream.methods("tools/call")) == 5
        finally:
            await link.close()


async def test_a_client_notification_reaches_its_own_upstream_session(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        try:
            notice = call(Operation.ROOTS_LIST_CHANGED)
            notice.id = None
            before = exchange(notice, session="one")
            await link.notify(notice, before)  # no verdict yet: nothing to tell
            assert upstream.seen == []
            client = exchange(call(), session="one")
            assert await link.open(client) is None
            await link.notify(notice, exchange(notice, session="one"))
            await link.notify(notice, exchange(notice, session="unknown"))
            sent = upstream.methods("notifications/roots/list_changed")
            assert sent == [upstream.methods("notifications/initialized")[-1]]
        finally:
            await link.close()


async def test_a_stateless_upstream_hears_no_session_notification(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        try:
            client = exchange(call(), session="one")
            assert await link.open(client) is None  # nothing to open
            notice = call(Operation.ROOTS_LIST_CHANGED)
            notice.id = None
            await link.notify(notice, exchange(notice, session="one"))
            await link.end(client)
            assert [m for m, _ in upstream.seen] == ["server/discover"]
        finally:
            await link.close()


async def test_a_handshake_era_upstream_has_no_listen(http: aiohttp.ClientSession) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        listen = call(Operation.LISTEN, notifications={})

        async def drain() -> list[Event]:
            return [event async for event in link.listen(listen, exchange(listen))]

        try:
            with pytest.raises(Failure) as raised:
                await drain()
            assert raised.value.kind is FailureKind.INTERNAL
        finally:
            await link.close()


async def test_a_stateless_upstreams_listen_yields_its_events_until_it_ends(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        listen = call(Operation.LISTEN, notifications={"toolsListChanged": True})
        try:
            async with asyncio.timeout(WITHIN):
                events = [event async for event in link.listen(listen, exchange(listen))]
            assert [e.method for e in events] == [
                "notifications/subscriptions/acknowledged",
                "notifications/tools/list_changed",
            ]
            assert [m for m, _ in upstream.seen] == ["server/discover", "subscriptions/listen"]
        finally:
            await link.close()


async def test_a_new_upstream_session_is_announced_by_its_scope(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        opened: asyncio.Queue[str] = asyncio.Queue()

        async def announced(scope: str) -> None:
            await opened.put(scope)

        link.on_session(announced)
        try:
            client = exchange(call(), session="one")
            assert await link.open(client) is None
            async with asyncio.timeout(WITHIN):
                assert await opened.get() == link.scope(client) == "s:one"
            # Found again, not opened again: nothing more is announced.
            assert await link.open(client) is None
            upstream.sessions.clear()  # the server restarted: opened anew, announced
            assert echoed(await link.handle(client.call, client)) == "echo: hi"
            async with asyncio.timeout(WITHIN):
                assert await opened.get() == "s:one"
            assert opened.empty()
        finally:
            await link.close()


# --------------------------------------------------------------- roots, per client


def rooted_exchange(roots: list[str], asked: list[Any], operation: Operation) -> Exchange:
    """A stateless client that declared roots, and answers ``roots/list`` with these."""
    the_call = call(operation, capabilities={"roots": {}})

    async def ask(question: Ask) -> Answer:
        asked.append(question.kind)
        return Answer(result={"roots": [{"uri": uri} for uri in roots]})

    return replace(exchange(the_call), ask=ask)


async def test_a_server_never_seen_asking_roots_is_never_asked_for_them(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        asked: list[Any] = []
        try:
            for roots in (["file:///a"], ["file:///b"]):
                client = rooted_exchange(roots, asked, Operation.TOOLS_CALL)
                assert echoed(await link.handle(client.call, client)) == "echo: hi"
            assert asked == []  # the server asked nothing: nor did the gateway
            a, b = upstream.methods("tools/call")
            assert a == b  # one pool: it holds nobody's roots
            assert link.roots_mode == "unseen"
        finally:
            await link.close()


async def test_stateless_clients_with_other_roots_never_share_a_pool(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url, roots="per-session")
        asked: list[Any] = []
        try:
            for roots in (["file:///a"], ["file:///b"], ["file:///a"]):
                client = rooted_exchange(roots, asked, Operation.TOOLS_CALL)
                assert echoed(await link.handle(client.call, client)) == "echo: hi"
            # Each call asked its client for its roots first (one round each).
            assert asked == [AskKind.LIST_ROOTS] * 3
            a, b, a_again = upstream.methods("tools/call")
            assert a == a_again and a != b
            # A listing cannot carry a round: it runs on a pool holding no roots.
            listing = rooted_exchange(["file:///a"], asked, Operation.TOOLS_LIST)
            assert isinstance(await link.handle(listing.call, listing), Value)
            assert len(asked) == 3
            assert upstream.methods("tools/list")[0] not in (a, b)
            assert link.session_count() == 3
            # Roots changed: the client's next call brings its roots anyway.
            notice = rooted_exchange([], asked, Operation.ROOTS_LIST_CHANGED)
            notice.call.id = None
            await link.notify(notice.call, notice)
            assert upstream.methods("notifications/roots/list_changed") == []
        finally:
            await link.close()


# ------------------------------------------------------------ what tools say


async def test_a_stateless_upstreams_tool_is_read_once_and_its_headers_sent(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        try:
            declared = await link.declared_headers(call(), exchange(call()))
            assert declared == ECHO_HEADERS
            assert await link.declared_headers(call(name="nope"), exchange(call())) is None
            assert await link.declared_headers(call(Operation.PING), exchange(call())) is None
            assert len(upstream.methods("tools/list")) == 1
            arguments = {"text": "hi", "region": "eu"}
            assert echoed(await link.handle(call(arguments=arguments), exchange(call()))) == (
                "echo: hi"
            )
            sent = upstream.headers[-1]
            assert sent["Mcp-Param-Region"] == "eu"
            assert sent["Mcp-Method"] == "tools/call" and sent["Mcp-Name"] == "echo"
            # Another principal's list is its own: read again for it.
            assert await link.declared_headers(call(), exchange(call(), "bob")) == ECHO_HEADERS
            assert len(upstream.methods("tools/list")) == 2
            assert await link.task_support(call(), exchange(call())) is None
        finally:
            await link.close()


async def test_a_handshake_eras_list_is_read_on_a_session_of_the_gateways_own(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("handshake") as upstream:
        link = await linked(http, upstream.url)
        try:
            client = exchange(call(capabilities={"sampling": {}}), session="one")
            assert await link.open(client) is None
            assert await link.declared_headers(client.call, client) == ECHO_HEADERS
            listed_on = upstream.methods("tools/list")
            assert len(listed_on) == 1
            # Not the client's session: one that declares nothing to ask with.
            assert upstream.declared[str(listed_on[0])] == {}
            _probe, own_session, *others = upstream.opened
            assert upstream.declared[own_session] == {"sampling": {}}
            assert others == listed_on
            # Whatever a client's own tools/list says is learnt too: no further read.
            assert isinstance(await link.handle(call(Operation.TOOLS_LIST), client), Value)
            assert (
                await link.declared_headers(client.call, exchange(call(), "alice")) == ECHO_HEADERS
            )
            assert len(upstream.methods("tools/list")) == 2
        finally:
            await link.close()


async def test_forgetting_the_verdict_forgets_what_tools_said(
    http: aiohttp.ClientSession,
) -> None:
    async with Upstream("stateless") as upstream:
        link = await linked(http, upstream.url)
        try:
            assert await link.declared_headers(call(), exchange(call())) == ECHO_HEADERS
            link.forget()
            assert link.verdict is None
            assert await link.declared_headers(call(), exchange(call())) == ECHO_HEADERS
            assert len(upstream.methods("server/discover")) == 2
            assert len(upstream.methods("tools/list")) == 2
        finally:
            await link.close()
