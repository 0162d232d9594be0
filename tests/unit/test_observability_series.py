"""The per-call series (calls, errors, pass-through answers, latency) are kept as plain
numbers, not prometheus_client children: what a scrape reads must be what those
children would have made of the same calls, sample for sample, exemplars included."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.observability import LATENCY_BUCKETS, SUCCESS_OUTCOMES, Metrics, method_label

CALL = ["route", "method", "client_revision", "upstream_revision", "outcome"]
records = st.fixed_dictionaries(
    {
        "route": st.sampled_from(["/mcp", "/m"]),
        "method": st.sampled_from(["tools/call", "tools/list", "x/vendor"]),
        "client_revision": st.sampled_from(["2025-11-25", "2026-07-28"]),
        "upstream_revision": st.sampled_from(["2025-11-25", None]),
        "outcome": st.sampled_from(["ok", "input_required", "upstream_timeout"]),
        # On a bound, between, past the last: each bucket's edge.
        "duration_ms": st.sampled_from([0.1, 5.0, 5.000001, 249.9, 1000.0, 300000.0, 1e9]),
        "pass_through": st.booleans(),
        "trace_id": st.sampled_from([None, "t1", "t2"]),
    }
)


def _reference(calls: list[dict[str, Any]]) -> CollectorRegistry:
    registry = CollectorRegistry()
    requests = Counter("gateway_requests", "h", CALL, registry=registry)
    errors = Counter("gateway_request_errors", "h", CALL, registry=registry)
    passed = Counter("gateway_pass_through", "h", ["route"], registry=registry)
    latency = Histogram(
        "gateway_request_duration_seconds",
        "h",
        ["route", "client_revision", "upstream_revision"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    for call in calls:
        upstream = call["upstream_revision"] or "unknown"
        key = (call["route"], method_label(call["method"]), call["client_revision"])
        key += (upstream, call["outcome"])
        requests.labels(*key).inc()
        if call["outcome"] not in SUCCESS_OUTCOMES:
            errors.labels(*key).inc()
        if call["pass_through"]:
            passed.labels(call["route"]).inc()
        timed = latency.labels(call["route"], call["client_revision"], upstream)
        trace = call["trace_id"]
        exemplar = {"trace_id": trace, "span_id": "s"} if trace else None
        timed.observe(call["duration_ms"] / 1000, exemplar)
    return registry


def _samples(registry: CollectorRegistry) -> set[tuple[Any, ...]]:
    names = ("gateway_requests", "gateway_request_errors", "gateway_pass_through")
    names += ("gateway_request_duration_seconds",)
    return {
        (
            sample.name,
            tuple(sorted(sample.labels.items())),
            None if sample.name.endswith("_created") else sample.value,
            sample.exemplar.labels["trace_id"] if sample.exemplar else None,
        )
        for family in registry.collect()
        if family.name in names
        for sample in family.samples
    }


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(records, min_size=1, max_size=12))
def test_the_series_read_as_prometheus_clients_children_would(calls: list[dict[str, Any]]) -> None:
    ours = Metrics()
    for call in calls:
        record = {k: v for k, v in call.items() if v is not None}
        if "trace_id" in record:
            record["span_id"] = "s"
        ours.observe(record)
    assert _samples(ours.registry) == _samples(_reference(calls))
