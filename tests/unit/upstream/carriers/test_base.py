"""The one rule for which message answers a request (gateway.upstream.carriers.base)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.upstream.carriers.base import (
    CarrierError,
    Message,
    UpstreamReply,
    final,
    is_response_to,
)

ERROR = {"code": -32600, "message": "bad"}


@pytest.mark.parametrize(
    ("message", "status", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, 200, True),
        ({"jsonrpc": "2.0", "id": 1, "error": ERROR}, 200, True),
        ({"jsonrpc": "2.0", "id": 2, "result": {}}, 200, False),
        # A null (or missing) id: an error is the request's own, a result is nobody's.
        ({"jsonrpc": "2.0", "id": None, "error": ERROR}, 200, True),
        ({"jsonrpc": "2.0", "error": ERROR}, 200, True),
        ({"jsonrpc": "2.0", "id": None, "result": {}}, 200, False),
        # The HTTP error answer to this very request: whatever id its error quotes.
        ({"jsonrpc": "2.0", "id": "made-up", "error": ERROR}, 400, True),
        ({"jsonrpc": "2.0", "id": "made-up", "error": ERROR}, 200, False),
        ({"jsonrpc": "2.0", "id": "made-up", "result": {}}, 400, False),
        # Requests and notifications answer nothing.
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, 200, False),
        ({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}, 200, False),
        ({"jsonrpc": "2.0", "id": 1}, 200, False),
    ],
)
def test_is_response_to(message: Message, status: int, expected: bool) -> None:
    assert is_response_to(message, 1, status) is expected


def exchange_of(status: int, *messages: dict[str, Any]) -> UpstreamReply:
    async def items() -> AsyncIterator[Message]:
        for message in messages:
            yield message

    return UpstreamReply(status, {}, items())


async def test_final_skips_what_comes_before_the_answer() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    answer = {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
    assert await final(exchange_of(200, note, answer), 3) == answer


async def test_final_takes_an_http_error_answer_whatever_its_id() -> None:
    error = {"jsonrpc": "2.0", "id": 99, "error": ERROR}
    assert await final(exchange_of(400, error), 3) == error


async def test_final_without_an_answer_is_a_carrier_error() -> None:
    with pytest.raises(CarrierError):
        await final(exchange_of(200, {"jsonrpc": "2.0", "id": 4, "result": {}}), 3)
