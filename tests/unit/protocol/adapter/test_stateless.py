"""2026-07-28, the stateless revision: what each request must carry (its `_meta`,
its headers, its input responses), how listens and their notifications are tagged,
and how results are completed for its clients."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Answer,
    Call,
    ClientContext,
    DecodeFailure,
    Event,
    Failure,
    FailureKind,
    InputRequired,
    Interest,
    Operation,
    Preamble,
    ServerProfile,
    Value,
)
from gateway.protocol import AdapterSet
from gateway.protocol.adapter import TASKS_EXTENSION

MODERN = AdapterSet.default().by_version["2026-07-28"]
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META = {PV: "2026-07-28", CAPS: {}}


def decode(method: str, params: dict[str, Any], *, id_: Any = 1) -> Any:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        body["id"] = id_
    items = MODERN.decode(Preamble(body=body))
    assert len(items) == 1
    return items[0]


def refusal(method: str, params: dict[str, Any]) -> Failure:
    item = decode(method, params)
    assert isinstance(item, DecodeFailure), item
    return item.failure


# ------------------------------------------------------- what a request carries


@pytest.mark.parametrize("method", ["tools/call", "tools/list", "tasks/update"])
@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"inputResponses": 5}, "inputResponses must map each key to a result object"),
        ({"inputResponses": {"q1": "yes"}}, "inputResponses must map each key to a result object"),
        ({"requestState": 5}, "requestState must be a string"),
        ({"requestState": None, "inputResponses": None}, None),
    ],
)
def test_input_responses_and_state_must_be_well_formed(
    method: str, extra: dict[str, Any], said: str | None
) -> None:
    params = {"name": "t", "taskId": "x", **extra, "_meta": META}
    item = decode(method, params)
    if said is None:
        assert not isinstance(item, DecodeFailure)
        return
    assert isinstance(item, DecodeFailure)
    assert item.failure.kind is FailureKind.INVALID_PARAMS
    assert item.failure.message == said
    assert item.method == method and item.id == 1


def test_a_request_without_meta_says_what_is_required() -> None:
    failure = refusal("tools/list", {})
    assert failure.kind is FailureKind.INVALID_PARAMS
    assert failure.message == "params._meta is required"
    # A notification carries no request keys and needs none.
    assert isinstance(decode("notifications/cancelled", {"requestId": 1}, id_=None), Call)


def test_a_notifications_ill_typed_client_keys_are_not_trusted() -> None:
    meta = {CAPS: [1], INFO: "me", LEVEL: 3}
    call = decode("notifications/cancelled", {"requestId": 1, "_meta": meta}, id_=None)
    assert isinstance(call, Call)
    assert call.client.capabilities == {} and call.client.info is None
    assert call.client.log_level is None
    meta = {CAPS: {"roots": {}}, INFO: {"name": "c", "version": "1"}, LEVEL: "debug"}
    call = decode("notifications/cancelled", {"requestId": 1, "_meta": meta}, id_=None)
    assert call.client.capabilities == {"roots": {}}
    assert call.client.info == {"name": "c", "version": "1"}
    assert call.client.log_level == "debug"


def test_answers_and_state_are_taken_out_of_the_params() -> None:
    params = {"name": "t", "inputResponses": {"q1": {"action": "accept"}}, "requestState": "s"}
    call = decode("tools/call", {**params, "_meta": META})
    assert isinstance(call, Call)
    assert call.params == {"name": "t"}
    assert call.answers == {"q1": Answer(result={"action": "accept"})}
    assert call.state == "s"
    # Read leniently where the decode has not checked them first.
    lifted, answers, state = MODERN.answers_for(
        Operation.TOOLS_CALL, {"inputResponses": {"q": "junk"}, "requestState": 5, "a": 1}
    )
    assert lifted == {"a": 1} and answers == {"q": Answer(result={})} and state is None
    lifted, answers, state = MODERN.answers_for(Operation.TOOLS_CALL, {"requestState": "s"})
    assert lifted == {} and answers is None and state == "s"
    lifted, answers, state = MODERN.answers_for(
        Operation.PROMPTS_GET, {"inputResponses": {"q": {"roots": []}}, "name": "p"}
    )
    assert lifted == {"name": "p"} and answers == {"q": Answer(result={"roots": []})}
    assert state is None
    untouched = {"a": 1}
    assert MODERN.answers_for(Operation.TOOLS_CALL, untouched) == (untouched, None, None)


def selected(preamble: Preamble) -> Preamble:
    """As selection leaves a message: the revision its `_meta` names, read once."""
    preamble.named_version = MODERN.named_version(preamble.body)
    return preamble


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "the MCP-Protocol-Version header is required"),
        (
            {"mcp-protocol-version": "2099-01-01"},
            "MCP-Protocol-Version does not match _meta protocolVersion",
        ),
        ({"mcp-protocol-version": "2026-07-28"}, "the Mcp-Method header is required"),
        (
            {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
            "Mcp-Method does not match the body's method",
        ),
        (
            {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"},
            "the Mcp-Name header is required",
        ),
        (
            {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "u"},
            "Mcp-Name does not match params.name",
        ),
        (
            {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "t"},
            None,
        ),
    ],
)
def test_the_standard_headers_must_mirror_the_body(
    headers: dict[str, str], said: str | None
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "t", "_meta": META},
    }
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    failure = MODERN.check_http(selected(Preamble(body=body, headers={**base, **headers})))
    if said is None:
        assert failure is None
        return
    assert failure is not None and failure.kind is FailureKind.HEADER_MISMATCH
    assert failure.message == said
    uri = {**body, "method": "resources/read", "params": {"uri": "file:///a", "_meta": META}}
    named = {**base, "mcp-protocol-version": "2026-07-28", "mcp-method": "resources/read"}
    wrong = MODERN.check_http(
        selected(Preamble(body=uri, headers={**named, "mcp-name": "file:///b"}))
    )
    assert wrong is not None and wrong.message == "Mcp-Name does not match params.uri"


def test_params_that_are_no_object_leave_the_headers_to_the_body_checks() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list",
    }
    assert MODERN.check_http(Preamble(body=body, headers=headers)) is None


def test_only_a_string_names_a_revision() -> None:
    assert MODERN.named_version({"params": {"_meta": {PV: "2026-07-28"}}}) == "2026-07-28"
    assert MODERN.named_version({"params": {"_meta": {PV: 2026}}}) is None
    assert MODERN.named_version({"params": {"_meta": [PV]}}) is None
    assert MODERN.named_version({"params": 5}) is None


# ------------------------------------------------------------------ listens


def test_a_listens_notifications_carry_its_subscription_id() -> None:
    event = Event("notifications/tools/list_changed", {"_meta": {"trace": "t"}})
    tagged = MODERN.encode_event(event, "listen-7")
    assert tagged is not None
    assert tagged["params"]["_meta"] == {"trace": "t", SUBSCRIPTION: "listen-7"}
    bare = MODERN.encode_event(Event("notifications/tools/list_changed", {}), 9)
    assert bare is not None and bare["params"] == {"_meta": {SUBSCRIPTION: 9}}
    untagged = MODERN.encode_event(event)
    assert untagged is not None and untagged["params"] == {"_meta": {"trace": "t"}}


def test_an_upstreams_subscription_id_is_not_relayed() -> None:
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "file:///a", "_meta": {SUBSCRIPTION: "up-1", "trace": "t"}},
    }
    assert MODERN.client_read_event(message) == Event(
        "notifications/resources/updated", {"uri": "file:///a", "_meta": {"trace": "t"}}
    )
    only_id = {**message, "params": {"uri": "file:///a", "_meta": {SUBSCRIPTION: "up-1"}}}
    assert MODERN.client_read_event(only_id) == Event(
        "notifications/resources/updated", {"uri": "file:///a"}
    )


def test_an_acknowledgement_says_what_the_listen_honours() -> None:
    ack = Event(
        "notifications/subscriptions/acknowledged",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}},
    )
    assert MODERN.client_read_acknowledgement(ack) == Interest(
        frozenset({"notifications/tools/list_changed"}), ("file:///a",)
    )
    odd = Event("notifications/subscriptions/acknowledged", {"notifications": ["tools"]})
    assert MODERN.client_read_acknowledgement(odd) == Interest()
    assert MODERN.client_read_acknowledgement(Event("notifications/progress", {})) is None


# ------------------------------------------------------------------ results


def test_discovery_offers_the_tasks_extension_when_the_gateway_runs_tasks() -> None:
    profile = ServerProfile(capabilities={"tools": {}, "extensions": {"x/y": {"a": 1}}})
    found = MODERN.discover_result(profile, ["2026-07-28"], tasks=True)
    assert found["capabilities"]["extensions"] == {"x/y": {"a": 1}, TASKS_EXTENSION: {}}
    plain = MODERN.discover_result(profile, ["2026-07-28"])
    assert TASKS_EXTENSION not in plain["capabilities"]["extensions"]
    odd = ServerProfile(capabilities={"tools": {}, "extensions": "x"})
    found = MODERN.discover_result(odd, ["2026-07-28"], tasks=True)
    assert found["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}


def call_from(capabilities: dict[str, Any], operation: Operation = Operation.TOOLS_LIST) -> Call:
    client = ClientContext("2026-07-28", capabilities=capabilities, adapter=MODERN)
    return Call(1, operation, operation.value, {}, client)


def test_task_only_tools_are_listed_to_clients_whose_tasks_the_gateway_runs() -> None:
    tools = {"tools": [{"name": "now"}, {"name": "long", "execution": {"taskSupport": "required"}}]}
    upstream = ServerProfile(capabilities={"tasks": {"requests": {"tools": {"call": {}}}}})
    task_client = {"extensions": {TASKS_EXTENSION: {}}}

    def listed(capabilities: dict[str, Any], profile: ServerProfile) -> list[str]:
        message = MODERN.encode(call_from(capabilities), profile, Value(tools))
        assert message is not None
        return [tool["name"] for tool in message["result"]["tools"]]

    assert listed(task_client, upstream) == ["now", "long"]
    assert listed({}, upstream) == ["now"]
    assert listed(task_client, ServerProfile()) == ["now"]
    # Other results for such a client are encoded as for anyone.
    called = MODERN.encode(
        call_from(task_client, Operation.TOOLS_CALL), upstream, Value({"content": []})
    )
    assert called is not None and called["result"]["resultType"] == "complete"


def test_a_value_is_complete_unless_it_is_a_task() -> None:
    profile = ServerProfile()
    result = MODERN.project_result(
        Operation.TOOLS_CALL, {"content": [], "resultType": "x"}, profile
    )
    assert result["resultType"] == "complete"
    task = MODERN.project_result(Operation.TOOLS_CALL, {"resultType": "task", "task": {}}, profile)
    assert task["resultType"] == "task"
    assert result["_meta"][SERVER_INFO] == {"name": "upstream", "version": "0"}


def test_a_tasks_input_requests_are_projected_as_input_requests() -> None:
    asked = {
        "q1": {
            "method": "elicitation/create",
            "params": {"message": "m", "elicitationId": "e", "_meta": {"x": 1}, "task": {}},
        },
        "q2": "junk",
        "q3": {"method": "roots/list", "params": None},
        "q4": {"method": "vendor/ask", "params": {"_meta": {"x": 1}}},
    }
    got = MODERN.project_result(
        Operation.TASKS_GET, {"taskId": "t", "inputRequests": asked}, ServerProfile()
    )
    assert got["inputRequests"] == {
        "q1": {"method": "elicitation/create", "params": {"message": "m"}},
        "q2": "junk",
        "q3": {"method": "roots/list", "params": None},
        "q4": {"method": "vendor/ask", "params": {"_meta": {"x": 1}}},
    }
    other = MODERN.project_result(
        Operation.TOOLS_CALL, {"content": [], "inputRequests": asked}, ServerProfile()
    )
    assert other["inputRequests"] == asked


def test_an_upstreams_input_required_keeps_only_string_state() -> None:
    call = call_from({}, Operation.TOOLS_CALL)
    asked = {"q": {"method": "roots/list", "params": {}}}
    message = {"id": 1, "result": {"resultType": "input_required", "inputRequests": asked}}
    for state, kept in (("s", "s"), (5, None)):
        result = {**message["result"], "requestState": state}
        outcome = MODERN.client_read_response(call, {**message, "result": result})
        assert isinstance(outcome, InputRequired)
        assert outcome.state == kept
    odd = MODERN.client_read_response(call, {"id": 1, "result": {"resultType": "later"}})
    assert isinstance(odd, Failure) and odd.message == "unknown resultType 'later'"


def test_input_requests_that_are_no_object_are_skipped_not_the_rest() -> None:
    message = {
        "result": {
            "resultType": "input_required",
            "inputRequests": {
                "a": "junk",
                "b": {"method": "roots/list"},
                "c": {"method": "nope"},
                "d": {"method": "sampling/createMessage", "params": {"maxTokens": 1}},
            },
        }
    }
    asks = MODERN.client_input_requests(message)
    assert sorted(asks) == ["b", "d"]
    assert asks["b"].params == {} and asks["d"].params == {"maxTokens": 1}


def test_headers_for_a_request_without_a_call_mirror_its_message() -> None:
    read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "file:///a"}}
    headers = MODERN.client_headers(None, None, read)
    assert headers["Mcp-Method"] == "resources/read"
    assert headers["Mcp-Name"] == "file:///a"
    bare = MODERN.client_headers(None, None, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert bare["Mcp-Method"] == "tools/list" and "Mcp-Name" not in bare
    nameless = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": None}
    assert "Mcp-Name" not in MODERN.client_headers(None, None, nameless)


def test_a_tools_call_keeps_its_parameter_headers_for_the_tool_check() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "t", "_meta": META},
    }
    headers = {"mcp-param-region": "eu", "mcp-param-x": "=?base64?eA==?=", "mcp-name": "t"}
    call = MODERN.decode(Preamble(body=body, headers=headers))[0]
    assert isinstance(call, Call)
    assert call.param_headers == {"region": "eu", "x": "=?base64?eA==?="}
    # Other transports carry none; other requests keep none.
    over_stdio = MODERN.decode(Preamble(body=body, headers=headers, transport="stdio"))[0]
    assert over_stdio.param_headers is None
    listing = {**body, "method": "tools/list", "params": {"_meta": META}}
    assert MODERN.decode(Preamble(body=listing, headers=headers))[0].param_headers is None
    legacy = AdapterSet.default().by_version["2025-11-25"]
    plain = {**body, "params": {"name": "t"}}
    assert legacy.decode(Preamble(body=plain, headers=headers))[0].param_headers is None


def test_a_client_that_declares_the_tasks_extension_is_one_whose_tasks_we_run() -> None:
    declared = {**META, CAPS: {"extensions": {TASKS_EXTENSION: {}}}}
    call = decode("tools/list", {"_meta": declared})
    assert isinstance(call, Call) and call.client.tasks is True
    plain = decode("tools/list", {"_meta": META})
    assert isinstance(plain, Call) and plain.client.tasks is False
