"""gateway.otel on its own: when the environment switches traces on, where a server
span hangs (``_meta``, headers, the sealed state), and what the hooks put on spans,
recorded by the SDK's in-memory exporter (the end-to-end evidence, with a real
OTLP receiver and a real gateway process, is tests/e2e/test_tracing.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway import otel
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
    tracing,
)
from gateway.otel import names
from gateway.otel.context import parent_of, span_of
from gateway.otel.spans import Spans
from gateway.protocol import AdapterSet
from gateway.upstream.carriers.base import Where
from gateway.upstream.carriers.stdio import StdioCarrier

TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
OTHER_SPAN = "00f067aa0ba902b7"
FIRST_SPAN = "1111111111111111"
FIELDS = frozenset(get_global_textmap().fields)


class _Pipe:
    """A carrier as the spans see it: where its messages go."""

    def where(self) -> Where:
        return Where("pipe")


def tp(trace_id: str = TRACE, span_id: str = CLIENT_SPAN) -> str:
    return f"00-{trace_id}-{span_id}-01"


# ------------------------------------------------------------ the environment


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "gw"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
    ],
)
def test_traces_are_on_only_when_the_environment_asks(
    environ: dict[str, str], wanted: bool
) -> None:
    assert otel.requested(environ) is wanted


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, None),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        # The traces' own protocol wins over the general one.
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            None,
        ),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "http/json"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "OTEL_TRACES_EXPORTER=console"),
    ],
)
def test_what_cannot_be_sent_is_named(environ: dict[str, str], why: str | None) -> None:
    found = otel.unsupported(environ)
    assert (found is None) if why is None else (found is not None and why in found)


def test_traces_asked_for_over_grpc_are_a_warning_and_stay_off() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    with structlog.testing.capture_logs() as logs:
        assert otel.start(environ) is False
    assert tracing.active is None
    assert [(e["log_level"], e["event"]) for e in logs] == [("warning", "traces not started")]
    assert "only http/protobuf" in logs[0]["reason"]


def test_started_and_stopped_the_hooks_come_and_go() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}  # no span is made
    try:
        assert otel.start(environ) is True
        assert isinstance(tracing.active, Spans)
        assert otel.start(environ) is True  # once per process
    finally:
        otel.stop(timeout=5)
    assert tracing.active is None


# ------------------------------------------------------------ the parent


def claims(span_id: str = FIRST_SPAN) -> dict[str, Any]:
    return {"k": "parked", "n": 1, "t": tp(span_id=span_id), "ts": time.time()}


def ids(context: Any) -> tuple[str, str]:
    span = span_of(context)
    return f"{span.trace_id:032x}", f"{span.span_id:016x}"


def test_meta_is_the_parent_and_the_headers_a_link() -> None:
    found = parent_of(
        get_global_textmap(),
        FIELDS,
        {"traceparent": tp()},
        {"traceparent": tp(span_id=OTHER_SPAN)},
        None,
    )
    assert ids(found.context) == (TRACE, CLIENT_SPAN)
    assert [
        (f"{link.context.span_id:016x}", dict(link.attributes or {})) for link in found.links
    ] == [(OTHER_SPAN, {names.LINK: "http"})]


def test_the_header_alone_is_the_parent_and_the_same_context_twice_is_no_link() -> None:
    found = parent_of(get_global_textmap(), FIELDS, {}, {"traceparent": tp()}, None)
    assert ids(found.context) == (TRACE, CLIENT_SPAN) and found.links == []
    both = parent_of(
        get_global_textmap(), FIELDS, {"traceparent": tp()}, {"traceparent": tp()}, None
    )
    assert ids(both.context) == (TRACE, CLIENT_SPAN) and both.links == []


def test_a_retry_without_context_hangs_under_the_first_request() -> None:
    found = parent_of(get_global_textmap(), FIELDS, {}, {}, claims())
    assert ids(found.context) == (TRACE, FIRST_SPAN) and found.links == []


def test_a_retry_with_context_links_the_first_request() -> None:
    found = parent_of(get_global_textmap(), FIELDS, {}, {"traceparent": tp()}, claims())
    assert ids(found.context) == (TRACE, CLIENT_SPAN)
    assert [f"{link.context.span_id:016x}" for link in found.links] == [FIRST_SPAN]
    assert found.first is not None and f"{found.first.span_id:016x}" == FIRST_SPAN


@pytest.mark.parametrize(
    "meta",
    [
        {"traceparent": 42},
        {"traceparent": ["00-x"]},
        {"traceparent": "00-zz-yy-01"},
        {"traceparent": tp(trace_id="0" * 32)},
        {"traceparent": tp(span_id="0" * 16)},
    ],
)
def test_a_malformed_meta_context_is_passed_over(meta: dict[str, Any]) -> None:
    found = parent_of(get_global_textmap(), FIELDS, meta, {"traceparent": tp()}, None)
    assert ids(found.context) == (TRACE, CLIENT_SPAN) and found.links == []


def test_with_no_context_at_all_the_span_is_a_root() -> None:
    found = parent_of(get_global_textmap(), FIELDS, {"traceparent": "nonsense"}, {}, {"k": "again"})
    assert not span_of(found.context).is_valid and found.links == []


# ------------------------------------------------------------ names


def call(method: str = "tools/call", **params: Any) -> Call:
    return Call(
        id=7,
        operation=Operation.for_method(method),
        method=method,
        params=params,
        client=ClientContext("2026-07-28"),
    )


def test_span_names_follow_the_conventions_and_stay_short() -> None:
    assert names.span_name(call(name="greet_me")) == "tools/call greet_me"
    assert names.span_name(call("prompts/get", name="greeting")) == "prompts/get greeting"
    assert names.span_name(call("resources/read", uri="file:///a")) == "resources/read"
    assert names.span_name(call(name="x" * 500)) == "tools/call " + "x" * names.MAX_NAME
    assert names.span_name(call("v/" + "m" * 500)) == ("v/" + "m" * 500)[: names.MAX_NAME]
    # A URI is the client's data: not on the span.
    attributes = names.call_attributes(call("resources/read", uri="file:///secret?key=k"))
    assert attributes == {names.METHOD: "resources/read", names.REQUEST_ID: "7"}
    digest = names.session_digest("upstream-session")
    assert len(digest) == 32 and "upstream-session" not in digest


# ------------------------------------------------------------ the hooks


@pytest.fixture
def recorded() -> Iterator[tuple[Spans, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Spans(provider.get_tracer("test"), get_global_textmap()), exporter
    provider.shutdown()


def test_a_sealed_state_names_the_current_span_and_the_round_is_an_event(
    recorded: tuple[Spans, InMemorySpanExporter],
) -> None:
    spans, exporter = recorded
    untraced: dict[str, Any] = {"k": "parked", "n": 2}
    spans.stamp(untraced)  # no current span: nothing to name
    assert untraced == {"k": "parked", "n": 2}
    span = spans.tracer.start_span("tools/call greet_me")
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        sealed: dict[str, Any] = {"k": "parked", "n": 2}
        spans.stamp(sealed)
        record: dict[str, Any] = {"outcome": "input_required", "upstream_revision": "2025-11-25"}
        spans.observe(record)
    finally:
        otel_context.detach(token)
        span.end()
    context = span.get_span_context()
    flags = int(context.trace_flags)
    assert sealed["t"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    assert abs(sealed["ts"] - time.time()) < 60
    assert record["trace_id"] == f"{context.trace_id:032x}"
    assert record["span_id"] == f"{context.span_id:016x}"
    (done,) = exporter.get_finished_spans()
    assert [(e.name, dict(e.attributes or {})) for e in done.events] == [
        (names.HANDED_OUT, {names.STATE: "parked", names.ROUND: 2})
    ]
    assert done.attributes is not None
    assert done.attributes[names.OUTCOME] == "input_required"
    assert done.attributes[names.UPSTREAM_REVISION] == "2025-11-25"


@dataclass
class Channel:
    adapter: Any
    carrier: Any
    session_id: str | None = "upstream-session"


# What the client span of a tools/call the upstream refused (-32601) carries.
CLIENT_SPAN_OF_A_REFUSED_CALL = {
    names.METHOD: "tools/call",
    names.REQUEST_ID: "12",
    names.OPERATION_NAME: "execute_tool",
    names.TOOL_NAME: "greet_me",
    names.PROTOCOL_VERSION: "2025-11-25",
    names.CLIENT_REVISION: "2026-07-28",
    names.ROUTE: "/mcp",
    names.PRINCIPAL: "p-digest",
    names.NETWORK_TRANSPORT: "pipe",
    names.SESSION_ID: names.session_digest("upstream-session"),
    names.OUTCOME: "unknown_method",
    names.ERROR_TYPE: "-32601",
    names.STATUS_CODE: "-32601",
}


async def test_upstream_the_client_span_replaces_the_clients_context(
    recorded: tuple[Spans, InMemorySpanExporter],
) -> None:
    spans, exporter = recorded
    legacy = AdapterSet.default().by_version["2025-11-25"]
    channel = Channel(legacy, StdioCarrier(["true"]))
    asked = Ask(AskKind.ELICIT, {"message": "name?"})
    seen: dict[str, Any] = {}

    async def ask(question: Ask) -> Answer | None:
        return Answer(result={"action": "decline"})

    async def run(
        sent: Call, exchange: Exchange, chan: Channel, headers: Mapping[str, str] | None, id_: int
    ) -> Outcome:
        seen.update(meta=sent.meta, headers=dict(headers or {}), forwarded=exchange.forward_headers)
        assert exchange.ask is not None
        await exchange.ask(asked)
        seen["current"] = trace.get_current_span().get_span_context()
        seen["logged"] = structlog.contextvars.get_contextvars()
        return Failure(FailureKind.UNKNOWN_METHOD, "no such tool")

    client_call = call(name="greet_me")
    client_call.meta = {"traceparent": tp(), "baggage": "k=v", "vendor/x": 1}
    exchange = Exchange(
        call=client_call,
        route="/mcp",
        profile=ServerProfile(),
        principal="p-digest",
        forward_headers={"authorization": "Bearer t", "traceparent": tp(), "baggage": "k=v"},
        ask=ask,
    )
    outcome = await spans.upstream(run, channel, client_call, exchange, {"Mcp-Name": "x"}, 12)
    assert isinstance(outcome, Failure)
    (done,) = exporter.get_finished_spans()
    flags = int(done.context.trace_flags)
    ours = f"00-{done.context.trace_id:032x}-{done.context.span_id:016x}-{flags:02x}"
    # Ours alone, in _meta and the headers; the client's own context left out.
    assert seen["meta"] == {"vendor/x": 1, "traceparent": ours}
    assert seen["headers"] == {"Mcp-Name": "x", "traceparent": ours}
    assert seen["forwarded"] == {"authorization": "Bearer t"}
    assert seen["current"] == done.context
    assert seen["logged"]["span_id"] == f"{done.context.span_id:016x}"
    assert done.kind is trace.SpanKind.CLIENT and done.name == "tools/call greet_me"
    assert dict(done.attributes or {}) == CLIENT_SPAN_OF_A_REFUSED_CALL
    assert done.status.status_code is trace.StatusCode.ERROR
    assert [e.name for e in done.events] == [names.ASKED, names.ANSWERED]
    assert dict(done.events[1].attributes or {})[names.ANSWER] == "decline"


async def test_an_upstream_that_cannot_be_reached_ends_its_span_in_error(
    recorded: tuple[Spans, InMemorySpanExporter],
) -> None:
    from gateway.upstream.carriers.base import CarrierError

    spans, exporter = recorded
    legacy = AdapterSet.default().by_version["2025-11-25"]

    async def run(*args: Any) -> Outcome:
        raise CarrierError("no answer", timeout=True)

    exchange = Exchange(call=call(name="slow"), route="/mcp", profile=ServerProfile())
    with pytest.raises(CarrierError):
        await spans.upstream(run, Channel(legacy, _Pipe(), None), exchange.call, exchange, None, 3)
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {})[names.ERROR_TYPE] == "timeout"
    assert done.status.status_code is trace.StatusCode.ERROR
    assert otel_context.get_current() == otel_context.Context()  # detached again


async def test_a_value_with_is_error_is_a_tool_error(
    recorded: tuple[Spans, InMemorySpanExporter],
) -> None:
    spans, exporter = recorded
    legacy = AdapterSet.default().by_version["2025-11-25"]

    async def run(*args: Any) -> Outcome:
        return Value({"content": [], "isError": True})

    exchange = Exchange(call=call(name="fails"), route="/mcp", profile=ServerProfile())
    await spans.upstream(run, Channel(legacy, _Pipe(), None), exchange.call, exchange, None, 4)
    (done,) = exporter.get_finished_spans()
    attributes = dict(done.attributes or {})
    assert (attributes[names.OUTCOME], attributes[names.ERROR_TYPE]) == ("ok", "tool_error")


async def test_an_unsampled_call_still_passes_its_context_on_and_records_nothing() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = Spans(provider.get_tracer("test"), get_global_textmap())
    legacy = AdapterSet.default().by_version["2025-11-25"]
    seen: dict[str, Any] = {}

    async def ask(question: Ask) -> Answer | None:
        return None

    async def run(
        sent: Call, exchange: Exchange, chan: Channel, headers: Mapping[str, str] | None, id_: int
    ) -> Outcome:
        seen.update(meta=sent.meta, ask=exchange.ask, forwarded=exchange.forward_headers)
        return Value({})

    exchange = Exchange(
        call=call(name="x"),
        route="/mcp",
        profile=ServerProfile(),
        forward_headers={"traceparent": tp()},
        ask=ask,
    )
    await spans.upstream(run, Channel(legacy, _Pipe(), None), exchange.call, exchange, None, 1)
    assert exporter.get_finished_spans() == ()
    flags = int(seen["meta"]["traceparent"].rsplit("-", 1)[1], 16)
    assert not flags & 1  # not sampled, and the upstream is told so
    assert seen["ask"] is ask  # no events to record: asked as it was
    assert seen["forwarded"] == {"traceparent": tp()}  # replaced by the injected header
    provider.shutdown()
