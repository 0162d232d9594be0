"""A request's ids on its log lines, from one context variable set once a request:
under the line's own fields and whatever a span binds later, gone once reset."""

from __future__ import annotations

import contextvars
import io
import json
from collections.abc import Iterator

import pytest
import structlog

from gateway.core.log_context import REQUEST_CONTEXT, request_field
from gateway.observability import configure_logging
from gateway.transport.request_ids import RequestIds

TRACE = "a" * 32


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    yield out
    configure_logging("info", "json")


def test_a_requests_ids_reach_its_lines_below_a_spans_and_leave_with_it(
    lines: io.StringIO,
) -> None:
    log = structlog.get_logger("gateway.test")
    headers = {"x-request-id": "req-1", "traceparent": f"00-{TRACE}-{'b' * 16}-01"}
    request_id, token = RequestIds().bind(headers)
    assert request_id == "req-1" == request_field("request_id")
    log.info("one")
    log.info("own", request_id="mine")  # a line's own field wins
    bound = structlog.contextvars.bind_contextvars(trace_id="c" * 32)  # a span's
    log.info("two")
    structlog.contextvars.reset_contextvars(**bound)
    REQUEST_CONTEXT.reset(token)
    log.info("three")
    one, own, two, three = (json.loads(line) for line in lines.getvalue().splitlines())
    assert (one["request_id"], one["trace_id"], one["span_id"]) == ("req-1", TRACE, "b" * 16)
    assert own["request_id"] == "mine"
    assert (two["request_id"], two["trace_id"]) == ("req-1", "c" * 32)
    assert "request_id" not in three and "trace_id" not in three
    assert request_field("request_id") is None


def test_an_insane_request_id_is_replaced_by_one_of_ours() -> None:
    ids = RequestIds()
    first, token = ids.bind({"x-request-id": "x" * 500})
    REQUEST_CONTEXT.reset(token)
    # (In a context of its own, as the lane's task has: nothing to reset.)
    second = contextvars.copy_context().run(ids.bind_for_task, {"x-request-id": "bad id\n"})
    assert first != second and len(first) == 32 and first.isalnum()
