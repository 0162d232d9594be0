"""gateway/protocol/upstream_failures.py: the one table of the upstream's failures."""

from __future__ import annotations

from pathlib import Path

from gateway.core import Failure, FailureKind
from gateway.protocol.upstream_failures import TABLE, markdown
from gateway.protocol.v2024_11_05 import Adapter2024_11_05
from gateway.protocol.v2026_07_28 import Adapter2026_07_28
from gateway.transport.reasons import for_client

DOCS = Path(__file__).resolve().parents[3] / "docs" / "using" / "operations.md"


def test_every_upstream_kind_is_in_the_table() -> None:
    upstream = {kind for kind in FailureKind if kind.name.startswith("UPSTREAM_")}
    assert upstream - {FailureKind.UPSTREAM_ERROR} == set(TABLE)


def test_no_advice_to_send_again_what_may_have_run() -> None:
    for kind, failure in TABLE.items():
        assert not (failure.may_have_run and failure.retry_after), kind
        told = for_client(Failure(kind, "what went wrong", headers={"Retry-After": "3"}), "/r", [])
        assert ("Retry-After" in told.headers) is (failure.retry_after is not None), kind
        if failure.may_have_run and failure.said:
            assert "may have run" in told.message


def test_each_revision_says_it_as_the_table_does() -> None:
    modern, legacy = Adapter2026_07_28(), Adapter2024_11_05()
    for kind, failure in TABLE.items():
        assert modern.http_status(Failure(kind, "x")) == failure.status
        assert legacy.http_status(Failure(kind, "x")) == 200
        assert modern.error_code(Failure(kind, "x")) == legacy.error_code(Failure(kind, "x"))
        assert legacy.error_code(Failure(kind, "x")) == failure.code


def test_the_docs_show_the_table() -> None:
    assert markdown() in DOCS.read_text(), "run: python -m gateway.protocol.upstream_failures"


def test_a_command_that_cannot_start_is_said_without_it() -> None:
    failure = Failure(
        FailureKind.UPSTREAM_NOT_STARTED,
        "its server could not be started: could not start the stdio server 'srv': ENOENT",
    )
    told = for_client(failure, "/x", ["srv"])
    assert told.message.startswith("route /x: its server could not be started; waiting will")
    assert "srv" not in told.message and "Retry-After" not in told.headers


def test_each_kind_is_told_in_the_gateways_words_with_what_a_person_can_act_on() -> None:
    refused = "POST http://10.0.0.1:3000/mcp: Cannot connect to host (Connect call failed)"
    told = for_client(Failure(FailureKind.UPSTREAM_UNAVAILABLE, refused), "/x", [])
    assert told.message.startswith(
        "route /x: its server could not be reached (connection refused); the request was not"
    ), told.message
    assert "POST" not in told.message and "10.0.0.1" not in told.message
    failed = Failure(
        FailureKind.UPSTREAM_REFUSED, "the upstream answered HTTP 503", {"status": 503}
    )
    assert (
        "its server answered with an error (HTTP 503); it was sent"
        in for_client(failed, "/x", []).message
    )


def test_a_stdio_child_that_is_gone_is_said_so() -> None:
    gone = "the stdio server is gone: unable to perform operation on <WriteUnixTransport>"
    told = for_client(Failure(FailureKind.UPSTREAM_UNAVAILABLE, gone), "/c", [])
    assert told.message.startswith("route /c: its server could not be reached (its process had")
    assert "WriteUnixTransport" not in told.message
