"""OpenTelemetry traces, end to end: `gateway serve` as a real process with the
standard OTEL_* environment pointing at a real OTLP/HTTP receiver (an aiohttp
endpoint decoding the exporter's protobuf, tests/e2e/otlp_receiver.py).

A 2026-07-28 client calls a 2025-11-25 upstream's tool that asks for the user's
name mid-call (one elicitation round: `input_required`, then the retry with the
answer).  One trace comes out, in the client's trace id: a server span per
request, a client span to the upstream under the first, the MCP semantic
conventions' attributes, the round's events, and the upstream receives the
gateway's client span as its parent (HTTP headers and `_meta`; `_meta` alone
over stdio).  With the OTEL_* environment unset, nothing of it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from peers.registry import peer, require_installed

from gateway.demo import DemoServer
from tests.e2e.fake_client import (
    initialize,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import REPO, RunningGateway, gateway
from tests.e2e.otlp_receiver import Receiver, Span, render
from tests.e2e.sdk_peers import input_required, modern_call

ELICIT: dict[str, Any] = {"elicitation": {"form": {}}}
TOKEN = "Bearer tracing-secret-token-7f3a"
STDIO_SERVER = "python-1.30.0-server"  # the official Python SDK at 2025-11-25
SPANS_WITHIN = 20.0
STATE_KEY = "tracing-test-state-key-0123456789abcdef0123456789"


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def parent_of(header: str) -> tuple[str, str]:
    """The (trace id, parent span id) a traceparent names."""
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00" and int(flags, 16) & 1, header  # sampled
    return trace_id, span_id


class RecordingDemo:
    """The gateway's own demo server (2025-11-25; `greet_me` elicits a name), in this
    process, recording the trace context each request brought: its `traceparent`
    header and its `params._meta.traceparent`."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = DemoServer().app()

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            body = json.loads(await request.read() or b"null")
            if isinstance(body, dict) and "method" in body:
                params = body.get("params") or {}
                self.seen.append(
                    {
                        "method": body["method"],
                        "header": request.headers.get("traceparent"),
                        "meta": (params.get("_meta") or {}).get("traceparent"),
                        "session": request.headers.get("Mcp-Session-Id"),
                    }
                )
            return await handler(request)

        app.middlewares.append(record)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self.runner.addresses if isinstance(a, tuple))
        return f"http://127.0.0.1:{port}/mcp"

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    await found.start()
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture
def traced(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateways this test starts export to ``receiver``, in batches 50 ms apart."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")


@pytest.fixture
async def demo() -> AsyncIterator[RecordingDemo]:
    upstream = RecordingDemo()
    try:
        yield upstream
    finally:
        await upstream.close()


@pytest.fixture
async def traced_gateway(
    traced: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """Starts ``gateway serve`` on a route (``extra`` flags, ``env`` of its own),
    traced; stopped (exit 0, clean log) after.  Started and stopped in a thread: this
    loop serves the receiver (and upstream) meanwhile, so the spans flushed at exit
    arrive."""
    running: list[Any] = []

    async def start(
        route: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> RunningGateway:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)  # read as the process starts, below
        manager = gateway(route, extra=extra, tmp_path=tmp_path)
        running.append(manager)
        return await asyncio.to_thread(manager.__enter__)

    yield start
    for manager in reversed(running):
        await asyncio.to_thread(manager.__exit__, None, None, None)


def digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def by_parent(spans: list[Span], parent: str, kind: str) -> Span | None:
    return next((s for s in spans if s.parent_span_id == parent and s.kind == kind), None)


def labels(**named: Span | str) -> dict[str, str]:
    return {v if isinstance(v, str) else v.span_id: k for k, v in named.items()}


def assert_semconv(span: Span, *, revision: str, request_id: str, transport: str) -> None:
    """The MCP semantic conventions' attributes of a tools/call greeting span."""
    attributes = span.attributes
    assert attributes["mcp.method.name"] == "tools/call", attributes
    assert attributes["mcp.protocol.version"] == revision, attributes
    assert attributes["jsonrpc.request.id"] == request_id, attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool", attributes
    assert attributes["network.transport"] == transport, attributes
    assert attributes["gateway.route"] in ("/mcp", "/s"), attributes
    # mcp.protocol.version is the revision spoken on the span's side; the other
    # side's is the gateway's own attribute.
    if span.kind == "SERVER":
        assert attributes["gateway.upstream.protocol_version"] == "2025-11-25", attributes
    else:
        assert attributes["gateway.client.protocol_version"] == "2026-07-28", attributes
    principal = attributes["gateway.principal"]
    assert isinstance(principal, str) and principal.startswith("p-"), attributes
    assert TOKEN.split()[1] not in json.dumps(attributes), "a token reached a span"


async def test_a_cross_era_elicitation_round_is_one_trace(
    http: aiohttp.ClientSession,
    receiver: Receiver,
    demo: RecordingDemo,
    traced_gateway: Any,
) -> None:
    upstream = await demo.start()
    gw = await traced_gateway(f"/mcp={upstream}")
    trace_id, first, second = secrets.token_hex(16), secrets.token_hex(8), secrets.token_hex(8)
    await _elicitation_round(http, gw.url(), trace_id, first, second)

    def complete(spans: list[Span]) -> bool:
        s1 = by_parent(spans, first, "SERVER")
        return (
            s1 is not None
            and by_parent(spans, second, "SERVER") is not None
            and any(s.name == "tools/call greet_me" for s in spans if s.kind == "CLIENT")
        )

    await receiver.wait_for(complete, SPANS_WITHIN)
    spans = [s for s in receiver.spans if s.trace_id == trace_id]
    assert len(spans) == len(receiver.spans), "a span left the client's trace"
    s1, s2 = by_parent(spans, first, "SERVER"), by_parent(spans, second, "SERVER")
    assert s1 is not None and s2 is not None
    under_s1 = {s.name: s for s in spans if s.parent_span_id == s1.span_id}
    # The call upstream, and the tool list the gateway read for it first (to check
    # the client's Mcp-Param headers against the tool), on a session of its own.
    assert sorted(under_s1) == ["tools/call greet_me", "tools/list"], sorted(under_s1)
    c1 = under_s1["tools/call greet_me"]
    assert {s.kind for s in under_s1.values()} == {"CLIENT"}
    print(
        "\n"
        + render(
            spans,
            lambda i: labels(S1=s1, S2=s2, C1=c1, client1=first, client2=second).get(i, i[:8]),
        )
    )

    _assert_server_spans(s1, s2)
    _assert_client_span(c1, demo, spans, trace_id)
    await _assert_logs_and_exemplar(http, gw, trace_id, s1, s2)


async def _elicitation_round(
    http: aiohttp.ClientSession, url: str, trace_id: str, first: str, second: str
) -> None:
    """greet_me as a 2026-07-28 client, both requests in the client's trace."""
    headers = {**modern_headers("tools/call", "greet_me"), "Authorization": TOKEN}

    # Request 1 carries the client's context in the HTTP header: input_required.
    asked = await post(
        http,
        url,
        modern_call("greet_me", {}, ELICIT, id_=1),
        {**headers, "traceparent": traceparent(trace_id, first)},
    )
    requests, state = input_required(asked)
    (key,) = requests
    # Request 2, the retry, with the client's next span in the same trace.
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    done = await post(
        http,
        url,
        modern_call("greet_me", {}, ELICIT, id_=2, responses=answer, state=state),
        {**headers, "traceparent": traceparent(trace_id, second)},
    )
    assert text_of(done.result) == "Hello, Ada!"


def _assert_server_spans(s1: Span, s2: Span) -> None:
    # The server spans: named, attributed, one per request; the round's events.
    for span, request_id in ((s1, "1"), (s2, "2")):
        assert span.name == "tools/call greet_me" and span.service == "gateway-under-test"
        assert_semconv(span, revision="2026-07-28", request_id=request_id, transport="tcp")
        assert span.attributes["gen_ai.tool.name"] == "greet_me"
        assert "mcp.session.id" not in span.attributes  # a stateless client has none
    assert s1.attributes["gateway.outcome"] == "input_required"
    assert [e.attributes for e in s1.event("gateway.input_required")] == [
        {"gateway.state": "parked", "gateway.round": 1}
    ]
    assert s2.attributes["gateway.outcome"] == "ok"
    (retried,) = s2.event("gateway.retry")
    assert retried.attributes["gateway.round"] == 1 and retried.attributes["gateway.parked_ms"] > 0
    # The retry points at the request that handed out its state.
    assert [(link.span_id, link.attributes) for link in s2.links] == [
        (s1.span_id, {"gateway.link": "first_request"})
    ]


def _assert_client_span(c1: Span, demo: RecordingDemo, spans: list[Span], trace_id: str) -> None:
    # The client span: the upstream's revision and session, the question asked and
    # answered while the call was parked, its outcome.
    assert_semconv(
        c1, revision="2025-11-25", request_id=c1.attributes["jsonrpc.request.id"], transport="tcp"
    )
    assert c1.attributes["server.address"] == "127.0.0.1"
    (called,) = [seen for seen in demo.seen if seen["method"] == "tools/call"]
    # A digest of the upstream session's id, never the id itself.
    assert c1.attributes["mcp.session.id"] == digest(called["session"]), c1.attributes
    assert called["session"] not in json.dumps([s.attributes for s in spans])
    assert c1.attributes["gateway.outcome"] == "ok"
    (ask,) = c1.event("gateway.ask")
    (answered,) = c1.event("gateway.answer")
    assert ask.attributes == {"mcp.method.name": "elicitation/create"}
    assert answered.attributes["gateway.answer"] == "accept"
    assert answered.attributes["gateway.waited_ms"] > 0

    # The upstream heard the gateway's client span as its parent, both ways.
    assert parent_of(called["header"]) == (trace_id, c1.span_id), called
    assert parent_of(called["meta"]) == (trace_id, c1.span_id), called


async def _assert_logs_and_exemplar(
    http: aiohttp.ClientSession, gw: Any, trace_id: str, s1: Span, s2: Span
) -> None:
    # Every log line of the calls carries the trace, and the span it was written in.
    calls = [json.loads(line) for line in gw.log().splitlines() if '"event": "call"' in line]
    assert [(c["trace_id"], c["span_id"]) for c in calls] == [
        (trace_id, s1.span_id),
        (trace_id, s2.span_id),
    ]
    # The latency histogram's exemplar is a traced call (OpenMetrics, when asked for).
    async with http.get(
        gw.base + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    ) as response:
        metrics = await response.text()
    assert f'trace_id="{trace_id}"' in metrics, metrics[-2000:]


async def test_a_retry_that_lands_on_another_replica_links_the_first_request(
    http: aiohttp.ClientSession,
    receiver: Receiver,
    demo: RecordingDemo,
    traced_gateway: Any,
    tmp_path: Path,
) -> None:
    """Two replicas sharing a store and a state key: the retry comes in at B, which
    relays it to A, where the call is parked; A's span of the retry links the first
    request's (the sealed state names it, readable on any replica)."""
    upstream = await demo.start()
    cluster = ("--cluster", f"file://{tmp_path / 'store'}")
    replicas = []
    for name in ("replica-a", "replica-b"):
        env = {
            "GATEWAY_STATE_KEY": STATE_KEY,
            "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={name}",
        }
        replicas.append(await traced_gateway(f"/mcp={upstream}", extra=cluster, env=env))
    a, b = replicas
    trace_id, first, second = secrets.token_hex(16), secrets.token_hex(8), secrets.token_hex(8)
    headers = {**modern_headers("tools/call", "greet_me"), "Authorization": TOKEN}
    asked = await post(
        http,
        a.url(),
        modern_call("greet_me", {}, ELICIT, id_=1),
        {**headers, "traceparent": traceparent(trace_id, first)},
    )
    requests, state = input_required(asked)
    answer = {key: {"action": "accept", "content": {"name": "Bo"}} for key in requests}
    done = await post(
        http,
        b.url(),
        modern_call("greet_me", {}, ELICIT, id_=2, responses=answer, state=state),
        {**headers, "traceparent": traceparent(trace_id, second)},
    )
    assert text_of(done.result) == "Hello, Bo!"

    def complete(spans: list[Span]) -> bool:
        return by_parent(spans, first, "SERVER") is not None and (
            by_parent(spans, second, "SERVER") is not None
        )

    await receiver.wait_for(complete, SPANS_WITHIN)
    s1, s2 = by_parent(receiver.spans, first, "SERVER"), by_parent(receiver.spans, second, "SERVER")
    assert s1 is not None and s2 is not None and s1.trace_id == s2.trace_id == trace_id
    # Served where the call was parked, though it landed on B.
    assert (s1.instance, s2.instance) == ("replica-a", "replica-a")
    assert [(link.span_id, link.attributes) for link in s2.links] == [
        (s1.span_id, {"gateway.link": "first_request"})
    ]
    assert s2.attributes["gateway.outcome"] == "ok"


async def test_a_session_clients_call_names_its_session_by_digest_only(
    http: aiohttp.ClientSession,
    receiver: Receiver,
    demo: RecordingDemo,
    traced_gateway: Any,
) -> None:
    """A 2025-11-25 client with a session of its own, no trace context: each request
    is a trace of its own (a root server span), its session named by digest."""
    gw = await traced_gateway(f"/mcp={await demo.start()}")
    url = gw.url()
    session_id = await open_session(http, url, headers={"Authorization": TOKEN})
    reply = await post(
        http,
        url,
        request(5, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
        {**session_headers(session_id), "Authorization": TOKEN},
    )
    assert text_of(reply.result) == "5"

    def called(spans: list[Span]) -> bool:
        return any(s.name == "tools/call add" and s.kind == "CLIENT" for s in spans)

    await receiver.wait_for(called, SPANS_WITHIN)
    server = next(s for s in receiver.spans if s.name == "tools/call add" and s.kind == "SERVER")
    client = next(s for s in receiver.spans if s.name == "tools/call add" and s.kind == "CLIENT")
    assert server.parent_span_id == "" and client.parent_span_id == server.span_id
    assert server.trace_id == client.trace_id
    assert server.attributes["mcp.session.id"] == digest(session_id)
    assert server.attributes["mcp.protocol.version"] == "2025-11-25"
    assert server.attributes["gateway.outcome"] == "ok"
    assert "error.type" not in server.attributes and server.status == "UNSET"
    everything = json.dumps([(s.name, s.attributes, s.events) for s in receiver.spans], default=str)
    assert session_id not in everything and TOKEN.split()[1] not in everything


async def test_a_stdio_upstream_gets_the_trace_in_meta_and_a_retry_without_context_joins(
    http: aiohttp.ClientSession, receiver: Receiver, traced_gateway: Any, tmp_path: Path
) -> None:
    server = peer(STDIO_SERVER)
    require_installed(server)
    record = tmp_path / "stdin.jsonl"
    tap = [sys.executable, "-m", "tests.e2e.stdio_tap", str(record), "--"]
    gw = await traced_gateway(f"/s=stdio:{shlex.join(tap + server.server_argv('stdio'))}")
    url = gw.url("/s")
    trace_id, first = secrets.token_hex(16), secrets.token_hex(8)
    headers = {**modern_headers("tools/call", "ask_name"), "Authorization": TOKEN}

    # The client's context in `_meta` only (SEP-414), none in the headers.
    call = modern_call(
        "ask_name", {}, ELICIT, id_=1, meta={"traceparent": traceparent(trace_id, first)}
    )
    requests, state = input_required(await post(http, url, call, headers, within=20.0))
    (key,) = requests
    # The retry brings no trace context at all: it joins the first request's trace.
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    retry = modern_call("ask_name", {}, ELICIT, id_=2, responses=answer, state=state)
    done = await post(http, url, retry, headers, within=20.0)
    assert text_of(done.result) == "hello Ada"

    def complete(spans: list[Span]) -> bool:
        s1 = by_parent(spans, first, "SERVER")
        return (
            s1 is not None
            and by_parent(spans, s1.span_id, "SERVER") is not None
            and any(s.name == "tools/call ask_name" for s in spans if s.kind == "CLIENT")
        )

    await receiver.wait_for(complete, SPANS_WITHIN)
    spans = receiver.spans
    assert {s.trace_id for s in spans} == {trace_id}
    s1 = by_parent(spans, first, "SERVER")
    assert s1 is not None
    s2 = by_parent(spans, s1.span_id, "SERVER")
    c1 = next(s for s in spans if s.kind == "CLIENT" and s.name == "tools/call ask_name")
    assert s2 is not None and c1.parent_span_id == s1.span_id
    print("\n" + render(spans, lambda i: labels(S1=s1, S2=s2, C1=c1, client1=first).get(i, i[:8])))
    assert_semconv(s1, revision="2026-07-28", request_id="1", transport="tcp")
    assert_semconv(
        c1, revision="2025-11-25", request_id=c1.attributes["jsonrpc.request.id"], transport="pipe"
    )
    assert "server.address" not in c1.attributes
    assert s2.links == []  # its parent already is the first request's span
    assert s2.attributes["gateway.outcome"] == "ok"

    # What the SDK server read on its stdin: the gateway's client span, in `_meta`.
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    (called,) = [m for m in lines if m.get("method") == "tools/call"]
    assert parent_of(called["params"]["_meta"]["traceparent"]) == (trace_id, c1.span_id)


async def test_gateway_stdio_serves_a_stdio_client_as_server_spans_over_a_pipe(
    receiver: Receiver, demo: RecordingDemo, traced: None
) -> None:
    """`gateway stdio`, spawned by a 2025-11-25 stdio client whose context rides in
    `_meta`: the server span is over a pipe, the upstream hears the client span."""
    upstream = await demo.start()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "stdio", "--upstream", upstream,
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    trace_id, first = secrets.token_hex(16), secrets.token_hex(8)

    async def say(message: dict[str, Any]) -> None:
        assert child.stdin is not None
        child.stdin.write(json.dumps(message).encode() + b"\n")
        await child.stdin.drain()

    async def answer(id_: int) -> dict[str, Any]:
        assert child.stdout is not None
        while True:
            line = await asyncio.wait_for(child.stdout.readline(), 20.0)
            assert line, "gateway stdio ended its output"
            message = json.loads(line)
            if message.get("id") == id_:
                return dict(message)

    try:
        await say(initialize(1))
        assert (await answer(1))["result"]["protocolVersion"] == "2025-11-25"
        await say({"jsonrpc": "2.0", "method": "notifications/initialized"})
        meta = {"traceparent": traceparent(trace_id, first)}
        await say(request(2, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2},
                                            "_meta": meta}))  # fmt: skip
        assert text_of((await answer(2))["result"]) == "3"
    finally:
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 20.0)  # its spans are sent as it exits
    assert child.returncode == 0

    def called(spans: list[Span]) -> bool:
        return any(s.name == "tools/call add" and s.kind == "CLIENT" for s in spans)

    await receiver.wait_for(called, SPANS_WITHIN)
    server = by_parent(receiver.spans, first, "SERVER")
    assert server is not None and server.trace_id == trace_id and server.name == "tools/call add"
    assert server.attributes["network.transport"] == "pipe"
    assert server.attributes["gateway.outcome"] == "ok"
    assert server.attributes["gateway.upstream.protocol_version"] == "2025-11-25"
    assert "network.protocol.name" not in server.attributes
    assert server.attributes["mcp.protocol.version"] == "2025-11-25"
    assert len(server.attributes["mcp.session.id"]) == 32
    client = by_parent(receiver.spans, server.span_id, "CLIENT")
    assert client is not None and client.name == "tools/call add"
    (called_upstream,) = [seen for seen in demo.seen if seen["method"] == "tools/call"]
    assert parent_of(called_upstream["meta"]) == (trace_id, client.span_id)


def test_with_the_environment_unset_opentelemetry_is_never_imported() -> None:
    """Off costs nothing: the gateway's modules load, `otel.start` declines, and no
    opentelemetry module is in the process (a child, whatever this one imported)."""
    script = (
        "import sys\n"
        "from gateway import otel\nfrom gateway.core import tracing\n"
        "from gateway.process import app, cli\n"
        "from gateway.transport import inbound\n"
        "from gateway.upstream import calls\n"
        "from gateway.bridge import state\n"
        "assert otel.start() is False and tracing.active is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


FORGED = "FORGED admin login ok user=root"


@pytest.mark.parametrize("fmt", ["json", "console"])
async def test_a_clients_trace_context_never_writes_into_the_log(
    http: aiohttp.ClientSession, demo: RecordingDemo, traced_gateway: Any, fmt: str
) -> None:
    """A tracestate the OpenTelemetry SDK rejects, in the header or in ``_meta``, is
    not logged as written (the SDK warns with the value, once per request), and a CR/LF
    in it cannot forge a log line of its own in either log format."""
    gw = await traced_gateway(f"/mcp={await demo.start()}", extra=("--log-format", fmt))
    parent = traceparent(secrets.token_hex(16), secrets.token_hex(8))
    headers = {**modern_headers("tools/call", "add"), "traceparent": parent}
    rejected = "NOT A VALID MEMBER=client-wrote-this"
    meta = {"traceparent": parent, "tracestate": f"x=1,\r\n{FORGED}\n[info] {FORGED}"}
    for extra, body_meta in (({"tracestate": rejected}, None), ({}, meta)):
        reply = await post(
            http,
            gw.url(),
            modern_call("add", {"a": 2, "b": 3}, {}, meta=body_meta),
            {**headers, **extra},
        )
        assert reply.result["content"][0]["text"] == "5", reply.text
    # A method the gateway logs as it was written (an unknown one), with a line break.
    unknown = await post(
        http, gw.url(), modern_request(9, f"x/y\r\n{FORGED}"), modern_headers("x/y")
    )
    assert unknown.status in (400, 404) or unknown.error, unknown.text
    log = gw.log()
    assert "client-wrote-this" not in log
    assert not any(
        line.lstrip().startswith(("FORGED", "[info] FORGED")) for line in log.splitlines()
    )
    assert "Invalid key/value pair" not in log
