"""Two rules the real server-everything showed were needed (tests/thirdparty/test_feeds.py):
a 400 that names the session is a forgotten session, and a shared channel's session-level
notifications are never one call's."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from gateway.protocol.selection import AdapterSet
from gateway.upstream.carriers.demux import Demux

SET = AdapterSet.default()
EVERYTHING_400 = {
    "jsonrpc": "2.0",
    "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
}


@pytest.mark.parametrize("adapter", SET.handshake, ids=lambda a: a.version)
def test_a_400_naming_the_session_means_the_session_is_gone(adapter: Any) -> None:
    assert adapter.client_names_lost_session(EVERYTHING_400)
    other = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "Invalid request"}}
    assert not adapter.client_names_lost_session(other)
    assert not adapter.client_names_lost_session({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert not adapter.client_names_lost_session("not a message")


@pytest.mark.parametrize(
    ("method", "to_call"),
    [
        ("notifications/resources/updated", False),
        ("notifications/resources/list_changed", False),
        ("notifications/tools/list_changed", False),
        ("notifications/message", True),
    ],
)
def test_one_call_in_flight_gets_its_messages_but_not_the_sessions(
    method: str, to_call: bool
) -> None:
    demux = Demux(16, "test", structlog.get_logger())
    _, queue = demux.register({"jsonrpc": "2.0", "id": 7, "method": "tools/call"})
    demux.route({"jsonrpc": "2.0", "method": method, "params": {}})
    assert (len(queue), len(demux.unsolicited)) == ((1, 0) if to_call else (0, 1))
