"""A real OTLP/HTTP trace receiver for tests: an aiohttp endpoint at ``/v1/traces``
that decodes what an OpenTelemetry exporter posts (``ExportTraceServiceRequest``,
protobuf, gzip or not) with ``opentelemetry-proto``, keeps every span, and answers
as a collector does.  Nothing of the gateway is used to read them.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class Event:
    name: str
    attributes: dict[str, Any]


@dataclass
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any]
    events: list[Event]
    links: list[Link]
    status: str
    status_message: str
    start_ns: int
    end_ns: int
    service: str
    instance: str = ""  # the resource's service.instance.id

    def event(self, name: str) -> list[Event]:
        return [e for e in self.events if e.name == name]


@dataclass
class Receiver:
    """The spans received so far; ``wait_for`` waits (bounded) until they satisfy a
    predicate."""

    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    url: str = ""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        encoding = request.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        assert request.headers.get("Content-Type") == "application/x-protobuf"
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found = self._span(span, str(resource.get("service.name")))
                    found.instance = str(resource.get("service.instance.id", ""))
                    self.spans.append(found)
        self.requests += 1
        self._changed.set()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    @staticmethod
    def _span(span: Any, service: str) -> Span:
        return Span(
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            name=span.name,
            kind=KINDS.get(span.kind, str(span.kind)),
            attributes=_attributes(span.attributes),
            events=[Event(e.name, _attributes(e.attributes)) for e in span.events],
            links=[
                Link(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                for link in span.links
            ],
            status=STATUS.get(span.status.code, str(span.status.code)),
            status_message=span.status.message,
            start_ns=span.start_time_unix_nano,
            end_ns=span.end_time_unix_nano,
            service=service,
        )

    async def wait_for(self, done: Callable[[list[Span]], bool], within: float = 15.0) -> None:
        """Until ``done(spans)`` holds; TimeoutError (naming what came) after ``within`` s."""
        try:
            async with asyncio.timeout(within):
                while not done(self.spans):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            got = [f"{s.kind} {s.name}" for s in self.spans]
            raise TimeoutError(f"spans received within {within}s: {got}") from None


# Attributes a rendered tree shows (the rest are in the test's assertions).
SHOWN = (
    "mcp.protocol.version",
    "gateway.client.protocol_version",
    "gateway.upstream.protocol_version",
    "gen_ai.tool.name",
    "mcp.session.id",
    "jsonrpc.request.id",
    "network.transport",
    "gateway.outcome",
    "error.type",
)


def render(spans: list[Span], short: Callable[[str], str] | None = None) -> str:
    """The spans as a tree, roots first by start time, children under their parent;
    ``short`` names an id as the tree shows it."""
    name_of = short or (lambda span_id: span_id[:8])
    ids = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    for span in spans:
        children.setdefault(span.parent_span_id, []).append(span)
    roots = sorted((s for s in spans if s.parent_span_id not in ids), key=lambda s: s.start_ns)
    lines: list[str] = []
    start = min((s.start_ns for s in spans), default=0)

    def walk(span: Span, depth: int) -> None:
        pad = "    " * depth
        took = (span.end_ns - span.start_ns) / 1e6
        at = (span.start_ns - start) / 1e6
        parent = f" parent={name_of(span.parent_span_id)}" if span.parent_span_id else ""
        lines.append(
            f"{pad}{span.name}  [{span.kind} span={name_of(span.span_id)}{parent}"
            f" +{at:.1f} ms, {took:.1f} ms]"
        )
        shown = {k: span.attributes[k] for k in SHOWN if k in span.attributes}
        lines.append(f"{pad}    " + " ".join(f"{k}={v}" for k, v in shown.items()))
        for link in span.links:
            lines.append(f"{pad}    link -> span={name_of(link.span_id)} {link.attributes}")
        for event in span.events:
            lines.append(f"{pad}    event {event.name} {event.attributes}")
        for child in sorted(children.get(span.span_id, []), key=lambda s: s.start_ns):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return "\n".join(lines)
