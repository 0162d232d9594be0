"""gateway/upstream/retry.py: what may be sent again after a failure."""

from __future__ import annotations

from typing import Any

from gateway.core import Call, ClientContext, Failure, FailureKind, Operation
from gateway.upstream.carriers.base import UNREACHED
from gateway.upstream.retry import (
    NEVER_SENT,
    READ_ONLY_METHOD,
    SAFE_TOOL,
    eligible,
    safe_tool,
    send_again,
)

LOST = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "the connection was reset")
REFUSED = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "refused", UNREACHED)


def call(method: str, **extra: Any) -> Call:
    return Call(1, Operation.for_method(method), method, {"name": "t"}, ClientContext("x"), **extra)


def test_a_tool_says_it_is_safe_only_with_a_true_hint() -> None:
    assert safe_tool({"annotations": {"readOnlyHint": True}})
    assert safe_tool({"annotations": {"idempotentHint": True, "readOnlyHint": False}})
    assert not safe_tool({"annotations": {"readOnlyHint": "yes"}})
    assert not safe_tool({"annotations": {"destructiveHint": False}})
    assert not safe_tool({"annotations": None})
    assert not safe_tool({})


def test_reads_and_safe_tools_once_plain_tools_never() -> None:
    assert send_again(call("resources/read"), LOST, tool_is_safe=False, asked=False) == (
        READ_ONLY_METHOD
    )
    assert send_again(call("tools/list"), LOST, tool_is_safe=False, asked=False) == READ_ONLY_METHOD
    assert send_again(call("tools/call"), LOST, tool_is_safe=True, asked=False) == SAFE_TOOL
    assert send_again(call("tools/call"), LOST, tool_is_safe=False, asked=False) is None


def test_never_sent_is_always_sent_again() -> None:
    assert send_again(call("tools/call"), REFUSED, tool_is_safe=False, asked=False) == NEVER_SENT


def test_not_after_a_timeout_a_question_the_clients_error_or_a_round() -> None:
    slow = Failure(FailureKind.UPSTREAM_TIMEOUT, "slow")
    assert send_again(call("tools/list"), slow, tool_is_safe=True, asked=False) is None
    assert send_again(call("tools/call"), LOST, tool_is_safe=True, asked=True) is None
    mine = Failure(FailureKind.INVALID_PARAMS, "bad arguments")
    assert send_again(call("tools/call"), mine, tool_is_safe=True, asked=False) is None
    client_4xx = Failure(FailureKind.UPSTREAM_PROTOCOL, "413", {"status": 413})
    assert send_again(call("tools/list"), client_4xx, tool_is_safe=True, asked=False) is None
    retry_round = call("tools/call", state="s", answers={"k": {"action": "accept"}})
    assert not eligible(retry_round, tool_is_safe=True)
    notification = Call(None, Operation.OTHER, "x/y", {}, ClientContext("x"))
    assert not eligible(notification, tool_is_safe=True)
