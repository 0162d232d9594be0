"""JSON-RPC 2.0 framing (section 4 and 5 of the specification): what is a request,
a notification, a response; the messages built; the ids MCP accepts."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import jsonrpc as rpc

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/initialized"}
RESULT = {"jsonrpc": "2.0", "id": 1, "result": {}}
ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (REQUEST, "request"),
        ({**REQUEST, "id": None}, "request"),  # an id, though null
        (NOTIFICATION, "notification"),
        (RESULT, "response"),
        (ERROR, "response"),
        ({"jsonrpc": "2.0", "id": 1, "error": {}}, "response"),
        # Neither: a method that is not a string, an id alone, a result without id,
        # and a request that also carries a result.
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, None),
        ({"jsonrpc": "2.0", "method": None}, None),
        ({"jsonrpc": "2.0", "id": 1}, None),
        ({"jsonrpc": "2.0", "result": {}}, None),
        ({"jsonrpc": "2.0", "error": {}}, None),
        ({**REQUEST, "result": {}}, "request"),
        ([REQUEST], None),
        ("ping", None),
    ],
)
def test_each_message_is_one_kind_or_none(message: Any, kind: str | None) -> None:
    assert rpc.is_request(message) is (kind == "request")
    assert rpc.is_notification(message) is (kind == "notification")
    assert rpc.is_response(message) is (kind == "response")


def test_built_messages_carry_params_only_when_given() -> None:
    assert rpc.request(1, "ping") == REQUEST
    assert rpc.request("a", "tools/list", {}) == {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "tools/list",
        "params": {},
    }
    assert rpc.notification("notifications/initialized") == NOTIFICATION
    assert rpc.notification("n", {"x": 1})["params"] == {"x": 1}
    assert rpc.result(1, {}) == RESULT
    assert rpc.error(None, -32700, "Parse error") == ERROR
    assert rpc.error(2, -32602, "bad", {"field": "x"})["error"]["data"] == {"field": "x"}


def test_stored_objects_are_read_back_or_none() -> None:
    assert rpc.load_object(rpc.dumps({"a": [1]})) == {"a": [1]}
    assert rpc.load_object(None) is None
    assert rpc.load_object(b"{not json") is None
    assert rpc.load_object(b"[1, 2]") is None
    assert rpc.loads("[1]") == [1]


@pytest.mark.parametrize(
    ("value", "valid"),
    [("a", True), ("", True), (0, True), (-5, True), (None, False), (True, False), (1.0, False)],
)
def test_ids_mcp_accepts(value: Any, valid: bool) -> None:
    assert rpc.valid_id(value) is valid


# ------------------------------------------- a response's id from a line's head


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "result": {"blob": "yyy', 7),
        (b' {"id":"a","error":{"code":1', "a"),
        (b'{"id": 7, "jsonrpc": "2.0", "result":', 7),
        # A request of the server's: its id is in the server's numbering.
        (b'{"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params"', None),
        (b'{"method": "x", "id": 7, "result": 1', None),
        # A nested value before the result: where it ends is past the head.
        (b'{"meta": {"id": 8}, "id": 7, "result": 1', None),
        (b'{"tags": ["a"], "id": 7, "result": 1', None),
        (b'{"id": true, "result": 1', None),  # no valid id
        (b'{"id" 7, "result": 1', None),  # no colon
        (b'[{"id": 7, "result": 1', None),  # a batch
        (b'{"id": 7', None),  # cut short before the result
        (b'{"id": 7, "result": "\xff\xfe', 7),  # a head cut inside a character
    ],
)
def test_response_id_reads_only_what_the_head_shows(head: bytes, expected: object) -> None:
    assert rpc.response_id(head) == expected
