"""gateway/transport/reasons.py: what a client hears of an upstream's failure."""

from __future__ import annotations

from gateway.core import Failure, FailureKind
from gateway.transport.reasons import for_client


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
