"""The tracer provider the ``OTEL_*`` environment describes: imported only when
traces were asked for (it is the one place that imports the OpenTelemetry SDK)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import get_global_textmap
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from gateway import __version__
from gateway.otel.spans import Spans

# Unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise.
DEFAULT_SERVICE = "mcp-gateway"
# The longest attribute value kept, unless OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT says:
# clients choose tool names and URIs, and a 4 MB one must not become a 4 MB span.
MAX_ATTRIBUTE_LENGTH = 1024
LENGTH_LIMITS = ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")


def build(environ: Mapping[str, str]) -> tuple[Spans, Callable[[], None], dict[str, Any]]:
    """The hooks, how to shut the provider down, and what was set up (for the log)."""
    resource = Resource.create({SERVICE_VERSION: __version__})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    limited = any(environ.get(name) for name in LENGTH_LIMITS)
    provider = TracerProvider(
        resource=resource,
        # Shut down by gateway.otel.stop, within a bound (the SDK's own hook waits 30 s).
        shutdown_on_exit=False,
        span_limits=SpanLimits(max_attribute_length=None if limited else MAX_ATTRIBUTE_LENGTH),
    )
    exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    spans = Spans(provider.get_tracer("gateway", __version__), get_global_textmap())
    described = {
        "endpoint": getattr(exporter, "_endpoint", None),
        "service": resource.attributes.get(SERVICE_NAME),
        "sampler": provider.sampler.get_description(),
    }
    return spans, provider.shutdown, described
