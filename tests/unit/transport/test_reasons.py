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


def _said(kind: FailureKind, message: str) -> str:
    return for_client(Failure(kind, message), "/r", []).message.split(" (request id")[0]


def test_a_failed_look_up_or_certificate_is_not_called_a_refused_connection() -> None:
    dns = (
        "the upstream is unreachable: POST https://x.example:443/mcp: ClientConnectorDNSError:"
        " Cannot connect to host x.example:443 ssl:default [Name or service not known]"
    )
    tls = (
        "the upstream is unreachable: POST https://x:443/mcp: ClientConnectorCertificateError:"
        " Cannot connect to host x:443 ssl:True [SSLCertVerificationError: CERTIFICATE_VERIFY]"
    )
    refused = (
        "the upstream is unreachable: POST http://127.0.0.1:9/mcp: ClientConnectorError:"
        " Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed]"
    )
    kind = FailureKind.UPSTREAM_UNAVAILABLE
    assert "(the host name did not resolve)" in _said(kind, dns)
    assert "(the TLS handshake failed)" in _said(kind, tls)
    assert "(connection refused)" in _said(kind, refused)


def test_an_unusable_answer_is_said_in_the_gateways_words_never_the_upstreams() -> None:
    leaky = "initialize was refused: db password for postgres@db.internal.corp; see /srv/x.yaml"
    said = _said(FailureKind.UPSTREAM_PROTOCOL, leaky)
    assert said == "route /r: its server's answer could not be used"
    said = _said(FailureKind.UPSTREAM_PROTOCOL, "unknown resultType 'db.internal.corp'")
    assert "internal" not in said and "resultType this revision does not know" in said


def test_a_bound_is_said_only_from_the_gateways_own_words() -> None:
    over = (
        "the upstream's answer was lost: the upstream's answer (70000 bytes) exceeds the"
        " route's bound of 65536 bytes (route option max_message)"
    )
    assert "(larger than the route's max_message of 65536 bytes)" in _said(
        FailureKind.UPSTREAM_LOST, over
    )
    # A child's stderr that looks like a bound is no bound of the route's.
    stderr = "its command keeps exiting (3 times); its last stderr line: limit of 7 bytes"
    assert "7 bytes" not in _said(FailureKind.UPSTREAM_NOT_STARTED, stderr)
    late = "the upstream's answer was lost: it said: exceeds the limit of 9 bytes"
    assert "9 bytes" not in _said(FailureKind.UPSTREAM_LOST, late)


def test_an_upstream_that_asked_past_the_routes_bounds_is_said_with_the_bound() -> None:
    said = _said(
        FailureKind.UPSTREAM_PROTOCOL,
        "the upstream asked 40 questions at once (questions_at_once=32)",
    )
    assert said.endswith("(it asked 40 questions at once (questions_at_once=32))")
