"""gateway/transport/reasons.py: what a client hears of an upstream's failure."""

from __future__ import annotations

import structlog.testing

from gateway.core import Failure, FailureKind
from gateway.transport.reasons import for_client, log_refusal


def test_when_to_try_again_is_said_in_the_data_too() -> None:
    down = Failure(
        FailureKind.UPSTREAM_DOWN, "every upstream is down", headers={"Retry-After": "7"}
    )
    said = for_client(down, "/mcp", ["http://10.0.0.1:3000/mcp"])
    assert said.data == {"retryAfterSeconds": 7} and said.headers["Retry-After"] == "7"
    refused = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "POST http://10.0.0.1:3000/mcp: refused")
    said = for_client(refused, "/mcp", ["http://10.0.0.1:3000/mcp"])
    assert said.data == {"retryAfterSeconds": 5} and "10.0.0.1" not in said.message


def test_a_retry_after_that_is_no_number_of_seconds_never_breaks_the_answer() -> None:
    for value in ("Wed, 21 Oct", "\u00b2", "\u0661\u0662", "9" * 5000, "-1", ""):
        odd = Failure(FailureKind.UPSTREAM_DOWN, "down", headers={"Retry-After": value})
        assert for_client(odd, "/mcp", []).data == {"retryAfterSeconds": 5}, value


def test_a_clients_own_failure_is_left_as_it_is() -> None:
    mine = Failure(FailureKind.INVALID_PARAMS, "bad", {"field": "x"})
    assert for_client(mine, "/mcp", []) is mine


def test_a_refusal_gets_a_log_line_of_its_own_at_the_level_of_whose_fault_it_is() -> None:
    with structlog.testing.capture_logs() as logs:
        log_refusal("/r", 404, Failure(FailureKind.SESSION_NOT_FOUND, "Session not found"))
        log_refusal("/r", 503, Failure(FailureKind.UPSTREAM_UNAVAILABLE, "no target"))
    assert [(e["event"], e["log_level"], e["status"], e["route"]) for e in logs] == [
        ("refused", "info", 404, "/r"),
        ("refused", "warning", 503, "/r"),
    ]
    assert logs[1]["reason"] == "no target" and logs[1]["kind"] == "upstream_unavailable"
