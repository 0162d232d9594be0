"""Property tests: no input makes an adapter crash, and failures keep the id."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core import (
    Call,
    ClientContext,
    ClientReply,
    DecodeFailure,
    Event,
    Failure,
    FailureKind,
    InputRequired,
    Operation,
    Preamble,
    ServerProfile,
    SessionView,
    Value,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
ADAPTERS = list(SET.adapters)
IDS = [a.version for a in ADAPTERS]
MODERN = "2026-07-28"
SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The upstream-direction checks go beyond decode: fewer examples keep the suite fast.
LIGHT = settings(SETTINGS, max_examples=100)

FIELD_NAMES = [
    "jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data",
    "_meta", "progressToken", "cursor", "name", "arguments", "uri", "level", "ref", "argument",
    "context", "value", "type", "requestId", "reason", "progress", "total", "taskId",
    "protocolVersion", "capabilities", "clientInfo", "version", "notifications",
    "inputResponses", "requestState", "resultType", "inputRequests", "content", "text",
    "structuredContent", "tools", "resources", "resourceTemplates", "prompts", "messages",
    "contents", "annotations", "title", "icons", "outputSchema", "inputSchema", "_mcp_answers",
    "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel",
    "io.modelcontextprotocol/subscriptionId", "traceparent", "roots", "sampling", "elicitation",
]  # fmt: skip
METHODS = [op.value for op in Operation if op is not Operation.OTHER] + [
    "acme/vendor",
    "notifications/acme",
    "notifications/tasks/status",
    "",
    "*",
]
LOG_LEVELS = ["debug", "info", "warning", "error", "loud"]

keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(METHODS + LOG_LEVELS + [MODERN, "2025-06-18", "2.0"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(keys, json_values, max_size=6)
ids = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
)
modern_meta = st.fixed_dictionaries(
    {
        "io.modelcontextprotocol/protocolVersion": st.sampled_from([MODERN, "2025-06-18"]),
        "io.modelcontextprotocol/clientCapabilities": st.one_of(json_objects, json_values),
    },
    optional={
        "io.modelcontextprotocol/clientInfo": json_values,
        "io.modelcontextprotocol/logLevel": st.one_of(st.sampled_from(LOG_LEVELS), json_values),
        "progressToken": json_values,
        "traceparent": st.text(max_size=10),
    },
)
params = st.one_of(
    json_objects,
    st.builds(lambda p, m: {**p, "_meta": m}, json_objects, st.one_of(modern_meta, json_values)),
    json_values,
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """JSON-RPC-like messages: mostly plausible, sometimes broken anywhere."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    elif draw(st.booleans()):
        message["jsonrpc"] = draw(json_values)
    shape = draw(st.sampled_from(["request", "notification", "response", "junk"]))
    if shape in ("request", "response") or (shape == "junk" and draw(st.booleans())):
        message["id"] = draw(ids)
    if shape in ("request", "notification"):
        message["method"] = draw(st.one_of(st.sampled_from(METHODS), json_values))
        if draw(st.integers(0, 4)):
            message["params"] = draw(params)
    if shape == "response":
        if draw(st.booleans()):
            message["result"] = draw(json_values)
        if draw(st.booleans()):
            message["error"] = draw(json_values)
    if shape == "junk":
        message.update(draw(json_objects))
    return message


bodies = st.one_of(
    messages(),
    st.lists(messages(), max_size=4),
    json_values,
)
sessions = st.one_of(
    st.none(),
    st.builds(
        SessionView,
        id=st.just("s"),
        protocol_version=st.sampled_from([*IDS, "1999-01-01"]),
        capabilities=json_objects,
    ),
)
headers = st.dictionaries(
    st.sampled_from(
        ["content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name", "x-other"]
    ),
    st.one_of(
        st.text(max_size=20),
        st.sampled_from(
            [MODERN, "2025-06-18", "application/json", "application/json, text/event-stream"]
        ),
    ),
    max_size=5,
)


def has_valid_id(message: Any) -> bool:
    return isinstance(message, dict) and "id" in message and rpc.valid_id(message["id"])


def check_decoded(adapter: Adapter, body: Any, items: list[Any]) -> None:
    assert isinstance(items, list)
    assert items
    for item in items:
        assert isinstance(item, Call | ClientReply | DecodeFailure)
        if isinstance(item, DecodeFailure):
            assert isinstance(item.failure, Failure)
            assert item.id is None or rpc.valid_id(item.id)
        if isinstance(item, Call):
            assert isinstance(item.params, dict)
            assert "_meta" not in item.params
            assert item.client.protocol_version
            assert isinstance(item.client.capabilities, dict)
    if isinstance(body, dict):
        assert len(items) == 1
        item = items[0]
        if has_valid_id(body):
            assert not isinstance(item, Call) or item.id == body["id"]
            if isinstance(item, DecodeFailure):
                assert item.id == body["id"]
    elif isinstance(body, list) and body and adapter.allows_batch and len(items) == len(body):
        for message, item in zip(body, items, strict=True):
            if isinstance(item, DecodeFailure) and has_valid_id(message):
                assert item.id == message["id"]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@SETTINGS
@given(body=bodies, session=sessions)
def test_decode_never_crashes(adapter: Adapter, body: Any, session: SessionView | None) -> None:
    items = adapter.decode(Preamble(body=body, session=session))
    check_decoded(adapter, body, items)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@SETTINGS
@given(
    message_id=st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=8)),
    method=st.sampled_from(METHODS),
    params=params,
)
def test_failures_keep_valid_ids(
    adapter: Adapter, message_id: Any, method: str, params: Any
) -> None:
    body = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
    items = adapter.decode(Preamble(body=body))
    assert len(items) == 1
    item = items[0]
    assert isinstance(item, Call | DecodeFailure)
    assert item.id == message_id


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@SETTINGS
@given(data=st.binary(max_size=64))
def test_random_bytes(adapter: Adapter, data: bytes) -> None:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        preamble = Preamble(body=None, parse_error=str(exc))
        items = adapter.decode(preamble)
        assert len(items) == 1
        assert isinstance(items[0], DecodeFailure)
        assert items[0].id is None
        assert items[0].failure.kind is FailureKind.PARSE_ERROR
        return
    check_decoded(adapter, body, adapter.decode(Preamble(body=body)))


@SETTINGS
@given(body=bodies, session=sessions, header_map=headers)
def test_selection_and_transport_checks_never_crash(
    body: Any, session: SessionView | None, header_map: dict[str, str]
) -> None:
    preamble = Preamble(body=body, session=session, headers=header_map)
    selected = SET.select(preamble)
    assert isinstance(selected, Adapter | Failure)
    for adapter in ADAPTERS:
        failure = adapter.check_http(preamble)
        assert failure is None or isinstance(failure, Failure)


# ------------------------------------------------ upstream garbage, other way

RESULT_OPS = [
    Operation.TOOLS_LIST,
    Operation.TOOLS_CALL,
    Operation.RESOURCES_LIST,
    Operation.RESOURCES_TEMPLATES_LIST,
    Operation.RESOURCES_READ,
    Operation.PROMPTS_LIST,
    Operation.PROMPTS_GET,
    Operation.DISCOVER,
    Operation.OTHER,
]
result_objects = st.dictionaries(
    st.sampled_from(FIELD_NAMES),
    st.one_of(json_values, st.lists(json_objects, max_size=3)),
    max_size=6,
)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@LIGHT
@given(operation=st.sampled_from(RESULT_OPS), result=result_objects)
def test_encoding_upstream_results_never_crashes(
    adapter: Adapter, operation: Operation, result: dict[str, Any]
) -> None:
    call = Call(
        id=1, operation=operation, method=operation.value, params={},
        client=ClientContext(adapter.version),
    )  # fmt: skip
    message = adapter.encode(call, ServerProfile(), Value(result))
    assert message is not None
    assert isinstance(message.get("result"), dict)
    orjson.dumps(message)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@LIGHT
@given(
    method=st.sampled_from(
        ["notifications/progress", "notifications/tools/list_changed", "notifications/message"]
    ),
    params=json_objects,
    listen_id=st.one_of(st.none(), st.integers(), st.text(max_size=5)),
)
def test_encoding_upstream_events_never_crashes(
    adapter: Adapter, method: str, params: dict[str, Any], listen_id: Any
) -> None:
    message = adapter.encode_event(Event(method, params), listen_id)
    assert message is None or message["method"] == method


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@LIGHT
@given(message=messages(), client=st.sampled_from(ADAPTERS))
def test_reading_upstream_responses_never_crashes(
    adapter: Adapter, message: Any, client: Adapter
) -> None:
    """``adapter`` the upstream's, reading for a client of any revision, whose adapter
    then encodes what was read (the translation across eras, both ways)."""
    call = Call(
        id=1, operation=Operation.TOOLS_CALL, method="tools/call", params={"name": "t"},
        client=ClientContext(client.version),
    )  # fmt: skip
    if not isinstance(message, dict):
        return
    outcome = adapter.client_read_response(call, message)
    assert isinstance(outcome, Value | InputRequired | Failure)
    encoded = client.encode(call, ServerProfile(), outcome)
    assert encoded is not None and encoded.get("id") == 1, encoded
    orjson.dumps(encoded)
    assert isinstance(adapter.client_input_requests(message), dict)
    event = adapter.client_read_event(message)
    assert event is None or isinstance(event, Event)
    if event is not None:  # an event read is one every client revision can be given
        assert isinstance(event.method, str), event
        for client in ADAPTERS:
            encoded = client.encode_event(event)
            assert encoded is None or encoded["method"] == event.method
