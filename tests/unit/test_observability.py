"""What a client wrote cannot write the log (issue 37, item 3): control characters are
escaped in every log format, and OpenTelemetry's warnings that echo a request's trace
context become the gateway's own fixed line."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from gateway.observability import configure_logging

FORGED = "x=1\r\n2026-12-05T00:00:00Z [info     ] FORGED admin login ok user=root"


@pytest.fixture(autouse=True)
def restore_logging() -> object:
    yield None
    configure_logging("info", "json")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_line_break_in_any_field_or_message_stays_on_its_line(fmt: str) -> None:
    out = io.StringIO()
    configure_logging("info", fmt, stream=out)
    structlog.get_logger("gateway.test").warning("call", method=FORGED)
    logging.getLogger("some.library").warning("bad input %s", FORGED)  # a library's own line
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert not any(line.lstrip().startswith("2026-12-05T00:00:00Z") for line in lines)
    if fmt == "json":
        assert all(json.loads(line) for line in lines)


def test_opentelemetry_warnings_about_a_trace_context_never_echo_it() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    logging.getLogger("opentelemetry.trace.span").warning(
        "Invalid key/value pair (%s, %s) found.", "client", "wrote-this"
    )
    assert out.getvalue() == ""  # a debug line now, and the level is info
    configure_logging("debug", "json", stream=out)
    logging.getLogger("opentelemetry.trace.span").warning("Invalid key (%s)", "wrote-this")
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert record["level"] == "debug" and "wrote-this" not in line
