"""Server-role decode, per revision: a message's structure, batches, and the Call it becomes."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Answer,
    Call,
    ClientReply,
    DecodeFailure,
    FailureKind,
    Operation,
    Preamble,
)
from tests.unit.protocol.adapter.test_server_decode import (
    ANSWERS,
    LEGACY,
    MODERN,
    VERSIONS,
    adapter,
    call_of,
    decode,
    failure_of,
    initialize_params,
    message,
)

# ------------------------------------------------------------- structure


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("body", "expected_id"),
    [
        ({"id": 1, "method": "tools/list"}, 1),
        ({"jsonrpc": "1.0", "id": "a", "method": "tools/list"}, "a"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, 1),
        ({"jsonrpc": "2.0", "id": 1, "method": 12}, 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}, 1),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, None),
        ({"jsonrpc": "2.0"}, None),
        ("tools/list", None),
        (17, None),
        (None, None),
    ],
    ids=lambda x: str(x)[:40],
)
def test_malformed_messages_are_invalid_requests(version: str, body: Any, expected_id: Any) -> None:
    failure = failure_of(version, body)
    assert failure.failure.kind is FailureKind.INVALID_REQUEST
    assert failure.id == expected_id


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_errors(version: str) -> None:
    items = adapter(version).decode(Preamble(body=None, parse_error="unexpected character"))
    assert len(items) == 1
    item = items[0]
    assert isinstance(item, DecodeFailure)
    assert item.id is None
    assert item.failure.kind is FailureKind.PARSE_ERROR
    assert "unexpected character" in item.failure.message


# ----------------------------------------------------------------- batches


def test_2025_03_26_batch_of_requests_and_notifications() -> None:
    version = "2025-03-26"
    body = [
        message(version, "tools/list", id_=1),
        message(
            version,
            "notifications/progress",
            {"progressToken": 1, "progress": 0.5},
            notification=True,
        ),
        message(version, "tools/call", {"name": "x"}, id_="two"),
        {"jsonrpc": "2.0", "id": "ask-1", "result": {}},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {}},
        message(version, "ping", id_=3),
    ]
    items = decode(version, body)
    assert len(items) == 6
    assert isinstance(items[0], Call) and items[0].operation is Operation.TOOLS_LIST
    assert isinstance(items[1], Call) and items[1].operation is Operation.PROGRESS
    assert items[1].id is None
    assert isinstance(items[2], Call) and items[2].id == "two"
    assert isinstance(items[3], ClientReply) and items[3].id == "ask-1"
    assert isinstance(items[4], DecodeFailure) and items[4].id == 9
    assert items[4].failure.kind is FailureKind.INVALID_PARAMS
    assert isinstance(items[5], Call) and items[5].operation is Operation.PING


def test_2025_03_26_empty_batch_fails() -> None:
    items = decode("2025-03-26", [])
    assert len(items) == 1
    assert isinstance(items[0], DecodeFailure)
    assert items[0].failure.kind is FailureKind.INVALID_REQUEST


def test_2025_03_26_initialize_in_a_batch_fails() -> None:
    version = "2025-03-26"
    body = [
        message(version, "tools/list", id_=1),
        message(version, "initialize", initialize_params(version), id_="init"),
    ]
    items = decode(version, body, with_session=False)
    # The batch is refused whole: every request in it is told so (none goes unanswered).
    assert [(i.id, i.method) for i in items if isinstance(i, DecodeFailure)] == [
        (1, "tools/list"),
        ("init", "initialize"),
    ]
    assert all(
        isinstance(i, DecodeFailure) and i.failure.kind is FailureKind.INVALID_REQUEST
        for i in items
    )


def test_2025_03_26_batch_items_that_are_not_objects() -> None:
    items = decode("2025-03-26", [1, "x", None])
    assert len(items) == 3
    assert all(isinstance(i, DecodeFailure) for i in items)
    assert all(i.failure.kind is FailureKind.INVALID_REQUEST for i in items)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v != "2025-03-26"])
def test_batches_elsewhere_are_invalid_requests(version: str) -> None:
    assert not adapter(version).allows_batch
    items = decode(version, [message(version, "tools/list", id_=1)])
    assert len(items) == 1
    assert isinstance(items[0], DecodeFailure)
    assert items[0].failure.kind is FailureKind.INVALID_REQUEST
    assert "batch" in items[0].failure.message
    empty = decode(version, [])
    assert isinstance(empty[0], DecodeFailure)
    assert empty[0].failure.kind is FailureKind.INVALID_REQUEST


# ---------------------------------------------------------- the Call itself


@pytest.mark.parametrize("version", VERSIONS)
def test_call_name(version: str) -> None:
    call = call_of(version, message(version, "tools/call", {"name": "add"}))
    assert call.name == "add"
    call = call_of(version, message(version, "resources/read", {"uri": "file:///x"}))
    assert call.name == "file:///x"
    call = call_of(version, message(version, "prompts/get", {"name": "p"}))
    assert call.name == "p"
    call = call_of(version, message(version, "tools/list"))
    assert call.name is None


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_params_fields_pass_through(version: str) -> None:
    params = {"name": "t", "arguments": {}, "task": {"ttl": 100}, "x-vendor": [1]}
    call = call_of(version, message(version, "tools/call", params))
    assert call.params == params


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_does_not_mutate_the_body(version: str) -> None:
    body = message(
        version,
        "tools/call",
        {"name": "t", "inputResponses": ANSWERS, "requestState": "s"},
        meta={"progressToken": 1, "traceparent": "x"},
    )
    import copy

    before = copy.deepcopy(body)
    decode(version, body)
    assert body == before


def test_2026_vendor_notifications_need_no_meta() -> None:
    # NotificationParams._meta is optional on 2026: an unknown notification is forwarded.
    body = message(MODERN, "notifications/acme/poke", {"n": 1}, notification=True)
    call = call_of(MODERN, body)
    assert call.operation is Operation.OTHER
    assert call.id is None
    assert call.params == {"n": 1}


def test_2026_vendor_requests_need_meta() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "acme/frobnicate", "params": {}}
    failure = failure_of(MODERN, body)
    assert failure.id == 1
    assert failure.failure.kind is FailureKind.INVALID_PARAMS


# ------------------------------------------------- what each refusal says


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("body", "kind", "said"),
    [
        ([], FailureKind.INVALID_REQUEST, None),  # decoded per item (batches below)
        ("ping", FailureKind.INVALID_REQUEST, "a JSON-RPC message must be an object"),
        ({"id": 1, "method": "ping"}, FailureKind.INVALID_REQUEST, 'jsonrpc must be "2.0"'),
        (
            {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
            FailureKind.INVALID_REQUEST,
            "id must be a string or an integer",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": ""},
            FailureKind.INVALID_REQUEST,
            "method must be a non-empty string",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
            FailureKind.INVALID_REQUEST,
            "params must be an object",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": 1}},
            FailureKind.INVALID_PARAMS,
            "_meta must be an object",
        ),
        ({"jsonrpc": "2.0"}, FailureKind.INVALID_REQUEST, "a message needs a method or an id"),
        (
            {"jsonrpc": "2.0", "id": 1},
            FailureKind.INVALID_REQUEST,
            "a response has a result or an error",
        ),
    ],
    ids=lambda x: str(x)[:30],
)
def test_each_malformed_message_is_refused_saying_why(
    version: str, body: Any, kind: FailureKind, said: str | None
) -> None:
    if said is None:
        return
    failure = failure_of(version, body)
    assert failure.failure.kind is kind
    assert failure.failure.message == said


@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_message_keeps_the_method_it_named(version: str) -> None:
    body = {"jsonrpc": "1.0", "id": 4, "method": "tools/list"}
    assert failure_of(version, body).method == "tools/list"
    assert failure_of(version, {"jsonrpc": "1.0", "id": 4, "method": 7}).method is None
    assert failure_of(version, "not an object").method is None


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_method_is_said_as_json_rpc_says_it(version: str) -> None:
    unknown = "initialize" if version == MODERN else "server/discover"
    failure = failure_of(version, message(version, unknown, {}))
    assert failure.failure.kind is FailureKind.UNKNOWN_METHOD
    assert failure.failure.message == f"Method not found: {unknown}"
    assert failure.method == unknown


@pytest.mark.parametrize("version", VERSIONS)
def test_a_request_sent_as_a_notification_and_back_is_refused_by_name(version: str) -> None:
    as_note = failure_of(version, message(version, "tools/list", notification=True))
    assert as_note.failure.kind is FailureKind.INVALID_REQUEST
    assert as_note.failure.message == "tools/list must be a request"
    assert as_note.method == "tools/list"
    cancelled = "notifications/cancelled"
    as_request = failure_of(version, message(version, cancelled, {"requestId": 1}, id_=5))
    assert as_request.failure.message == f"{cancelled} must be a notification"
    assert as_request.id == 5 and as_request.method == cancelled


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_params_say_where_at_most_three_times(version: str) -> None:
    params = {"name": 5, "arguments": [1], "_meta": {"progressToken": 1}}
    failure = failure_of(version, message(version, "tools/call", params))
    assert failure.failure.kind is FailureKind.INVALID_PARAMS
    assert failure.failure.data == {"method": "tools/call"}
    assert failure.method == "tools/call"
    said = failure.failure.message
    assert said.startswith("Invalid params: name: ")
    assert "; arguments: " in said
    # Nested places are dotted; past three, the rest is not listed.
    if version != MODERN:
        wrong = {"protocolVersion": 1, "capabilities": 2, "clientInfo": {"name": 1, "version": 2}}
        init = failure_of(version, message(version, "initialize", wrong))
        assert init.failure.message.count("; ") == 2
        assert "; clientInfo.name: " in init.failure.message
        assert "clientInfo.version" not in init.failure.message


@pytest.mark.parametrize("version", LEGACY)
def test_a_tools_call_meta_under_its_other_name_is_checked(version: str) -> None:
    """Its model reads `meta` as `_meta` too: no quick path around that check."""
    bad = {"name": "t", "meta": 5}
    assert failure_of(version, message(version, "tools/call", bad)).failure.kind is (
        FailureKind.INVALID_PARAMS
    )


def test_the_usual_tools_call_params_are_seen_valid_without_the_model() -> None:
    from gateway.protocol.adapter.server import _plainly_valid

    usual = [
        {"name": "t"},
        {"name": "t", "arguments": {"a": 1}},
        {"name": "t", "arguments": None, "_meta": {"progressToken": 1}},
        {"name": "t", "_meta": None},
    ]
    for params in usual:
        assert _plainly_valid(Operation.TOOLS_CALL, params), params
    doubtful = [
        {},
        {"name": 5},
        {"name": "t", "arguments": [1]},
        {"name": "t", "_meta": 5},
        {"name": "t", "meta": {}},
    ]
    for params in doubtful:
        assert not _plainly_valid(Operation.TOOLS_CALL, params), params
    assert not _plainly_valid(Operation.PROMPTS_GET, {"name": "t"})


# ----------------------------------------------------------------- batches, refused


def test_a_batch_is_refused_where_the_revision_has_none_saying_so() -> None:
    for version in VERSIONS:
        if version == "2025-03-26":
            continue
        items = decode(version, [message(version, "tools/list", id_=1)])
        assert items[0].failure.message == (
            "JSON-RPC batches are not part of this protocol revision"
        )
        assert items[0].id is None
    empty = decode("2025-03-26", [])
    assert empty[0].failure.message == "empty batch"


def test_an_initialize_batch_tells_its_requests_only() -> None:
    version = "2025-03-26"
    body = [
        message(version, "initialize", initialize_params(version), id_="init"),
        {"jsonrpc": "2.0", "id": "ask-1", "result": {}},  # a reply is no request
        message(version, "notifications/initialized", notification=True),
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}},  # invalid too
    ]
    items = decode(version, body, with_session=False)
    assert [(i.id, i.method) for i in items] == [("init", "initialize"), (7, "tools/call")]
    for item in items:
        assert item.failure.kind is FailureKind.INVALID_REQUEST
        assert item.failure.message == "initialize must not be part of a batch"


# ------------------------------------------------- asks carried in tool arguments


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_answers_in_reserved_arguments_are_lifted_out(version: str) -> None:
    arguments = {
        "a": 1,
        "_mcp_answers": {"q1": {"name": "Ada"}, "q2": {"action": "decline"}},
        "_mcp_state": "opaque",
    }
    call = call_of(version, message(version, "tools/call", {"name": "t", "arguments": arguments}))
    assert call.params["arguments"] == {"a": 1}
    assert call.answers == {
        # A bare answer is what the user accepted; one with an action is as it is.
        "q1": Answer(result={"action": "accept", "content": {"name": "Ada"}}),
        "q2": Answer(result={"action": "decline"}),
    }
    assert call.state == "opaque"
    # State alone, answers that are no object, state that is no string.
    only_state = {"_mcp_state": "s", "b": 2}
    call = call_of(version, message(version, "tools/call", {"name": "t", "arguments": only_state}))
    assert call.params["arguments"] == {"b": 2}
    assert call.answers is None and call.state == "s"
    odd = {"_mcp_answers": [1], "_mcp_state": 5}
    call = call_of(version, message(version, "tools/call", {"name": "t", "arguments": odd}))
    assert call.params["arguments"] == {}
    assert call.answers is None and call.state is None
    only_answers = {"_mcp_answers": {"q": {"x": 1}}}
    call = call_of(
        version, message(version, "tools/call", {"name": "t", "arguments": only_answers})
    )
    assert call.params["arguments"] == {} and call.state is None
    assert call.answers == {"q": Answer(result={"action": "accept", "content": {"x": 1}})}


@pytest.mark.parametrize("version", VERSIONS)
def test_reserved_arguments_are_plain_arguments_elsewhere(version: str) -> None:
    arguments = {"_mcp_answers": {"q": {}}, "_mcp_state": "s"}
    lifts = version in ("2024-11-05", "2025-03-26")
    for method, params in [
        ("prompts/get", {"name": "p", "arguments": {"_mcp_state": "s"}}),
        ("tools/call", {"name": "t", "arguments": arguments}),
    ]:
        call = call_of(version, message(version, method, params))
        kept = method != "tools/call" or not lifts
        assert (call.params["arguments"] == params["arguments"]) is kept
        assert (call.state == "s") is (not kept)


@pytest.mark.parametrize("version", VERSIONS)
def test_form_elicitation_is_always_within_reach_where_asks_go_in_arguments(
    version: str,
) -> None:
    lifts = version in ("2024-11-05", "2025-03-26")
    a = adapter(version)
    assert a.effective_capabilities({}) == ({"elicitation": {"form": {}}} if lifts else {})
    declared = {"elicitation": {"url": {}}, "roots": {}}
    assert a.effective_capabilities(declared) == declared
