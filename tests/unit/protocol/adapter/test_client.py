"""Client role, per revision: what the gateway sends upstream and how it reads the answers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Operation,
)
from gateway.protocol.adapter import Adapter, decode_header_value, encode_header_value
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
LEGACY = VERSIONS[:4]
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

CLIENT_INFO = {
    "name": "gw",
    "version": "1",
    "title": "Gateway",
    "description": "d",
    "websiteUrl": "https://x",
    "x-vendor": 1,
}
CLIENT_CAPS = {
    "roots": {"listChanged": True},
    "sampling": {"tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"list": {}},
    "extensions": {"io.modelcontextprotocol/ui": {}},
    "experimental": {"e": {}},
    "com.acme/cap": {},
}


def adapter(version: str) -> Adapter:
    return SET.by_version[version]


def make_call(
    operation: Operation,
    params: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    token: str | int | None = None,
    answers: dict[str, Answer] | None = None,
    state: str | None = None,
    log_level: str | None = None,
    info: dict[str, Any] | None = None,
) -> Call:
    return Call(
        id="down-1",
        operation=operation,
        method=operation.value,
        params=params,
        client=ClientContext(
            protocol_version="2025-06-18",
            capabilities=dict(CLIENT_CAPS),
            info=info,
            log_level=log_level,
        ),
        meta=meta or {},
        progress_token=token,
        answers=answers,
        state=state,
    )


TOOL_CALL = make_call(Operation.TOOLS_CALL, {"name": "add", "arguments": {"a": 1}})


# ------------------------------------------------------------------ headers


@pytest.mark.parametrize("version", VERSIONS)
def test_client_headers(version: str) -> None:
    a = adapter(version)
    with_call = a.client_headers(TOOL_CALL, "sess-1")
    assert with_call["Accept"] == "application/json, text/event-stream"
    if version == MODERN:
        assert with_call == {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "add",
        }
        return
    expected = {"Accept": "application/json, text/event-stream"}
    if version != "2024-11-05":
        expected["Mcp-Session-Id"] = "sess-1"
    if version >= "2025-06-18":
        expected["MCP-Protocol-Version"] = version
    assert with_call == expected


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_initialize_headers_carry_no_version(version: str) -> None:
    # Before the handshake there is neither a session nor a call.
    assert adapter(version).client_headers(None, None) == {
        "Accept": "application/json, text/event-stream"
    }


def test_2026_headers_without_a_call() -> None:
    assert adapter(MODERN).client_headers(None, None) == {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
    }


@pytest.mark.parametrize(
    ("operation", "params", "name"),
    [
        (Operation.TOOLS_CALL, {"name": "add"}, "add"),
        (Operation.PROMPTS_GET, {"name": "greet"}, "greet"),
        (Operation.RESOURCES_READ, {"uri": "file:///a b.txt"}, None),
        (Operation.RESOURCES_READ, {"uri": "https://x/y?z=1"}, "https://x/y?z=1"),
        (Operation.TOOLS_LIST, {}, None),
        (Operation.COMPLETE, {"ref": {"type": "ref/prompt", "name": "p"}}, None),
    ],
)
def test_2026_mcp_name(operation: Operation, params: dict[str, Any], name: str | None) -> None:
    headers = adapter(MODERN).client_headers(make_call(operation, params), None)
    assert headers["Mcp-Method"] == operation.value
    if operation in (Operation.TOOLS_CALL, Operation.PROMPTS_GET, Operation.RESOURCES_READ):
        value = params.get("name", params.get("uri"))
        assert decode_header_value(headers["Mcp-Name"]) == value
        if name is not None:
            assert headers["Mcp-Name"] == name
    else:
        assert "Mcp-Name" not in headers


@pytest.mark.parametrize(
    "value",
    ["café", "日本語ツール", " padded ", "line\nbreak", "=?base64?Zm9v?=", "tab\there"],
)
def test_2026_mcp_name_base64_wraps_what_is_not_plain_ascii(value: str) -> None:
    headers = adapter(MODERN).client_headers(make_call(Operation.TOOLS_CALL, {"name": value}), None)
    header = headers["Mcp-Name"]
    assert header.startswith("=?base64?") and header.endswith("?=")
    assert header.isascii()
    assert base64.b64decode(header[9:-2]).decode("utf-8") == value
    assert decode_header_value(header) == value


@pytest.mark.parametrize("value", ["add", "a.b-c_d", "file:///x/y.txt", "x y"])
def test_plain_values_are_not_wrapped(value: str) -> None:
    assert encode_header_value(value) == value
    assert decode_header_value(value) == value


def test_bad_base64_is_left_as_is() -> None:
    assert decode_header_value("=?base64?!!!?=") == "=?base64?!!!?="
    assert decode_header_value("=?base64?" + base64.b64encode(b"\xff").decode() + "?=") != "\xff"


# -------------------------------------------------------------- handshake

EXPECTED_CLIENT_CAPS: dict[str, set[str]] = {
    "2024-11-05": {"roots", "sampling", "experimental"},
    "2025-03-26": {"roots", "sampling", "experimental"},
    "2025-06-18": {"roots", "sampling", "experimental", "elicitation"},
    "2025-11-25": {"roots", "sampling", "experimental", "elicitation", "tasks"},
    MODERN: {"roots", "sampling", "experimental", "elicitation", "extensions"},
}
EXPECTED_INFO_FIELDS: dict[str, set[str]] = {
    "2024-11-05": {"name", "version"},
    "2025-03-26": {"name", "version"},
    "2025-06-18": {"name", "version", "title"},
    "2025-11-25": {"name", "version", "title", "description", "websiteUrl"},
    MODERN: {"name", "version", "title", "description", "websiteUrl"},
}


def projected_caps(version: str) -> dict[str, Any]:
    return {k: CLIENT_CAPS[k] for k in EXPECTED_CLIENT_CAPS[version] | {"com.acme/cap"}}


def projected_info(version: str) -> dict[str, Any]:
    return {k: CLIENT_INFO[k] for k in EXPECTED_INFO_FIELDS[version] | {"x-vendor"}}


@pytest.mark.parametrize("version", VERSIONS)
def test_client_handshake_params(version: str) -> None:
    params = adapter(version).client_handshake_params(CLIENT_INFO, CLIENT_CAPS)
    assert params == {
        "protocolVersion": version,
        "capabilities": projected_caps(version),
        "clientInfo": projected_info(version),
    }


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_opening_is_initialize(version: str) -> None:
    message = adapter(version).client_opening(0, CLIENT_INFO, CLIENT_CAPS)
    assert message == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": adapter(version).client_handshake_params(CLIENT_INFO, CLIENT_CAPS),
    }


def test_2026_opening_is_discover() -> None:
    message = adapter(MODERN).client_opening("probe", CLIENT_INFO, CLIENT_CAPS)
    assert message == {
        "jsonrpc": "2.0",
        "id": "probe",
        "method": "server/discover",
        "params": {"_meta": {PV: MODERN, CAPS: {}, INFO: projected_info(MODERN)}},
    }


def test_2026_opening_is_a_valid_2026_request() -> None:
    from gateway.core import Preamble

    message = adapter(MODERN).client_opening(1, CLIENT_INFO, {})
    decoded = adapter(MODERN).decode(Preamble(body=message))
    assert isinstance(decoded[0], Call)
    assert decoded[0].operation is Operation.DISCOVER


# ------------------------------------------------------------ decoration


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_decorate_is_a_no_op(version: str) -> None:
    params = {"name": "x", "_meta": {"progressToken": 1}}
    assert adapter(version).client_decorate_params(TOOL_CALL, params) == params


@pytest.mark.parametrize(
    "operation",
    [
        Operation.TOOLS_LIST,
        Operation.TOOLS_CALL,
        Operation.RESOURCES_LIST,
        Operation.RESOURCES_TEMPLATES_LIST,
        Operation.RESOURCES_READ,
        Operation.PROMPTS_LIST,
        Operation.PROMPTS_GET,
        Operation.COMPLETE,
        Operation.LISTEN,
        Operation.DISCOVER,
    ],
    ids=lambda o: o.value,
)
def test_2026_decorates_every_request(operation: Operation) -> None:
    call = make_call(operation, {"x": 1}, log_level="warning", info=CLIENT_INFO)
    params = adapter(MODERN).client_decorate_params(call, {"x": 1, "_meta": {"traceparent": "t"}})
    assert params["x"] == 1
    meta = params["_meta"]
    assert meta["traceparent"] == "t"
    assert meta[PV] == MODERN
    assert meta[CAPS] == projected_caps(MODERN)
    assert meta[INFO] == projected_info(MODERN)
    assert meta[LEVEL] == "warning"


def test_2026_decorate_omits_what_the_client_did_not_say() -> None:
    call = make_call(Operation.TOOLS_LIST, {})
    call.client.capabilities = {}
    params = adapter(MODERN).client_decorate_params(call, {})
    assert params == {"_meta": {PV: MODERN, CAPS: {}}}


# -------------------------------------------------------------- requests


@pytest.mark.parametrize("version", VERSIONS)
def test_client_request_carries_meta_and_progress(version: str) -> None:
    call = make_call(
        Operation.TOOLS_CALL,
        {"name": "add", "arguments": {"a": 1}, "x-extra": True},
        meta={"traceparent": "00-a-b-01", "com.acme/k": [1]},
        token="prog-1",
    )
    message = adapter(version).client_request(call, 77)
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == 77
    assert message["method"] == "tools/call"
    params = message["params"]
    assert params["name"] == "add"
    assert params["arguments"] == {"a": 1}
    assert params["x-extra"] is True
    meta = params["_meta"]
    assert meta["traceparent"] == "00-a-b-01"
    assert meta["com.acme/k"] == [1]
    assert meta["progressToken"] == "prog-1"
    assert (PV in meta) == (version == MODERN)
    assert call.params == {"name": "add", "arguments": {"a": 1}, "x-extra": True}
    assert call.meta == {"traceparent": "00-a-b-01", "com.acme/k": [1]}


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_request_without_meta_has_no_meta(version: str) -> None:
    message = adapter(version).client_request(make_call(Operation.TOOLS_LIST, {}), 1)
    assert message["params"] == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_completion_context(version: str) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "b", "value": "x"},
        "context": {"arguments": {"a": "1"}},
    }
    message = adapter(version).client_request(make_call(Operation.COMPLETE, params), 1)
    assert ("context" in message["params"]) == (version >= "2025-06-18")
    assert message["params"]["argument"] == params["argument"]


ANSWERS = {
    "k1": Answer(result={"action": "accept", "content": {"n": 1}}),
    "k2": Answer(result={"roots": []}),
}


def test_2026_sends_input_responses_and_state() -> None:
    call = make_call(TOOL_CALL.operation, dict(TOOL_CALL.params), answers=ANSWERS, state="st")
    params = adapter(MODERN).client_request(call, 2)["params"]
    assert params["inputResponses"] == {
        "k1": {"action": "accept", "content": {"n": 1}},
        "k2": {"roots": []},
    }
    assert params["requestState"] == "st"
    assert params["name"] == "add"


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_never_sends_input_responses(version: str) -> None:
    call = make_call(TOOL_CALL.operation, dict(TOOL_CALL.params), answers=ANSWERS, state="st")
    params = adapter(version).client_request(call, 2)["params"]
    assert "inputResponses" not in params
    assert "requestState" not in params


# ------------------------------------------------------------- input requests


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("kind", list(AskKind), ids=lambda k: k.value)
def test_legacy_input_requests_from_server_requests(version: str, kind: AskKind) -> None:
    message = {"jsonrpc": "2.0", "id": 31, "method": kind.method, "params": {"p": 1}}
    asks = adapter(version).client_input_requests(message)
    assert asks == {"31": Ask(kind, {"p": 1})}


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_non_ask_messages_have_no_input_requests(version: str) -> None:
    a = adapter(version)
    assert a.client_input_requests({"jsonrpc": "2.0", "id": 1, "method": "ping"}) == {}
    assert a.client_input_requests({"jsonrpc": "2.0", "method": "roots/list"}) == {}
    assert a.client_input_requests({"jsonrpc": "2.0", "id": 1, "result": {}}) == {}


INPUT_REQUIRED_RESULT = {
    "resultType": "input_required",
    "inputRequests": {
        "who": {"method": "elicitation/create", "params": {"message": "Name?"}},
        "llm": {"method": "sampling/createMessage", "params": {"maxTokens": 3}},
        "dirs": {"method": "roots/list"},
        "junk": {"method": "acme/unknown", "params": {}},
        "bad": "not an object",
    },
    "requestState": "opaque",
}


def test_2026_input_requests_from_result() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": INPUT_REQUIRED_RESULT}
    asks = adapter(MODERN).client_input_requests(message)
    assert asks == {
        "who": Ask(AskKind.ELICIT, {"message": "Name?"}),
        "llm": Ask(AskKind.SAMPLE, {"maxTokens": 3}),
        "dirs": Ask(AskKind.LIST_ROOTS, {}),
    }
    assert adapter(MODERN).client_input_requests({"jsonrpc": "2.0", "id": 1, "error": {}}) == {}
