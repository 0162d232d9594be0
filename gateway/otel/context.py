"""Trace context across eras: where a request's comes from, where the upstream's goes.

A request may bring its trace context in its ``params._meta`` (``traceparent``,
``tracestate``, ``baggage``: SEP-414, final in the stateless revision and what
OpenTelemetry's MCP conventions propagate in any), in the same-named HTTP headers, or
in neither.  The server span's parent is the ``_meta`` context, else the
headers', else (a retry) the first request's span the sealed ``requestState``
names; the others become links.  Upstream, the client span's context replaces
the client's in ``_meta`` (every transport, stdio included) and in the headers
(HTTP): the upstream's spans are the gateway's children.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Link, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.otel import names

# The sealed requestState's claims the gateway stamps (gateway.bridge.state).
TRACEPARENT_CLAIM = "t"
SEALED_AT_CLAIM = "ts"

_W3C = TraceContextTextMapPropagator()


def carrier(source: Mapping[str, Any], fields: frozenset[str]) -> dict[str, str]:
    """The propagator's fields of ``source`` that are strings (what a client put in
    ``_meta`` may be anything)."""
    found: dict[str, str] = {}
    for name in fields:
        value = source.get(name)
        if isinstance(value, str):
            found[name] = value
    return found


def span_of(context: Context) -> SpanContext:
    return trace.get_current_span(context).get_span_context()


def traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


@dataclass
class Parent:
    """Where a server span hangs: its parent context and its links."""

    context: Context = field(default_factory=Context)
    links: list[Link] = field(default_factory=list)
    # The first request of a retried call, when its requestState named it.
    first: SpanContext | None = None


def parent_of(
    propagator: TextMapPropagator,
    fields: frozenset[str],
    meta: Mapping[str, Any],
    headers: Mapping[str, str],
    claims: Mapping[str, Any] | None,
) -> Parent:
    """The server span's parent and links (see the module); ``fields``: the
    propagator's carrier keys."""
    candidates: list[tuple[str, Context]] = []
    from_meta = carrier(meta, fields)
    if from_meta:
        candidates.append(("meta", propagator.extract(from_meta)))
    from_headers = carrier(headers, fields)
    if from_headers:
        candidates.append(("http", propagator.extract(from_headers)))
    first: SpanContext | None = None
    stamped = claims.get(TRACEPARENT_CLAIM) if claims is not None else None
    if isinstance(stamped, str):
        first_context = _W3C.extract({"traceparent": stamped})
        first = span_of(first_context)
        candidates.append(("first_request", first_context))
    parent = Parent(first=first if first is not None and first.is_valid else None)
    chosen: SpanContext | None = None
    for kind, context in candidates:
        span = span_of(context)
        if not span.is_valid:
            continue
        if chosen is None:
            chosen, parent.context = span, context
        elif span.span_id != chosen.span_id or span.trace_id != chosen.trace_id:
            parent.links.append(Link(span, {names.LINK: kind}))
    return parent


def outgoing(propagator: TextMapPropagator, context: Context) -> dict[str, str]:
    """The client span's context as the upstream receives it."""
    injected: dict[str, str] = {}
    propagator.inject(injected, context=context)
    return injected
