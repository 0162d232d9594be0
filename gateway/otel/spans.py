"""The gateway's spans: one server span per inbound request, one client span per
request upstream, and what a parked call's rounds leave on them.

A server span is the current span while its call runs, so the upstream
request it makes (a task it starts included: a parked call's upstream side)
hangs under it; so is a client span while its request is out.  Both spans'
ids are bound to the log context meanwhile (every log line of a call carries
them) and the finished call's record carries them to the latency histogram
(exemplars).  Questions the upstream asks are events on the client span; a
round handed out as ``input_required`` and the time a retry's call waited
parked are events on the server spans.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from gateway.core import Answer, Ask, Asker, Call, Exchange, Failure, InputRequired, Outcome, Value
from gateway.otel import names
from gateway.otel.context import (
    SEALED_AT_CLAIM,
    TRACEPARENT_CLAIM,
    outgoing,
    parent_of,
    traceparent,
)
from gateway.protocol import Adapter
from gateway.upstream.carriers.base import Carrier, CarrierError

A = TypeVar("A")
S = TypeVar("S")
R = TypeVar("R")
C = TypeVar("C")

# Longest status description kept (an error's message).
MAX_DESCRIPTION = 256


class Spans:
    """The :class:`gateway.core.tracing.Tracing` hooks, on one OpenTelemetry tracer."""

    def __init__(self, tracer: trace.Tracer, propagator: TextMapPropagator) -> None:
        self.tracer = tracer
        self.propagator = propagator
        # The carrier keys it reads and writes (traceparent, tracestate, baggage).
        self.fields = frozenset(propagator.fields)

    # ------------------------------------------------------------ inbound

    async def serve(
        self,
        run: Callable[[A, Call, S], Awaitable[R]],
        route: Any,
        arrival: Any,
        call: Call,
        send: S,
    ) -> R:
        """The call as a server span (``route``: a transport Route; ``arrival``: the
        message it came in, an inbound.Arrival)."""
        preamble = arrival.preamble
        claims = route.backend.forwarder.sealer.peek(call.state) if call.state else None
        parent = parent_of(self.propagator, self.fields, call.meta, preamble.headers, claims)
        adapter: Adapter = arrival.adapter
        attributes = names.call_attributes(call)
        attributes.update(names.transport_attributes(preamble.transport))
        attributes[names.PROTOCOL_VERSION] = adapter.version  # the client's revision
        attributes[names.ROUTE] = route.path
        attributes[names.PRINCIPAL] = arrival.principal
        session = arrival.session
        if session is not None and adapter.has_handshake:
            attributes[names.SESSION_ID] = names.session_digest(session.id)
        upstream = route.backend.upstream_revision
        if upstream is not None:
            attributes[names.UPSTREAM_REVISION] = upstream
        span = self.tracer.start_span(
            names.span_name(call),
            context=parent.context,
            kind=SpanKind.SERVER,
            attributes=attributes,
            links=parent.links,
        )
        if claims is not None:
            _retried(span, claims)
        with _current(span, parent.context):
            try:
                reply = await run(arrival, call, send)
            except BaseException as exc:
                _failed(span, exc)
                raise
            _answered(span, call, getattr(reply, "message", None))
            return reply

    def observe(self, record: dict[str, Any]) -> None:
        """The finished call's record (route, revisions, outcome) on its server span;
        the span's ids in the record (its log line, the histogram's exemplar)."""
        span = trace.get_current_span()
        context = span.get_span_context()
        if not context.is_valid:
            return
        outcome = record.get("outcome")
        if isinstance(outcome, str):
            span.set_attribute(names.OUTCOME, names.OUTCOMES.get(outcome, outcome))
        upstream = record.get("upstream_revision")
        if isinstance(upstream, str):
            span.set_attribute(names.UPSTREAM_REVISION, upstream)
        if context.trace_flags.sampled:  # exported, so worth pointing at
            record["trace_id"] = f"{context.trace_id:032x}"
            record["span_id"] = f"{context.span_id:016x}"

    def stamp(self, claims: dict[str, Any]) -> None:
        """The current span in a requestState being sealed (its retry joins that trace,
        or links to it), and the round handed out, on that span."""
        span = trace.get_current_span()
        context = span.get_span_context()
        if not context.is_valid:
            return
        claims[TRACEPARENT_CLAIM] = traceparent(context)
        claims[SEALED_AT_CLAIM] = round(time.time(), 3)
        event: dict[str, Any] = {names.STATE: str(claims.get("k"))}
        if isinstance(claims.get("n"), int):
            event[names.ROUND] = claims["n"]
        span.add_event(names.HANDED_OUT, event)

    # ----------------------------------------------------------- upstream

    async def upstream(
        self,
        run: Callable[[Call, Exchange, C, Mapping[str, str] | None, int], Awaitable[Outcome]],
        channel: C,
        call: Call,
        exchange: Exchange,
        extra_headers: Mapping[str, str] | None,
        upstream_id: int,
    ) -> Outcome:
        """One request upstream as a client span (``channel``: an upstream Channel or
        session), its context passed on in ``_meta`` and in the headers."""
        held: Any = channel
        adapter: Adapter = held.adapter
        attributes = names.call_attributes(call)
        attributes[names.REQUEST_ID] = str(upstream_id)
        attributes[names.PROTOCOL_VERSION] = adapter.version  # the upstream's revision
        attributes[names.CLIENT_REVISION] = call.client.protocol_version
        attributes[names.ROUTE] = exchange.route
        attributes[names.PRINCIPAL] = exchange.principal
        attributes.update(_carrier_attributes(held.carrier))
        if held.session_id is not None:
            attributes[names.SESSION_ID] = names.session_digest(held.session_id)
        span = self.tracer.start_span(
            names.span_name(call), kind=SpanKind.CLIENT, attributes=attributes
        )
        context = trace.set_span_in_context(span)
        injected = outgoing(self.propagator, context)
        call = replace(call, meta={**_without(call.meta, self.fields), **injected})
        headers = {**(extra_headers or {}), **injected}
        exchange = self._passed_on(span, exchange, injected)
        with _current(span, context):
            try:
                outcome = await run(call, exchange, channel, headers, upstream_id)
            except BaseException as exc:
                _failed(span, exc)
                raise
            _outcome(span, adapter, outcome)
            return outcome

    def _passed_on(self, span: Span, exchange: Exchange, injected: Mapping[str, str]) -> Exchange:
        """The exchange the upstream request goes out with: its questions recorded on
        the span; none of the client's own trace context left in the forwarded headers
        beside the span's (the injected headers replace what they name, the rest goes)."""
        recording = span.is_recording()
        forwarded = exchange.forward_headers
        if any(name in forwarded and name not in injected for name in self.fields):
            exchange = replace(exchange, forward_headers=_without(forwarded, self.fields))
        if recording and exchange.ask is not None:
            exchange = exchange.routed(_asking(span, exchange.ask), exchange.emit)
        return exchange


def _without(mapping: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in names}


class _current:
    """``span`` is the current span (and its ids in the log context) inside; ended
    on the way out.  Entered and left in one coroutine (the context tokens are
    reset in the task that set them), around its awaits."""

    def __init__(self, span: Span, context: otel_context.Context) -> None:
        self.span = span
        self.context = trace.set_span_in_context(span, context)

    def __enter__(self) -> None:
        ids = self.span.get_span_context()
        self.token = otel_context.attach(self.context)
        self.logged = structlog.contextvars.bind_contextvars(
            trace_id=f"{ids.trace_id:032x}", span_id=f"{ids.span_id:016x}"
        )

    def __exit__(self, *exc: object) -> None:
        structlog.contextvars.reset_contextvars(**self.logged)
        otel_context.detach(self.token)
        self.span.end()


def _retried(span: Span, claims: Mapping[str, Any]) -> None:
    """A retry: how long its call waited since the round was handed out."""
    sealed = claims.get(SEALED_AT_CLAIM)
    if not isinstance(sealed, int | float):
        return
    event: dict[str, Any] = {
        names.PARKED_MS: max(0.0, round((time.time() - sealed) * 1000, 3)),
        names.STATE: str(claims.get("k")),
    }
    if isinstance(claims.get("n"), int):
        event[names.ROUND] = claims["n"]
    span.add_event(names.RETRY, event)


def _answered(span: Span, call: Call, message: Any) -> None:
    """The answer the client got, as the span's error (a JSON-RPC error, or a tool's
    ``isError`` result)."""
    if not isinstance(message, dict):
        return
    error = message.get("error")
    if isinstance(error, dict):
        code = str(error.get("code"))
        span.set_attribute(names.ERROR_TYPE, code)
        span.set_attribute(names.STATUS_CODE, code)
        span.set_status(Status(StatusCode.ERROR, str(error.get("message"))[:MAX_DESCRIPTION]))
        return
    result = message.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        span.set_attribute(names.ERROR_TYPE, "tool_error")
        span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))


def _outcome(span: Span, adapter: Adapter, outcome: Outcome) -> None:
    """What the upstream answered, on its client span."""
    if isinstance(outcome, Value):
        span.set_attribute(names.OUTCOME, "ok")
        if outcome.result.get("isError") is True:
            span.set_attribute(names.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
    elif isinstance(outcome, InputRequired):
        span.set_attribute(names.OUTCOME, "input_required")
        methods = sorted({ask.method for ask in outcome.asks.values()})
        span.add_event(names.HANDED_OUT, {names.METHOD: methods})
    elif isinstance(outcome, Failure):
        code = str(adapter.error_code(outcome))
        span.set_attribute(names.OUTCOME, outcome.kind.value)
        span.set_attribute(names.ERROR_TYPE, code)
        span.set_attribute(names.STATUS_CODE, code)
        span.set_status(Status(StatusCode.ERROR, outcome.message[:MAX_DESCRIPTION]))


def _failed(span: Span, exc: BaseException) -> None:
    """The call ended by an exception: cancelled, the upstream unreachable, a bug."""
    if isinstance(exc, CarrierError):
        kind = "timeout" if exc.timeout else "upstream_unavailable"
        span.set_attribute(names.OUTCOME, kind)
        span.set_attribute(names.ERROR_TYPE, kind if exc.status is None else str(exc.status))
    elif isinstance(exc, Failure):
        span.set_attribute(names.OUTCOME, exc.kind.value)
        span.set_attribute(names.ERROR_TYPE, exc.kind.value)
    else:
        kind = "cancelled" if not isinstance(exc, Exception) else type(exc).__qualname__
        span.set_attribute(names.OUTCOME, kind)
        span.set_attribute(names.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, str(exc)[:MAX_DESCRIPTION]))


def _carrier_attributes(carrier: Carrier) -> dict[str, Any]:
    """``network.*`` and ``server.*`` of the carrier a request goes by."""
    where = carrier.where()
    if where.transport == "pipe":
        return {names.NETWORK_TRANSPORT: "pipe"}
    attributes: dict[str, Any] = {names.NETWORK_TRANSPORT: "tcp", names.NETWORK_PROTOCOL: "http"}
    if where.host is not None:
        attributes[names.SERVER_ADDRESS] = where.host
        if where.port is not None:
            attributes[names.SERVER_PORT] = where.port
    return attributes


def _asking(span: Span, ask: Asker) -> Asker:
    """``ask``, each question and its answer an event on the client span."""

    async def asking(question: Ask) -> Answer | None:
        span.add_event(names.ASKED, {names.METHOD: question.method})
        started = time.monotonic()
        answer = await ask(question)
        span.add_event(
            names.ANSWERED,
            {
                names.METHOD: question.method,
                names.ANSWER: _answer_kind(answer),
                names.WAITED_MS: round((time.monotonic() - started) * 1000, 3),
            },
        )
        return answer

    return asking


def _answer_kind(answer: Answer | None) -> str:
    """``accept``/``decline``/``cancel`` (an elicitation), ``result``, ``error``, or
    ``none`` (nobody could be asked)."""
    if answer is None:
        return "none"
    if answer.error is not None:
        return "error"
    action = (answer.result or {}).get("action")
    return action if isinstance(action, str) else "result"
